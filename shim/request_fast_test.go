package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFastIDPromptsAgreeWithDecodePrompts: the one-pass reader of token-id
// prompts gives what the general decoder gives, and leaves to it whatever it
// does not take.
func TestFastIDPromptsAgreeWithDecodePrompts(t *testing.T) {
	big := "[" + strings.Repeat("31999, ", 600) + "7]"
	batch := "[" + strings.TrimSuffix(strings.Repeat("[1,2,3],", maxBatch), ",") + "]"
	tooMany := "[" + strings.TrimSuffix(strings.Repeat("[1],", maxBatch+1), ",") + "]"
	fast := []string{`[1,2,3]`, ` [ 0 , 10 ,2147483647 ] `, `[[1,2],[3]]`, "[\n[5]\t,\n[6,7]\n]", big, batch}
	for _, in := range append(fast,
		// left to the general decoder (which takes -0 as 0 and refuses the others)
		`[]`, `[[]]`, `[[1],[]]`, `[2147483648]`, `[01]`, `[-0]`, `[-1]`, `[1.0]`, `[1e3]`, `[1,]`, `[1 2]`,
		`[[1],"text"]`, `["a","b"]`, `"text"`, `[[1]`, `[1]]`, tooMany, `[[1],[2]`, `{"a":1}`,
	) {
		want, wantErr := decodePrompts([]byte(in))
		got, ok := fastIDPrompts([]byte(in))
		if ok && (wantErr != nil || !reflect.DeepEqual(got, want)) {
			t.Errorf("fastIDPrompts(%.60s) = %v, decodePrompts = %v, %v", in, got, want, wantErr)
		}
		if !ok && slices.Contains(fast, in) {
			t.Errorf("fastIDPrompts(%.60s) left a token-id prompt to the general decoder", in)
		}
		if gotAll, err := parsePrompts([]byte(in)); (err != nil) != (wantErr != nil) || !reflect.DeepEqual(gotAll, want) {
			t.Errorf("parsePrompts(%.60s) = %v, %v; want %v, %v", in, gotAll, err, want, wantErr)
		}
	}
}

// decoderFields is what json.Decoder makes of an object, as decodeObject read every request
// before splitObject.
func decoderFields(in []byte) (fields, error) {
	var f fields
	dec := json.NewDecoder(bytes.NewReader(in))
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the object")
	}
	return f, nil
}

// TestSplitObjectAgreesWithTheDecoder: splitObject reads a request's members as json.Decoder
// does, and leaves to it what it refuses (then with its error) or what has escaped keys.
func TestSplitObjectAgreesWithTheDecoder(t *testing.T) {
	for _, in := range []string{
		string(lmEvalEchoBody(16)),
		`{}`, ` { } `,
		"{\n\t\"prompt\" : [ [1, 2] , [3] ] ,\r\n \"stop\": [\"}\", \"\\\"]\\\\\"], \"n\":-1.5e3, \"x\":{\"a\":[true,false,null]} }",
		`{"a":1,"a":2}`, `{"é":"ü","b":""}`, `{"s":"\u0041\ud83d\ude00"}`,
	} {
		want, err := decoderFields([]byte(in))
		if err != nil {
			t.Fatalf("decoder refused %s: %v", in, err)
		}
		got, ok := splitObject([]byte(in))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("splitObject(%.80s) = %q, %v; want %q (json.Decoder)", in, got, ok, want)
		}
	}
	for _, in := range []string{
		`{"a\u0062":1}`, // an escaped key: the decoder unescapes it
		`{"a":1,}`, `{"a":1} {}`, `{"a":[1}`, `{"a"}`, `{"a":01}`, `{"a":"\x"}`, "{\"a\":\"\t\"}", `{"a":1`, `{`,
	} {
		if got, ok := splitObject([]byte(in)); ok {
			t.Errorf("splitObject(%s) = %q, want it left to json.Decoder", in, got)
		}
	}
	// malformed requests keep the decoder's message
	if _, err := decodeObject([]byte(`{"prompt":[1,2,}`)); err == nil || !strings.Contains(err.Error(), "malformed JSON: invalid character '}'") {
		t.Errorf("decodeObject of a malformed request: %v, want the decoder's malformed JSON error", err)
	}
}

// FuzzSplitObject: what splitObject takes, json.Decoder takes too and reads the same; nothing
// makes it panic.
func FuzzSplitObject(f *testing.F) {
	f.Add(string(lmEvalEchoBody(4)))
	f.Add(`{"stop":["}","\"]"],"x":{"a":[true,null,-1.5e3]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := splitObject([]byte(in))
		if !ok {
			return
		}
		want, err := decoderFields([]byte(in))
		if err != nil {
			t.Fatalf("splitObject took %q, which json.Decoder refuses: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("splitObject(%q) = %q, json.Decoder %q", in, got, want)
		}
	})
}
