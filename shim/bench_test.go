package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"

	"github.com/llbuild/llbuild/llamaserver"
)

// Benchmarks compare the shim with the same llama-server reached
// directly, in the same run, and report ratios. The tiny model decodes
// thousands of tokens a second on a CPU, so the shim's per-token cost
// weighs far more here than in front of a real model; the "mid" model
// (SHIM_BENCH_MODEL=mid) runs at a few hundred tokens a second, nearer
// the rate of a 1B model on a GPU.

var (
	benchOnce sync.Once
	benchShim *testShim
	benchErr  error
	benchDir  string
)

func benchTarget(b *testing.B) *testShim {
	b.Helper()
	size := os.Getenv("SHIM_BENCH_MODEL")
	if size != "mid" && size != "1b" {
		return sharedShim(b)
	}
	serverPath := llamaServer(b)
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shim-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchDir = dir
		model := filepath.Join(dir, "mid.gguf")
		o := gguf.DefaultTiny()
		o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-mid-llama", 512, 8, 8, 8, 1536
		if size == "1b" {
			// about 0.8 billion parameters, the class of contract.md's H200 figures
			o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-1b-llama", 2048, 16, 16, 16, 5632
		}
		if benchErr = gguf.WriteTinyLlamaFile(model, o); benchErr != nil {
			return
		}
		benchShim, benchErr = startShim(serverPath, model, Options{})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchShim
}

// noEOS keeps generations at their full length.
var noEOS = map[string]float64{"2": -100}

// directStream streams a native /completion from llama-server and returns
// the number of tokens received.
func directStream(b *testing.B, u *upstream, req map[string]any) int {
	req["stream"] = true
	body, _ := json.Marshal(req)
	resp, err := u.do(context.Background(), http.MethodPost, "/completion", body)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var c struct {
			Tokens []int `json:"tokens"`
			Stop   bool  `json:"stop"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
		n += len(c.Tokens)
	}
	return n
}

// shimStream streams a completion through the shim and returns the
// number of tokens in its usage.
func shimStream(b *testing.B, ts *testShim, req map[string]any) int {
	req["stream"] = true
	req["stream_options"] = map[string]any{"include_usage": true}
	body, _ := json.Marshal(req)
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		var c struct {
			Usage *usage       `json:"usage"`
			Error *errorObject `json:"error"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
		if c.Error != nil {
			b.Fatalf("stream error: %+v", c.Error)
		}
		if c.Usage != nil {
			n = c.Usage.CompletionTokens
		}
	}
	return n
}

// BenchmarkStreamThroughput streams the same greedy 256-token generation
// directly and through the shim, alternating, and reports both rates and
// their ratio (goal: shim/direct >= 0.98).
func BenchmarkStreamThroughput(b *testing.B) {
	ts := benchTarget(b)
	u := ts.upstream(b)
	const n = 256
	prompt := "the quick brown fox"
	// Medians of per-request rates, so that a moment of contention from
	// other processes on the machine does not decide the ratio.
	var dRate, sRate []float64
	for b.Loop() {
		t0 := time.Now()
		dTok := directStream(b, u, map[string]any{"prompt": prompt, "n_predict": n, "temperature": 0, "logit_bias": [][2]float64{{2, -100}}, "return_tokens": true, "cache_prompt": true})
		dRate = append(dRate, float64(dTok)/time.Since(t0).Seconds())
		t0 = time.Now()
		sTok := shimStream(b, ts, map[string]any{"prompt": prompt, "max_tokens": n, "temperature": 0, "logit_bias": noEOS})
		sRate = append(sRate, float64(sTok)/time.Since(t0).Seconds())
		if dTok != n || sTok != n {
			b.Fatalf("got %d tokens directly and %d through the shim, want %d", dTok, sTok, n)
		}
	}
	direct, shim := medianF(dRate), medianF(sRate)
	b.ReportMetric(direct, "direct_tok/s")
	b.ReportMetric(shim, "shim_tok/s")
	b.ReportMetric(shim/direct, "ratio")
}

func medianF(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAddedLatency sends the same one-token, non-streamed request
// directly (the native request the shim makes) and through the shim, and
// reports the medians and the shim's added latency (goal: <= 1 ms).
func BenchmarkAddedLatency(b *testing.B) {
	ts := benchTarget(b)
	u := ts.upstream(b)
	var direct, shim []time.Duration
	directBody, _ := json.Marshal(map[string]any{"prompt": "hello world", "n_predict": 1, "temperature": 0, "cache_prompt": true, "return_tokens": true, "id_slot": 0})
	shimBody, _ := json.Marshal(map[string]any{"prompt": "hello world", "max_tokens": 1, "temperature": 0})
	for b.Loop() {
		t0 := time.Now()
		resp, err := u.do(context.Background(), http.MethodPost, "/completion", directBody)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		direct = append(direct, time.Since(t0))
		t0 = time.Now()
		resp, err = http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(shimBody))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		shim = append(shim, time.Since(t0))
	}
	dm, sm := median(direct), median(shim)
	b.ReportMetric(float64(dm.Microseconds()), "direct_median_us")
	b.ReportMetric(float64(sm.Microseconds()), "shim_median_us")
	b.ReportMetric(float64((sm - dm).Microseconds()), "added_median_us")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkEchoExactVsPrefill scores a 128-token prompt with echo (exact
// teacher forcing, one single-token decode per position) and compares it
// with one plain prefill of the same prompt.
func BenchmarkEchoExactVsPrefill(b *testing.B) {
	ts := benchTarget(b)
	u := ts.upstream(b)
	words := strings.Fields("the quick brown fox jumps over the lazy dog and the answer is yes")
	var text []string
	for len(text) < 400 {
		text = append(text, words...)
	}
	ids := ts.tokenize(b, strings.Join(text, " "), true)[:128]
	var echo, prefill time.Duration
	for b.Loop() {
		t0 := time.Now()
		var out cmplResp
		if st := ts.post(b, "/v1/completions", map[string]any{"prompt": ids, "max_tokens": 0, "echo": true, "logprobs": 1}, &out); st != 200 {
			b.Fatalf("status %d", st)
		}
		echo += time.Since(t0)
		t0 = time.Now()
		if _, err := u.complete(context.Background(), &llamaserver.CompletionRequest{Prompt: ids, NPredict: 1, CachePrompt: false, IDSlot: 1, ReturnTokens: true}); err != nil {
			b.Fatal(err)
		}
		prefill += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(echo.Milliseconds())/n, "echo_ms")
	b.ReportMetric(float64(prefill.Milliseconds())/n, "prefill_ms")
	b.ReportMetric(echo.Seconds()/prefill.Seconds(), "ratio")
	b.ReportMetric(float64(echo.Microseconds())/n/127, "us/position")
}
