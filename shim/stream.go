package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/llbuild/llbuild/llamaserver"
)

// sse writes server-sent events.
type sse struct {
	w       http.ResponseWriter
	f       http.Flusher
	started bool
}

func (e *sse) start() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
}

// done ends the stream with OpenAI's terminator, starting it if nothing was sent.
func (e *sse) done() {
	e.start()
	e.w.Write([]byte("data: [DONE]\n\n"))
	if e.f != nil {
		e.f.Flush()
	}
}

// fail ends a stream that has started with err as an error event and the terminator, as
// vLLM ends it: a client that reads until [DONE] is not left waiting.
func (e *sse) fail(err error) {
	e.send(asAPIError(err).body())
	e.done()
}

func (e *sse) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.raw(data)
}

func (e *sse) raw(data []byte) error {
	e.start()
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := e.w.Write(buf); err != nil {
		return err
	}
	if e.f != nil {
		e.f.Flush()
	}
	return nil
}

// streamChunk is one event of a streamed completion, shaped like the
// whole answer; with stream_options.include_usage every chunk carries
// "usage": null.
type streamChunk = completionResponse

type streamChunkNoUsage struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []completionChoice `json:"choices"`
}

func (s *Server) streamCompletions(w http.ResponseWriter, r *http.Request, u *upstream, req *completionRequest, id string, created int64) {
	out := &sse{w: w}
	out.f, _ = w.(http.Flusher)
	model := s.modelName(u)
	emit := func(c completionChoice) error {
		choices := []completionChoice{c}
		if req.IncludeUsage {
			return out.send(streamChunk{ID: id, Object: "text_completion", Created: created, Model: model, SystemFingerprint: u.info.BuildInfo, Choices: choices})
		}
		return out.send(streamChunkNoUsage{ID: id, Object: "text_completion", Created: created, Model: model, SystemFingerprint: u.info.BuildInfo, Choices: choices})
	}
	total := usage{PromptTokensDetails: &promptDetail{}}
	for i, p := range req.Prompts {
		j := &job{s: s, u: u, req: req, p: p, index: i}
		if err := j.stream(r.Context(), emit); err != nil {
			s.requestFailed(r, err)
			if !out.started {
				writeError(w, err)
				return
			}
			out.fail(err)
			return
		}
		total.add(j.usage)
	}
	if req.IncludeUsage {
		if err := out.send(streamChunk{ID: id, Object: "text_completion", Created: created, Model: model, SystemFingerprint: u.info.BuildInfo, Choices: []completionChoice{}, Usage: &total}); err != nil {
			return
		}
	}
	out.done()
}

// stream computes one choice and emits it as it is generated.
func (j *job) stream(ctx context.Context, emit func(completionChoice) error) error {
	key := j.slotKey()
	slot, err := j.u.acquire(ctx, j.s.opts.SlotWait, key)
	if err != nil {
		return err
	}
	defer j.u.release(slot, key)
	j.slot = slot
	if err := j.ownTokens(ctx); err != nil {
		return err
	}
	v, lp := j.u.vocab, j.req.Logprobs
	var text []byte // the choice's text so far
	if j.req.Echo {
		if err := j.echoRows(ctx, true); err != nil {
			return err
		}
		text = append(text, j.promptText...)
		c := completionChoice{Index: j.index, Text: string(j.promptText)}
		if lp >= 0 {
			if c.Logprobs, err = render(v, newRuneOffsets(text), j.rows, lp, j.req.TokenIDs); err != nil {
				return err
			}
		}
		if err := emit(c); err != nil {
			return err
		}
	}
	base := len(text)
	ro := newRuneOffsets(text) // characters of the choice's text so far
	if j.req.MaxTokens == 0 {
		if err := j.zeroTokenUsage(ctx); err != nil {
			return err
		}
		finish := "length"
		return emit(completionChoice{Index: j.index, FinishReason: &finish})
	}
	g := &genState{v: v}
	var sent []byte  // generated text received from llama-server
	emittedText := 0 // bytes of sent already emitted
	emittedRows := 0 // generated rows already emitted
	holding := false // a row lacks probabilities: emit the rest at the end
	var final *llamaserver.Completion
	flush := func(upto int, finish *string) error {
		c := completionChoice{Index: j.index, Text: string(sent[emittedText:]), FinishReason: finish}
		emittedText = len(sent)
		if lp >= 0 {
			rows := make([]rowEntry, 0, upto-emittedRows)
			for k := emittedRows; k < upto; k++ {
				rows = append(rows, rowEntry{ID: g.ids[k], Start: base + min(g.starts[k], len(sent)), Row: probRow(g.probs[k], lp)})
			}
			emittedRows = upto
			text = append(text, sent[len(text)-base:]...)
			ro.extend(text)
			var err error
			if c.Logprobs, err = render(v, ro, rows, lp, j.req.TokenIDs); err != nil {
				return err
			}
			c.rows = rows
		}
		if c.Text == "" && c.FinishReason == nil && (c.Logprobs == nil || len(c.Logprobs.Tokens) == 0) {
			return nil
		}
		return emit(c)
	}
	err = j.u.completeStream(ctx, j.nativeRequest(true), func(c *llamaserver.Completion) error {
		if c.Stop {
			final = c
			return nil
		}
		chunk := []byte(c.Content)
		if len(c.Probs) > 0 && c.Probs[0].Bytes != nil {
			chunk = rawBytes(c.Probs[0].Bytes)
		}
		// Without logprobs the content is the only text there is; it is
		// exact unless the model writes invalid UTF-8, which llama-server
		// replaces with U+FFFD, and then only the recovery of a held-back
		// tail (below) can be off.
		for _, t := range c.Tokens {
			// llama-server streams no chunk for a token it holds back as
			// incomplete UTF-8; its bytes arrive in front of the next token's.
			gap := len(sent) + len(chunk) - len(g.text) - len(v.text(t))
			if gap > 0 {
				all := append(sent[:len(sent):len(sent)], chunk...)
				for _, id := range v.splitFragments(all[len(g.text) : len(g.text)+gap]) {
					g.add(id, nil)
				}
			}
			var p *llamaserver.TokenProb
			if len(c.Probs) > 0 && c.Probs[0].ID == t {
				p = &c.Probs[0]
			}
			g.add(t, p)
		}
		sent = append(sent, chunk...)
		if lp < 0 {
			return flush(0, nil)
		}
		confirmed := emittedRows
		for confirmed < len(g.ids) && g.starts[confirmed] < len(sent) {
			if lp >= 0 && g.probs[confirmed] == nil {
				holding = true
			}
			confirmed++
		}
		if holding {
			return nil
		}
		return flush(confirmed, nil)
	})
	if err != nil {
		return err
	}
	j.usage = usageOf(final)
	stopType := final.StopType
	if lost := final.TokensPredicted - len(g.ids); lost > 0 {
		// llama-server's stream ends without the tokens it held back as an
		// incomplete UTF-8 sequence: their ids and text are never sent.
		// Generate that many tokens again after what was sent: with greedy
		// decoding the same ones, otherwise a fresh sample of the same
		// length from the same distribution.
		st, err := j.recoverTail(ctx, g, &sent, lost)
		if err != nil {
			return err
		}
		stopType = st
	}
	kept := g.keep(stopType, len(sent))
	if kept < emittedRows {
		kept = emittedRows
	}
	if lp >= 0 {
		if err := j.fillMissing(ctx, g, kept); err != nil {
			return err
		}
	}
	finish := finishReason(stopType)
	return flush(kept, &finish)
}

// recoverTail generates the n tokens a stream left out, appends them to g
// and sent, and returns the new stop type.
func (j *job) recoverTail(ctx context.Context, g *genState, sent *[]byte, n int) (string, error) {
	ids, err := j.promptIDs(ctx)
	if err != nil {
		return "", err
	}
	nr := j.nativeRequest(false)
	nr.Prompt = append(append([]int{}, ids...), g.ids...)
	nr.NPredict = n
	resp, err := j.u.complete(ctx, nr)
	if err != nil {
		return "", fmt.Errorf("generating the tail the stream left out: %w", err)
	}
	tail := alignProbs(j.u.vocab, resp.Tokens, resp.Probs)
	for i, id := range tail.ids {
		g.add(id, tail.probs[i])
	}
	if j.req.Logprobs >= 0 {
		*sent = append(*sent, tail.text...)
	} else {
		*sent = append(*sent, resp.Content...)
	}
	return resp.StopType, nil
}

// splitFragments spells bytes with the vocabulary's fragment tokens,
// longest first; bytes it cannot spell are dropped.
func (v *vocab) splitFragments(b []byte) []int {
	var ids []int
	for len(b) > 0 {
		matched := false
		for l := min(len(b), 8); l >= 1; l-- {
			if id, ok := v.fragments[string(b[:l])]; ok {
				ids = append(ids, id)
				b = b[l:]
				matched = true
				break
			}
		}
		if !matched {
			b = b[1:]
		}
	}
	return ids
}

func rawBytes(b []int) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = byte(c)
	}
	return out
}
