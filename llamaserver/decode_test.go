package llamaserver

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestNativeResponseDecodeMatchesEncodingJSON: the decoder that takes the flat
// prompt logprobs out first gives what json.Unmarshal gives, and fails where
// it fails, wherever the member is, whatever the strings before it hold.
func TestNativeResponseDecodeMatchesEncodingJSON(t *testing.T) {
	flat := `{"n_top":1,"logprobs":[-1.5,-0.25,-3.0000001192092896e-05],"top_ids":[7,0,12],"top_logprobs":[-0.5,-0.25,-1e-7]}`
	for _, tc := range []struct {
		name, body string
		fails      bool
	}{
		{"only member", `{"prompt_logprobs_flat":` + flat + `}`, false},
		{"first", `{"prompt_logprobs_flat":` + flat + `,"content":"x","tokens":[5]}`, false},
		{"middle", `{"content":"a \"}\" {","prompt_logprobs_flat":` + flat + `,"tokens":[5],"stop":true}`, false},
		{"last", `{"content":"x","timings":{"prompt_n":3,"prompt_ms":1.5,"cache_n":0},"completion_probabilities":[{"id":5,"token":"[","logprob":-0.1,"top_logprobs":[]}],"prompt_logprobs_flat":` + flat + `}`, false},
		{"spaces", " {\n \"stop\" : false ,\n \"prompt_logprobs_flat\" :\t" + strings.ReplaceAll(flat, ",", " , ") + " \n} ", false},
		{"escaped key before", `{"con\"tent":"\\","prompt_logprobs_flat":` + flat + `}`, false},
		{"null", `{"content":"x","prompt_logprobs_flat":null}`, false},
		{"absent", `{"content":"x","tokens":[1,2]}`, false},
		{"empty arrays", `{"prompt_logprobs_flat":{"n_top":0,"logprobs":[],"top_ids":[],"top_logprobs":[]}}`, false},
		{"full form", `{"prompt_probabilities":[{"id":3,"token":"a","bytes":[97],"logprob":-1,"top_logprobs":[]}]}`, false},
		{"nested key of that name", `{"timings":{"prompt_logprobs_flat":1},"prompt_logprobs_flat":` + flat + `}`, false},
		{"number forms", `{"prompt_logprobs_flat":{"n_top":1,"logprobs":[-0,0.5,-1E+2],"top_ids":[0,1,2],"top_logprobs":[1e-320,-2.5e2,-123456789012345678]}}`, false},
		{"leading zero", `{"prompt_logprobs_flat":{"n_top":1,"logprobs":[01],"top_ids":[0],"top_logprobs":[0]}}`, true},
		{"plus sign", `{"prompt_logprobs_flat":{"n_top":1,"logprobs":[+1],"top_ids":[0],"top_logprobs":[0]}}`, true},
		{"fractional id", `{"prompt_logprobs_flat":{"n_top":1,"logprobs":[1],"top_ids":[0.5],"top_logprobs":[0]}}`, true},
		{"broken rest", `{"content":x,"prompt_logprobs_flat":` + flat + `}`, true},
		{"broken flat", `{"prompt_logprobs_flat":{"n_top":1,"logprobs":[1,],"top_ids":[0],"top_logprobs":[0]}}`, true},
		{"truncated", `{"content":"x","prompt_logprobs_flat":` + flat[:40], true},
		{"not an object", `[1,2]`, true},
	} {
		var want, got Completion
		wantErr := json.Unmarshal([]byte(tc.body), &want)
		gotErr := got.Decode([]byte(tc.body))
		if (wantErr != nil) != tc.fails || (gotErr != nil) != tc.fails {
			t.Errorf("%s: decode error %v, json.Unmarshal error %v; want failure %v", tc.name, gotErr, wantErr, tc.fails)
			continue
		}
		if !tc.fails && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decode gave\n%+v\nwant (json.Unmarshal)\n%+v", tc.name, got, want)
		}
	}
}

// TestCutTopLevelMemberLeavesTheRest: what is left is the object without the
// member, as valid JSON.
func TestCutTopLevelMemberLeavesTheRest(t *testing.T) {
	for _, tc := range []struct{ in, value, rest string }{
		{`{"k":1}`, `1`, `{}`},
		{`{"a":"k","k":[1,{"x":"]"}],"b":2}`, `[1,{"x":"]"}]`, `{"a":"k","b":2}`},
		{`{"a":{"k":0},"k":true}`, `true`, `{"a":{"k":0}}`},
		{`{ "k" : "v" , "z":null }`, `"v"`, `{  "z":null }`},
	} {
		v, rest, ok := cutTopLevelMember([]byte(tc.in), "k")
		if !ok || string(v) != tc.value || string(rest) != tc.rest || !json.Valid(rest) {
			t.Errorf("cutTopLevelMember(%s) = %s, %s, %v; want %s, %s", tc.in, v, rest, ok, tc.value, tc.rest)
		}
	}
	for _, in := range []string{`{"a":1}`, `{"a":1,}`, `{"k"}`, `{"k":}`, `"k"`, `{"k":1`, ``} {
		if _, _, ok := cutTopLevelMember([]byte(in), "k"); ok {
			t.Errorf("cutTopLevelMember(%q) found a member", in)
		}
	}
}

// TestFlatBase64IsTheArraysValues: the flat form with its arrays as base64 of
// little-endian float32 / int32 (patch 0009) reads as the same values as the
// number arrays, and anything but that exact shape is refused.
func TestFlatBase64IsTheArraysValues(t *testing.T) {
	lps := []float32{-1.5, -0.25, -3.0000001e-05, -math.MaxFloat32, 0}
	ids := []int32{7, 0, 31999, 12, 2147483647}
	tops := []float32{-0.5, -1e-7, -2.3025851, -0.125, -8}
	f32 := func(v []float32) string {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	i32 := func(v []int32) string {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	// the number arrays as llama-server writes them: each float32 as its double
	wide := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	arrays, _ := json.Marshal(map[string]any{"n_top": 1, "logprobs": wide(lps), "top_ids": ids, "top_logprobs": wide(tops)})
	var want FlatLogprobs
	if err := json.Unmarshal(arrays, &want); err != nil {
		t.Fatal(err)
	}
	packed := fmt.Sprintf(`{"n_top":1,"encoding":"base64","logprobs":%q,"top_ids":%q,"top_logprobs":%q}`, f32(lps), i32(ids), f32(tops))
	var got Completion
	if err := got.Decode([]byte(`{"content":"x","prompt_logprobs_flat":` + packed + `}`)); err != nil || got.PromptFlat == nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(*got.PromptFlat, want) {
		t.Errorf("base64 form read as %+v, the number arrays as %+v", *got.PromptFlat, want)
	}
	for _, bad := range []string{
		fmt.Sprintf(`{"n_top":1,"logprobs":%q,"top_ids":[7],"top_logprobs":[1]}`, f32(lps)),                                        // no encoding
		fmt.Sprintf(`{"n_top":1,"encoding":"base64","logprobs":[1],"top_ids":%q,"top_logprobs":%q}`, i32(ids), f32(tops)),          // a number array with it
		fmt.Sprintf(`{"n_top":1,"encoding":"hex","logprobs":%q,"top_ids":%q,"top_logprobs":%q}`, f32(lps), i32(ids), f32(tops)),    // another encoding
		fmt.Sprintf(`{"n_top":1,"encoding":"base64","logprobs":"AAA=","top_ids":%q,"top_logprobs":%q}`, i32(ids), f32(tops)),       // 2 bytes
		fmt.Sprintf(`{"n_top":1,"encoding":"base64","logprobs":"!!!!","top_ids":%q,"top_logprobs":%q}`, i32(ids), f32(tops)),       // not base64
		fmt.Sprintf(`{"n_top":1,"encoding":"base64","logprobs":"AAAA\u0041","top_ids":%q,"top_logprobs":%q}`, i32(ids), f32(tops)), // an escape
	} {
		var f FlatLogprobs
		if f.fastUnmarshal([]byte(bad)) {
			t.Errorf("fastUnmarshal took %s", bad)
		}
	}
}
