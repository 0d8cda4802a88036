package shim

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/gguf"
)

// TestSpeculativeLogprobs checks that a llama-server speculating with a draft
// model (a bundle with --draft) answers generated-token logprobs as one without
// a draft does. llama-server gives a token accepted from the draft no
// probabilities (logprob 0, empty top_logprobs) unless
// patches/0004-server-no-draft-with-probs.patch makes a request that asks for
// them generate without drafting.
func TestSpeculativeLogprobs(t *testing.T) {
	server := patchedServer(t)
	draft := filepath.Join(t.TempDir(), "draft.gguf")
	if err := gguf.WriteTinyLlamaFile(draft, gguf.DraftTiny()); err != nil {
		t.Fatal(err)
	}
	spec := shimOn(t, server, gguf.DefaultTiny(), "--model-draft", draft, "--spec-type", "draft-simple")
	plain := shimOn(t, server, gguf.DefaultTiny())
	for _, prompt := range []string{"hello world", "the capital of"} {
		req := map[string]any{"model": "x", "prompt": prompt, "max_tokens": 8, "logprobs": 2, "temperature": 0}
		got, want := spec.complete(t, req).Choices[0].Logprobs, plain.complete(t, req).Choices[0].Logprobs
		if got == nil || want == nil || len(got.Tokens) != len(want.Tokens) {
			t.Fatalf("%q: with a draft %+v, without %+v", prompt, got, want)
		}
		for i := range want.Tokens {
			g, w := got.TokenLogprobs[i], want.TokenLogprobs[i]
			gk, _ := orderedTop(t, got.TopLogprobs[i])
			wk, _ := orderedTop(t, want.TopLogprobs[i])
			if got.Tokens[i] != want.Tokens[i] || g == nil || w == nil || math.Abs(*g-*w) > 1e-3 || len(gk) != len(wk) {
				t.Errorf("%q token %d: with a draft %q %v top %s, without %q %v top %s", prompt, i,
					got.Tokens[i], deref(g), got.TopLogprobs[i], want.Tokens[i], deref(w), want.TopLogprobs[i])
			}
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
