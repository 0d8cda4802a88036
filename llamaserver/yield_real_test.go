package llamaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/llamatest"
)

// The patched server (patches 0012 and 0013) wakes its worker thread during a decoding step's
// yield only for a task the worker takes while yielding: /metrics and /slots. Against the series'
// build (LLBUILD_PATCHED_LLAMA_SERVER), with and without a draft: while one slot generates
// 1,900 tokens, /slots and /metrics answer again and again (the slot still processing when
// /slots answers), and the generation finishes with every token. A worker that is never woken,
// or a yield that waits for one that is not coming, fails it: the probes time out or the
// generation stops.
func TestSlotsAnswerWhileDecoding(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the patched llama-server twice")
	}
	bin, err := llamatest.External(context.Background(), enginetest.PatchedServer(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model, draft := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "draft.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteTinyLlamaFile(draft, gguf.DraftTiny()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no draft", nil},
		{"draft-simple", []string{"--model-draft", draft, "--spec-draft-n-max", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-c", "2048", "-np", "1", "-t", "2", "--metrics"}, tc.args...)
			srv := llamatest.StartWith(t, bin, model, args...)
			probe := &http.Client{Timeout: 30 * time.Second}
			get := func(path string) []byte {
				resp, err := probe.Get(srv.URL + path)
				if err != nil {
					t.Fatalf("GET %s while decoding: %v", path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s while decoding: status %d: %s", path, resp.StatusCode, b)
				}
				return b
			}

			type result struct {
				predicted int
				err       error
			}
			done := make(chan result, 1)
			go func() {
				body, _ := json.Marshal(map[string]any{"prompt": "hello", "n_predict": 1900, "ignore_eos": true, "temperature": 0, "cache_prompt": false})
				resp, err := http.Post(srv.URL+"/completion", "application/json", bytes.NewReader(body))
				if err != nil {
					done <- result{err: err}
					return
				}
				defer resp.Body.Close()
				var out struct {
					TokensPredicted int `json:"tokens_predicted"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				done <- result{out.TokensPredicted, err}
			}()

			var busy, metrics int
			var res result
		probing:
			for {
				select {
				case res = <-done:
					break probing
				case <-time.After(2 * time.Millisecond):
				}
				var slots []struct {
					IsProcessing bool `json:"is_processing"`
				}
				if b := get("/slots"); json.Unmarshal(b, &slots) != nil || len(slots) != 1 {
					t.Fatalf("GET /slots: %s", b)
				}
				if !slots[0].IsProcessing {
					continue
				}
				busy++
				if b := get("/metrics"); !strings.Contains(string(b), "llamacpp:") {
					t.Fatalf("GET /metrics: %.300s", b)
				}
				metrics++
			}
			if res.err != nil || res.predicted != 1900 {
				t.Fatalf("the generation beside the probes: %d tokens (%v), want 1900", res.predicted, res.err)
			}
			if busy < 3 || metrics < 3 {
				t.Errorf("while the slot decoded /slots answered %d times and /metrics %d, want at least 3 each", busy, metrics)
			}
			t.Logf("%s: /slots answered %d times while the slot decoded, /metrics %d", tc.name, busy, metrics)
		})
	}
}
