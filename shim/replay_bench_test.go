package shim

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The replay server stands where llama-server stands (the shim runs it as its llama-server) and
// answers each request it has seen before from memory, at once; a request it has not seen goes to
// the real llama-server behind it (SHIM_REPLAY_SERVER, started with the same arguments on another
// port) and its answer is kept. With llama-server's own time out of the way, what is left of an
// echo through the shim is the shim's: the client's hop to it, its work and its call.
//
// GET /replay/last gives the body of the last POST /completion it saw, so that a client can send
// the shim's own request straight to it.

// replayRun is the replay server's main (the test binary run with SHIM_TEST_HELPER=replay).
func replayRun() {
	args := os.Args[1:]
	port := ""
	var same []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--port" && i+1 < len(args) {
			port = args[i+1]
			i++
			continue
		}
		same = append(same, args[i])
	}
	backPort, err := freePort()
	if err != nil {
		os.Exit(1)
	}
	cmd := exec.Command(os.Getenv("SHIM_REPLAY_SERVER"), append(same, "--port", strconv.Itoa(backPort))...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		os.Exit(1)
	}
	defer cmd.Process.Kill()
	back := "http://127.0.0.1:" + strconv.Itoa(backPort)
	r := &replay{back: back, seen: map[string]replayed{}}
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		os.Exit(1)
	}
	go func() { cmd.Wait(); os.Exit(1) }()
	http.Serve(l, r)
}

// replayDelay (SHIM_REPLAY_DELAY, a Go duration) holds each /completion answer back, as a GPU's
// prefill does: with it the shim's threads go idle while they wait, as they do in service.
var replayDelay, _ = time.ParseDuration(os.Getenv("SHIM_REPLAY_DELAY"))

type replayed struct {
	status int
	header http.Header
	body   []byte
}

type replay struct {
	back string
	mu   sync.Mutex
	seen map[string]replayed
	last []byte
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if req.URL.Path == "/replay/last" {
		r.mu.Lock()
		w.Write(r.last)
		r.mu.Unlock()
		return
	}
	key := req.Method + " " + req.URL.RequestURI() + "\x00" + string(body)
	r.mu.Lock()
	if req.Method == http.MethodPost && req.URL.Path == "/completion" {
		r.last = body
	}
	a, ok := r.seen[key]
	r.mu.Unlock()
	// /health and /slots tell the shim how llama-server is now: always asked of it
	if !ok || req.URL.Path == "/health" || req.URL.Path == "/slots" {
		out, err := http.NewRequest(req.Method, r.back+req.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = req.Header.Clone()
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a = replayed{resp.StatusCode, resp.Header.Clone(), b}
		if resp.StatusCode == http.StatusOK {
			r.mu.Lock()
			r.seen[key] = a
			r.mu.Unlock()
		}
	}
	if req.URL.Path == "/completion" && replayDelay > 0 {
		time.Sleep(replayDelay) // stands for the GPU's time: the shim waits as it does on llama-server
	}
	for k, v := range a.header {
		if k != "Content-Length" && k != "Date" {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// BenchmarkEchoShimOverhead is the shim's share of an echo request with llama-server's compute
// taken out: lm-eval's loglikelihood request (token ids, echo, logprobs 1, max_tokens 1; 128 and
// 512 tokens, a 32,000-token vocabulary) through the shim in front of the replay server, and
// the shim's own request for it sent straight to the replay server, interleaved one each. It
// reports both medians, their difference (what the shim adds end to end: the client's hop to
// it, its work, its call) and the Server-Timing figures (shim: its own work; llama: its calls).
func BenchmarkEchoShimOverhead(b *testing.B) {
	gcAsServed(b)
	behind := patchedServer(b)
	ts, err := startShim(os.Args[0], benchModelFile(b, benchModelOptions(), 32000), Options{
		ServerArgs: []string{"-np", "1", promptLogprobsArg},
		Env:        append(os.Environ(), "SHIM_TEST_HELPER=replay", "SHIM_REPLAY_SERVER="+behind),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ts.stop)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	var answer bytes.Buffer // the last answer's body
	post := func(url string, body []byte, hdr http.Header) (time.Duration, http.Header) {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		answer.Reset()
		io.Copy(&answer, resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != 200 {
			b.Fatalf("POST %s: status %d: %.300s", url, resp.StatusCode, answer.Bytes())
		}
		return d, resp.Header
	}
	// the answer's choices (what the shim made of llama-server's), without its id and time
	choices := func() string {
		var a struct{ Choices json.RawMessage }
		if err := json.Unmarshal(answer.Bytes(), &a); err != nil || len(a.Choices) < 100 {
			b.Fatalf("echo answer without its rows (%v): %.300s", err, answer.Bytes())
		}
		return string(a.Choices)
	}
	up := ts.upstream(b)
	for _, n := range []int{128, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			body := lmEvalEchoBody(n)
			post(ts.URL+"/v1/completions", body, nil) // the real llama-server answers once; kept
			fromServer := choices()
			post(ts.URL+"/v1/completions", body, nil)
			if choices() != fromServer {
				b.Fatal("the echo made from the replayed answer differs from the one made from llama-server's: the replay would measure other work")
			}
			direct, err := http.Get(up.base + "/replay/last")
			if err != nil {
				b.Fatal(err)
			}
			native, _ := io.ReadAll(direct.Body)
			direct.Body.Close()
			auth := http.Header{"Authorization": {"Bearer " + up.key}}
			var shimT, directT []time.Duration
			var work, llama time.Duration
			for b.Loop() {
				d, h := post(ts.URL+"/v1/completions", body, nil)
				shimT = append(shimT, d)
				work += serverTimingMS(b, h, "shim")
				llama += serverTimingMS(b, h, "llama")
				d, _ = post(up.base+"/completion", native, auth)
				directT = append(directT, d)
			}
			ms, md := median(shimT), median(directT)
			b.ReportMetric(float64(ms.Microseconds()), "shim_us")
			b.ReportMetric(float64(md.Microseconds()), "direct_us")
			b.ReportMetric(float64((ms - md).Microseconds()), "added_us")
			b.ReportMetric(float64(work.Microseconds())/float64(len(shimT)), "work_us")
			b.ReportMetric(float64(llama.Microseconds())/float64(len(shimT)), "call_us")
		})
	}
}
