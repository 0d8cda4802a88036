package shim

import (
	"fmt"
	"math"
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
// server with 4 slots and --prompt-logprobs-alone (patch 0007), and one with 1 slot: alone, four
// at once, and each beside streamed generation. Every log probability must be the same float. Without the option
// the same traffic changed them by up to 0.06 nats on this model on CPU (issue 19's note).
// SHIM_SCORES_CONTROL=1 also runs the same traffic without the option and logs what changes,
// to measure the mechanism on a backend (with SHIM_SERVER_ARGS="-ngl 99" on CUDA).
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
	args := []string{"-np", "4", "-t", "2", "--prompt-logprobs", "--no-kv-unified"}
	for _, d := range scoreTrafficDifferences(t, server, model, append(args, "--prompt-logprobs-alone")) {
		t.Error(d)
	}
	// one slot: the shim serves the same traffic one request at a time
	for _, d := range scoreTrafficDifferences(t, server, model, []string{"-np", "1", "-t", "2", "--prompt-logprobs", "--prompt-logprobs-alone"}) {
		t.Error("one slot: " + d)
	}
	if os.Getenv("SHIM_SCORES_CONTROL") == "1" {
		diffs := scoreTrafficDifferences(t, server, model, args)
		t.Logf("control, the same traffic without --prompt-logprobs-alone: %d of 10 requests differ", len(diffs))
		for _, d := range diffs {
			t.Log(d)
		}
	}
}

// scoreTrafficDifferences runs the traffic of TestScoresDoNotDependOnTraffic on a shim with
// llama-server args and says, for each request whose log probabilities differ from the same
// request alone, where and by how much.
func scoreTrafficDifferences(t *testing.T, server, model string, args []string) []string {
	// on one slot four requests queue behind each other: on a loaded machine (CI beside other
	// work took 148 s for what takes 15 s alone) the default 60 s slot wait answered 503, which
	// says nothing about the scores
	ts, err := startShim(server, model, Options{ServerArgs: args, SlotWait: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.stop()
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
		r := ts.complete(t, map[string]any{"prompt": ids, "max_tokens": 1, "echo": true, "logprobs": 1, "temperature": 0})
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
	var diffs []string
	same := func(what string, i int, got []float64) {
		first, n, most := -1, 0, 0.0
		for k := range got {
			if got[k] != alone[i][k] {
				if first < 0 {
					first = k
				}
				n++
				most = max(most, math.Abs(got[k]-alone[i][k]))
			}
		}
		if n > 0 {
			diffs = append(diffs, fmt.Sprintf("%s: prompt %d (%d tokens): %d positions differ from alone, the first %d (%v, alone %v), at most by %.3g", what, i, len(prompts[i]), n, first+1, got[first], alone[i][first], most))
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
				ts.streamCompletion(t, map[string]any{"prompt": fmt.Sprintf("story %d of %d:", g, i), "max_tokens": 48, "stream": true, "temperature": 0})
			})
		}
		var got []float64
		wg.Go(func() { got = score(p) })
		wg.Wait()
		same("beside streamed generation", i, got)
	}
	return diffs
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
					ts.complete(b, map[string]any{"prompt": prompts[i], "max_tokens": 1, "echo": true, "logprobs": 1, "temperature": 0})
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
