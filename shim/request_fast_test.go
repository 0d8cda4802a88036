package shim

import (
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
