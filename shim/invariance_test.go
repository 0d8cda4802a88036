package shim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
)

// TestScoresDoNotDependOnTraffic sends lm-evaluation-harness's loglikelihood request (token-id
// prompt, echo, logprobs 1, max_tokens 1) for prompts longer than a ubatch to a bundle-shaped
// server with 4 slots and --prompt-logprobs-alone (patch 0007): alone, four at once, and each
// beside streamed generation. Every log probability must be the same float. Without the option
// the same traffic changed them by up to 0.06 nats on this model (issue 19's note).
func TestScoresDoNotDependOnTraffic(t *testing.T) {
	server := patchedServer(t)
	o := gguf.DefaultTiny()
	o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-mid-llama", 512, 8, 8, 8, 1536
	model := filepath.Join(t.TempDir(), "mid.gguf")
	b, err := gguf.TinyLlama(o)
	if err != nil {
		t.Fatal(err)
	}
	gguf.PadVocab(b, o, 4000)
	if err := writeBuilder(model, b); err != nil {
		t.Fatal(err)
	}
	ts, err := startShim(server, model, Options{ServerArgs: []string{"-np", "4", "-t", "2", "--prompt-logprobs", "--prompt-logprobs-alone", "--no-kv-unified"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.stop)
	rng := rand.New(rand.NewPCG(7, 19))
	var prompts [][]int
	for i := range 4 {
		ids := []int{1}
		for range 600 + 150*i {
			ids = append(ids, 3+rng.IntN(500))
		}
		prompts = append(prompts, ids)
	}
	score := func(ids []int) []float64 {
		r := ts.complete(t, map[string]any{"model": "x", "prompt": ids, "max_tokens": 1, "echo": true, "logprobs": 1, "temperature": 0})
		var out []float64
		for _, lp := range r.Choices[0].Logprobs.TokenLogprobs[1:len(ids)] {
			out = append(out, *lp)
		}
		return out
	}
	alone := make([][]float64, len(prompts))
	for i, p := range prompts {
		alone[i] = score(p)
	}
	same := func(what string, i int, got []float64) {
		t.Helper()
		for k := range got {
			if got[k] != alone[i][k] {
				t.Errorf("%s: prompt %d position %d: %v, alone %v (first of the differences)", what, i, k+1, got[k], alone[i][k])
				return
			}
		}
	}
	for round := range 2 {
		got := make([][]float64, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Go(func() { got[i] = score(p) })
		}
		wg.Wait()
		for i := range prompts {
			same(fmt.Sprintf("four at once, round %d", round), i, got[i])
		}
	}
	for i, p := range prompts[:2] {
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				ts.streamCompletion(t, map[string]any{"model": "x", "prompt": fmt.Sprintf("story %d of %d:", g, i), "max_tokens": 48, "stream": true, "temperature": 0})
			})
		}
		var got []float64
		wg.Go(func() { got = score(p) })
		wg.Wait()
		same("beside streamed generation", i, got)
	}
}

func writeBuilder(path string, b *gguf.Builder) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := b.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BenchmarkScoringAlone measures the cost of traffic-independent scores: rounds of eight
// lm-eval loglikelihood requests, four at a time, against two servers on the same model, one
// with --prompt-logprobs-alone and one without, alternating in each iteration. Reported: the
// median wall time of a round on each and alone-throughput over shared-throughput (goal ≥ 0.9).
// LLBUILD_PATCHED_LLAMA_SERVER must be built with patch 0007.
func BenchmarkScoringAlone(b *testing.B) {
	server := patchedServer(b)
	o := gguf.DefaultTiny()
	o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-mid-llama", 512, 8, 8, 8, 1536
	model := filepath.Join(b.TempDir(), "mid.gguf")
	bl, err := gguf.TinyLlama(o)
	if err != nil {
		b.Fatal(err)
	}
	gguf.PadVocab(bl, o, 4000)
	if err := writeBuilder(model, bl); err != nil {
		b.Fatal(err)
	}
	common := []string{"-np", "4", "-t", "2", "--prompt-logprobs", "--no-kv-unified"}
	var shims [2]*testShim
	for i, extra := range [][]string{nil, {"--prompt-logprobs-alone"}} {
		ts, err := startShim(server, model, Options{ServerArgs: append(append([]string{}, common...), extra...)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(ts.stop)
		shims[i] = ts
	}
	rng := rand.New(rand.NewPCG(11, 19))
	var prompts [][]int
	for i := range 8 {
		ids := []int{1}
		for range 200 + 100*(i%4) {
			ids = append(ids, 3+rng.IntN(500))
		}
		prompts = append(prompts, ids)
	}
	round := func(ts *testShim) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < len(prompts); i += 4 {
					ts.complete(b, map[string]any{"model": "x", "prompt": prompts[i], "max_tokens": 1, "echo": true, "logprobs": 1, "temperature": 0})
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	var shared, alone []time.Duration
	for b.Loop() {
		shared = append(shared, round(shims[0]))
		alone = append(alone, round(shims[1]))
	}
	ms, ma := median(shared), median(alone)
	b.ReportMetric(float64(ms)/1e6, "shared-ms")
	b.ReportMetric(float64(ma)/1e6, "alone-ms")
	b.ReportMetric(float64(ms)/float64(ma), "alone/shared-throughput")
}
