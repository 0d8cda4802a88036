package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// fakeLlama stands for a llama-server whose speculative decoding is not lossless: a drafted
// request (no n_probs) answers a different token at position flipAt. No real llama-server
// can be made to do that on purpose, and the canaries exist to catch exactly that. It speaks
// the parts of llama-server's API the bench uses (/tokenize, streamed /completion with
// tokens, timings and draft counters), deterministically.
type fakeLlama struct {
	flipAt int // -1: never
	cacheN int // cache_n it reports for rows
	// draftsAlways drafts even for a request with n_probs: a server whose /props says it has
	// the series but whose patch 0004 does not work.
	draftsAlways bool
	nctx         int // a slot's context, 0 for plenty
	// farFor is a prompt whose flipped token the reference preferred by 2.3 nats: not a
	// near-tie (the other prompts' flips are).
	farFor   string
	requests atomic.Int64
	// speed, when set, is the decode tok/s a bundle's server reports (1000 otherwise): a
	// faster or slower build, as the judge's tests need.
	speed func(*Bundle) int
	// loop, when set, makes every answer a cycle of that many tokens from its first, as a
	// bigram model's greedy output is
	loop int
	// fails, when set, says that a bundle's nth server start (from 1) fails, as a server that
	// crashes before it is ready
	fails  func(b *Bundle, n int) bool
	mu     sync.Mutex
	starts map[string]int
}

func (f *fakeLlama) handler() http.Handler { return f.handlerAt(1000) }

func (f *fakeLlama) handlerAt(tps int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tokenize", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Content string `json:"content"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		ids := []int{1}
		for i := range strings.Fields(req.Content) {
			ids = append(ids, 10+i%500)
		}
		json.NewEncoder(w).Encode(map[string]any{"tokens": ids})
	})
	mux.HandleFunc("POST /completion", func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		var req llamaserver.CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		seed := len(fmt.Sprint(req.Prompt))
		promptN := seed
		if ids, ok := req.Prompt.([]any); ok {
			promptN = len(ids)
		}
		drafted := req.NPredict
		if req.NProbs > 0 && !f.draftsAlways {
			drafted = 0 // as patch 0004: a request that asks for probabilities is not drafted
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range req.NPredict {
			tok := (seed*31 + i*7) % 500
			if f.loop > 0 {
				tok = 1 + i%f.loop
			}
			if i == f.flipAt && req.NProbs == 0 {
				tok++
			}
			probs := ""
			if req.NProbs > 0 {
				// the reference's top two: the flipped token is a near-tie (5e-4 nats behind)
				second := -3.0
				if i == f.flipAt && req.Prompt != f.farFor {
					second = -0.6935
				}
				probs = fmt.Sprintf(",\"completion_probabilities\":[{\"id\":%d,\"logprob\":-0.693,\"top_logprobs\":[{\"id\":%d,\"logprob\":-0.693},{\"id\":%d,\"logprob\":%g}]}]", tok, tok, tok+1, second)
			}
			fmt.Fprintf(w, "data: {\"content\":\"t%d \",\"tokens\":[%d],\"stop\":false,\"tokens_predicted\":%d%s}\n\n", tok, tok, i+1, probs)
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Microsecond)
		}
		fmt.Fprintf(w, "data: {\"content\":\"\",\"tokens\":[],\"stop\":true,\"tokens_predicted\":%d,"+
			"\"timings\":{\"cache_n\":%d,\"prompt_n\":%d,\"prompt_ms\":2,\"prompt_per_second\":%d,\"predicted_n\":%d,"+
			"\"predicted_ms\":%d,\"predicted_per_second\":%d,\"draft_n\":%d,\"draft_n_accepted\":%d}}\n\n",
			req.NPredict, f.cacheN, promptN, promptN*500, req.NPredict, req.NPredict, tps, drafted, drafted*3/4)
	})
	return mux
}

type fakeServer struct {
	ts      *httptest.Server
	nctx    int
	fakePID int
}

func (s *fakeServer) ready(context.Context) (llamaserver.Endpoint, error) {
	return llamaserver.Endpoint{BaseURL: s.ts.URL, Info: llamaserver.Info{TotalSlots: 1, NCtx: s.nctx, BuildInfo: "fake", Series: true, Speculative: true}}, nil
}
func (s *fakeServer) restarts() int { return 0 }
func (s *fakeServer) stop()         { s.ts.Close() }
func (s *fakeServer) pid() int      { return s.fakePID }

func (f *fakeLlama) starter() func(context.Context, *Bundle, []string, io.Writer) (server, error) {
	return func(_ context.Context, b *Bundle, _ []string, _ io.Writer) (server, error) {
		if f.fails != nil {
			f.mu.Lock()
			if f.starts == nil {
				f.starts = map[string]int{}
			}
			f.starts[b.Name]++
			n := f.starts[b.Name]
			f.mu.Unlock()
			if f.fails(b, n) {
				return nil, fmt.Errorf("llama-server exited with status 139 before it was ready")
			}
		}
		tps := 1000
		if f.speed != nil {
			tps = f.speed(b)
		}
		return &fakeServer{ts: httptest.NewServer(f.handlerAt(tps)), nctx: f.nctx}, nil
	}
}
