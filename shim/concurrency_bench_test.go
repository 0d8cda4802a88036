package shim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lmEvalWorkload is a loglikelihood task as lm-evaluation-harness's
// local-completions model sends it: docs with one context and several
// continuations, each request context+continuation as token ids, ordered
// as lm-eval's Collator orders them (longest first, then by the tokens).
func lmEvalWorkload(tb testing.TB, ts *testShim, docs, choices int) [][]int {
	tb.Helper()
	words := strings.Fields("the quick brown fox jumps over the lazy dog while the capital of france is paris and the answer to the question is yes or no")
	var reqs [][]int
	for d := range docs {
		var ctx []string
		for i := range 30 + 17*d%90 {
			ctx = append(ctx, words[(i*7+d*3)%len(words)])
		}
		ctxIDs := ts.tokenize(tb, "Question: "+strings.Join(ctx, " ")+"\nAnswer:", true)
		for c := range choices {
			var cont []string
			for i := range 2 + (c*3+d)%6 {
				cont = append(cont, words[(i*5+c*11+d)%len(words)])
			}
			contIDs := ts.tokenize(tb, " "+strings.Join(cont, " "), false)
			reqs = append(reqs, append(slices.Clone(ctxIDs), contIDs...))
		}
	}
	slices.SortStableFunc(reqs, func(a, b []int) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return slices.Compare(a, b)
	})
	return reqs
}

// scoreAll sends reqs as lm-eval does with batch_size=batch and
// num_concurrent=conc (echo, logprobs 1, max_tokens 1) and checks every
// answer has a row per prompt token and one generated.
func scoreAll(tb testing.TB, ts *testShim, reqs [][]int, batch, conc int) {
	tb.Helper()
	var chunks [][][]int
	for i := 0; i < len(reqs); i += batch {
		chunks = append(chunks, reqs[i:min(i+batch, len(reqs))])
	}
	next := make(chan [][]int, len(chunks))
	for _, c := range chunks {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if err := scoreChunk(ts, c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

func scoreChunk(ts *testShim, prompts [][]int) error {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompts, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": true})
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	var out cmplResp
	if err := json.Unmarshal(data, &out); err != nil {
		return err
	}
	if len(out.Choices) != len(prompts) {
		return fmt.Errorf("%d choices for %d prompts", len(out.Choices), len(prompts))
	}
	for _, ch := range out.Choices {
		if lp := ch.Logprobs; lp == nil || len(lp.TokenLogprobs) != len(prompts[ch.Index])+1 {
			return fmt.Errorf("choice %d: wrong number of logprob rows", ch.Index)
		}
	}
	return nil
}

// BenchmarkConcurrentScoring scores 80 loglikelihood requests (20 docs of
// 4 choices) through a one-slot shim as lm-evaluation-harness does one
// request at a time (batch_size=1) and with batch_size=4,
// num_concurrent=4, alternating which goes first, and reports both
// medians and their ratio concurrent/sequential (goal: <= 1). "forcing"
// runs the llama-server the other tests run (teacher forcing), "native"
// the patched one (LLBUILD_PATCHED_LLAMA_SERVER, --prompt-logprobs).
// "native-4slots" is a bundle's server with 4 slots and traffic-independent
// scores (--prompt-logprobs-alone --no-kv-unified) against four echo requests
// in flight at once (batch_size=1, num_concurrent=4).
// SHIM_BENCH_MODEL=mid or 1b picks a bigger model (SHIM_BENCH_GGUF keeps it), SHIM_BENCH_VOCAB=32000 pads
// its vocabulary to that many tokens and SHIM_SERVER_ARGS adds
// llama-server arguments.
func BenchmarkConcurrentScoring(b *testing.B) {
	gcAsServed(b)
	o := benchModelOptions()
	alone := []string{"-np", "4", promptLogprobsArg, "--prompt-logprobs-alone", "--no-kv-unified"}
	for _, sc := range []struct {
		name, scorer string
		args         []string
		slots        int
		batch, conc  int
	}{
		{"forcing", (&forcingScorer{}).Name(), []string{"-np", "1"}, 1, 4, 4},
		{"native", (&nativeScorer{}).Name(), []string{"-np", "1", promptLogprobsArg}, 1, 4, 4},
		{"native-4slots", (&nativeScorer{}).Name(), alone, 4, 1, 4},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var server string
			if sc.name == "forcing" {
				server = llamaServer(b)
			} else {
				server = patchedServer(b)
			}
			vocab, _ := strconv.Atoi(os.Getenv("SHIM_BENCH_VOCAB"))
			model := benchModelFile(b, o, vocab)
			ts, err := startShim(server, model, Options{ServerArgs: sc.args})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(ts.stop)
			u := ts.upstream(b)
			if n := u.info.TotalSlots; n != sc.slots {
				b.Fatalf("llama-server has %d slots, want %d", n, sc.slots)
			}
			if got := u.scorer.Name(); got != sc.scorer {
				b.Fatalf("scorer %q, want %q", got, sc.scorer)
			}
			reqs := lmEvalWorkload(b, ts, 20, 4)
			scoreAll(b, ts, reqs[:4], 1, 1) // warm up
			var seq, conc []time.Duration
			i := 0
			for b.Loop() {
				runs := []func(){
					func() { t0 := time.Now(); scoreAll(b, ts, reqs, 1, 1); seq = append(seq, time.Since(t0)) },
					func() {
						t0 := time.Now()
						scoreAll(b, ts, reqs, sc.batch, sc.conc)
						conc = append(conc, time.Since(t0))
					},
				}
				if i%2 == 1 {
					slices.Reverse(runs)
				}
				for _, r := range runs {
					r()
				}
				i++
			}
			s, c := median(seq).Seconds(), median(conc).Seconds()
			b.ReportMetric(s, "sequential_s")
			b.ReportMetric(c, "concurrent_s")
			b.ReportMetric(c/s, "concurrent/sequential")
		})
	}
}
