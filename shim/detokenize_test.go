package shim

import (
	"slices"
	"testing"
)

// TestDetokenizeDecodesAsVLLM holds /detokenize to vLLM's, which answers
// tokenizer.decode(tokens) of the Hugging Face tokenizer: for a SentencePiece
// vocabulary that adds a space before the first word, the decoder strips one
// leading space from the whole text (decoders.Strip(" ", 1, 0)) and a text
// that opens with a special token keeps its space. lm-evaluation-harness's
// remote tokenizer relies on it: with tokenized_requests=False it decodes
// token lists and sends the text back, assuming decode then encode is
// lossless.
func TestDetokenizeDecodesAsVLLM(t *testing.T) {
	ts := sharedShim(t)
	for _, tc := range []struct {
		name, text string
		bos        bool
		want       string
	}{
		{"first word", "héllo", false, "héllo"},
		{"two words", "hello world", false, "hello world"},
		{"text that opens with a space", " two spaces", false, " two spaces"},
		{"after BOS the space stays", "héllo", true, "<s> héllo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := ts.tokenize(t, tc.text, tc.bos)
			got := ts.detokenize(t, ids)
			if got != tc.want {
				t.Errorf("detokenize(tokenize(%q)) = %q, want %q", tc.text, got, tc.want)
			}
			if tc.bos {
				return
			}
			// lm-eval's round trip: the text encodes to the same tokens.
			if again := ts.tokenize(t, got, false); !slices.Equal(again, ids) {
				t.Errorf("tokenize(detokenize(%v)) = %v, want the same tokens", ids, again)
			}
		})
	}
}

func (ts *testShim) detokenize(t testing.TB, ids []int) string {
	t.Helper()
	var out struct {
		Prompt *string `json:"prompt"`
	}
	if st := ts.post(t, "/detokenize", map[string]any{"tokens": ids}, &out); st != 200 || out.Prompt == nil {
		t.Fatalf("POST /detokenize %v: status %d, prompt %v", ids, st, out.Prompt)
	}
	return *out.Prompt
}
