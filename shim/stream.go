package shim

import (
	"encoding/json"
	"net/http"
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
