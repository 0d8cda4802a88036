package shim

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
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
		req := map[string]any{"prompt": prompt, "max_tokens": 8, "logprobs": 2, "temperature": 0}
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

// A llama-server without the series (patch 0004) that drafts would answer logprob 0 for
// every drafted token: the shim refuses such requests with a message naming the patch,
// and still serves requests without logprobs and echo-only scoring.
func TestSpeculativeLogprobsRefusedWithoutTheSeries(t *testing.T) {
	server := unpatchedServer(t)
	draft := filepath.Join(t.TempDir(), "draft.gguf")
	if err := gguf.WriteTinyLlamaFile(draft, gguf.DraftTiny()); err != nil {
		t.Fatal(err)
	}
	spec := shimOn(t, server, gguf.DefaultTiny(), "--model-draft", draft, "--spec-type", "draft-simple")
	post := func(path string, req map[string]any) (int, string) {
		var out json.RawMessage
		status := spec.post(t, path, req, &out)
		return status, string(out)
	}
	status, body := post("/v1/completions", map[string]any{"prompt": "hello world", "max_tokens": 8, "logprobs": 2, "temperature": 0})
	if status != 400 || !strings.Contains(body, "patch 0004") {
		t.Errorf("logprobs with a draft, unpatched server: %d %s, want 400 naming patch 0004", status, body)
	}
	status, body = post("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 4, "logprobs": true})
	if status != 400 || !strings.Contains(body, "patch 0004") {
		t.Errorf("chat logprobs with a draft, unpatched server: %d %s, want 400 naming patch 0004", status, body)
	}
	for _, req := range []map[string]any{
		{"prompt": "hello world", "max_tokens": 8, "temperature": 0},
		{"prompt": "hello world", "max_tokens": 0, "echo": true, "logprobs": 1},
	} {
		if status, body := post("/v1/completions", req); status != 200 {
			t.Errorf("%v: %d %s, want 200", req, status, body)
		}
	}
}
