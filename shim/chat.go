package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// handleChat validates a chat completion and passes it to llama-server's
// own chat endpoint, which applies the model's template. The shim fixes
// what differs from OpenAI's contract: llama-server returns no logprobs
// at all for top_logprobs 0 and twenty alternatives when top_logprobs is
// left out, so the shim asks for at least one and trims to what the
// client asked for; and the model is named as the shim names it.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := parseChatRequest(body)
	if err != nil {
		writeError(w, err)
		return
	}
	u, err := s.sup.current()
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.checkRequest(u, req.Model, req.LogitBias); err != nil {
		writeError(w, err)
		return
	}
	if req.Logprobs {
		if err := u.draftedLogprobs("logprobs", -1); err != nil {
			writeError(w, err)
			return
		}
	}
	// a conversation's next turn repeats its messages: their JSON finds the slot that holds them
	key := []byte(req.Fields["messages"])
	slot, err := u.acquire(r.Context(), s.opts.SlotWait, key)
	if err != nil {
		writeError(w, err)
		return
	}
	defer u.release(slot, key)
	f := req.Fields
	f["id_slot"] = json.RawMessage(jsonInt(slot))
	trim := -1
	if req.Logprobs {
		trim = req.TopLogprobs
		f["top_logprobs"] = json.RawMessage(jsonInt(max(req.TopLogprobs, 1)))
	}
	upBody, err := json.Marshal(f)
	if err != nil {
		writeError(w, err)
		return
	}
	resp, err := u.do(r.Context(), http.MethodPost, "/v1/chat/completions", upBody)
	if err != nil {
		s.requestFailed(r, err)
		writeError(w, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		writeError(w, statusError("/v1/chat/completions", resp.StatusCode, data))
		return
	}
	model := s.modelName(u)
	if !req.Stream {
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			s.requestFailed(r, err)
			writeError(w, upstreamOrCanceled(r.Context(), err))
			return
		}
		out, err := fixChat(data, model, trim, false)
		if err != nil {
			writeError(w, upstreamError("decoding llama-server's chat answer: %v", err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(append(out, '\n'))
		return
	}
	ev := &sse{w: w}
	ev.f, _ = w.(http.Flusher)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		out, err := fixChat(data, model, trim, req.IncludeUsage)
		if err != nil {
			out = data
		}
		if err := ev.raw(out); err != nil {
			return
		}
	}
	if err := sc.Err(); err != nil {
		s.requestFailed(r, err)
		ev.send(asAPIError(upstreamOrCanceled(r.Context(), err)).body())
		w.Write([]byte("data: [DONE]\n\n"))
		if ev.f != nil {
			ev.f.Flush()
		}
		return
	}
	ev.start()
	w.Write([]byte("data: [DONE]\n\n"))
	if ev.f != nil {
		ev.f.Flush()
	}
}

func jsonInt(n int) []byte {
	b, _ := json.Marshal(n)
	return b
}

// fixChat names the model, trims each token's top_logprobs to trim
// entries (trim < 0 leaves them) and, when usageNull, adds "usage": null
// to a chunk without usage.
func fixChat(data []byte, model string, trim int, usageNull bool) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if _, ok := m["usage"]; usageNull && !ok {
		// With stream_options.include_usage every chunk carries usage,
		// null until the last.
		m["usage"] = nil
	}
	if _, ok := m["model"]; ok {
		m["model"] = model
	}
	if trim >= 0 {
		choices, _ := m["choices"].([]any)
		for _, c := range choices {
			cm, _ := c.(map[string]any)
			lp, _ := cm["logprobs"].(map[string]any)
			content, _ := lp["content"].([]any)
			for _, e := range content {
				em, _ := e.(map[string]any)
				if top, ok := em["top_logprobs"].([]any); ok && len(top) > trim {
					em["top_logprobs"] = top[:trim]
				}
			}
		}
	}
	return json.Marshal(m)
}
