package shim

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *promptDetail `json:"prompt_tokens_details"`
}

type promptDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

func (u *usage) add(o usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if u.PromptTokensDetails == nil {
		u.PromptTokensDetails = &promptDetail{}
	}
	if o.PromptTokensDetails != nil {
		u.PromptTokensDetails.CachedTokens += o.PromptTokensDetails.CachedTokens
	}
}

type completionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *legacyLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	// rows are the rows Logprobs was rendered from, for chat, which writes
	// them in its own format.
	rows []rowEntry
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage"`
}

func finishReason(stopType string) string {
	switch stopType {
	case "eos", "word":
		return "stop"
	default:
		return "length"
	}
}

func usageOf(resp *llamaserver.Completion) usage {
	u := usage{
		PromptTokens:        resp.TokensEvaluated,
		CompletionTokens:    resp.TokensPredicted,
		PromptTokensDetails: &promptDetail{},
	}
	if resp.Timings != nil {
		u.PromptTokensDetails.CachedTokens = resp.Timings.CacheN
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request, u *upstream, req *completionRequest, start time.Time) {
	for i, p := range req.Prompts {
		for _, id := range p.IDs {
			if !u.vocab.valid(id) {
				writeError(w, badRequest("prompt", "prompt %d has token id %d; the vocabulary has %d tokens", i, id, u.vocab.size()))
				return
			}
		}
	}
	if err := s.checkRequest(u, req.Model, req.LogitBias); err != nil {
		writeError(w, err)
		return
	}
	if req.Echo && req.Logprobs >= 0 && s.opts.NoPromptLogprobs != "" {
		writeError(w, badRequest("echo", "%s", s.opts.NoPromptLogprobs))
		return
	}
	if req.Logprobs >= 0 {
		if err := u.draftedLogprobs("logprobs", req.MaxTokens); err != nil {
			writeError(w, err)
			return
		}
	}
	id, created := s.newID("cmpl"), time.Now().Unix()
	if req.Stream {
		s.streamCompletions(w, r, u, req, id, created)
		return
	}
	jobs := make([]*job, len(req.Prompts))
	for i, p := range req.Prompts {
		jobs[i] = &job{s: s, u: u, req: req, p: p, index: i}
	}
	choices := make([]completionChoice, len(jobs))
	errs := make([]error, len(jobs))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if len(jobs) == 1 {
		// one prompt (lm-eval's requests): run here rather than hand it to a worker and wake that
		choices[0], errs[0] = jobs[0].run(ctx)
	} else {
		// As many workers as slots, so that a long batch never waits on the
		// slot timeout behind its own prompts.
		next := make(chan int, len(jobs))
		for i := range jobs {
			next <- i
		}
		close(next)
		var wg sync.WaitGroup
		for range min(u.info.TotalSlots, len(jobs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if ctx.Err() != nil {
						errs[i] = ctx.Err()
						continue
					}
					choices[i], errs[i] = jobs[i].run(ctx)
					if errs[i] != nil {
						cancel()
					}
				}
			}()
		}
		wg.Wait()
	}
	if err := firstError(errs); err != nil {
		s.requestFailed(r, err)
		writeError(w, err)
		return
	}
	total := usage{PromptTokensDetails: &promptDetail{}}
	var slotWait time.Duration
	var calls callTimes
	for _, j := range jobs {
		total.add(j.usage)
		slotWait += j.slotWait
		calls.add(j.calls)
	}
	resp := &completionResponse{
		ID: id, Object: "text_completion", Created: created, Model: s.modelName(u),
		SystemFingerprint: u.info.BuildInfo, Choices: choices, Usage: &total,
	}
	data := resp.appendJSON(make([]byte, 0, resp.sizeHint()))
	w.Header().Set("Server-Timing", serverTiming(slotWait, calls, time.Since(start)))
	writeBody(w, http.StatusOK, data)
}

// serverTiming is the Server-Timing header of an answer that took total
// (summed over its prompts, which may run at once; milliseconds): "slot" is
// the wait for a free slot, "llama" the calls to llama-server, from sending
// each to the last byte of its answer, and "shim" the rest, the shim's own
// work (decoding llama-server's answers included).
func serverTiming(slotWait time.Duration, calls callTimes, total time.Duration) string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
	}
	return "slot;dur=" + ms(slotWait) + ";desc=\"waiting for a free slot\", llama;dur=" + ms(calls.wire) +
		";desc=\"llama-server\", shim;dur=" + ms(max(total-slotWait-calls.wire, 0))
}

// firstError prefers a real error over the cancellations it caused.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, errCanceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}
