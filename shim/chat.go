package shim

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// handleChat validates a chat completion and serves it. A request that needs
// no chat-output parser (serveChat says which) the shim generates itself;
// any other it passes to llama-server's own chat endpoint, which applies
// the model's template and parses the output (tool calls, structured output,
// reasoning). There the shim fixes what differs from OpenAI's contract:
// llama-server returns no logprobs at all for top_logprobs 0 and twenty
// alternatives when top_logprobs is left out, so the shim asks for at least
// one and trims to what the client asked for; and the model is named as the
// shim names it.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, u *upstream, req *chatRequest, _ time.Time) {
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
	// said here, as the client's mistake, rather than as llama-server's 500
	switch {
	case req.Images && !u.info.Vision:
		writeError(w, badRequest("messages", "this server takes no images: its bundle has no vision projector (bundle it with --mmproj)"))
		return
	case req.Audio && !u.info.Audio:
		writeError(w, badRequest("messages", "this server takes no audio: its bundle has no audio projector (bundle it with --mmproj)"))
		return
	}
	if req.Gen != nil && !reasoningTemplate(u.info.ChatTemplate) {
		s.serveChat(w, r, u, req.Gen, req.Fields["messages"])
		return
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
	model := s.modelName(u)
	if !req.Stream {
		data, err := u.ls.Chat(r.Context(), upBody)
		if err != nil {
			writeError(w, s.chatFailure(r, err))
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
	started := false
	err = u.ls.ChatStream(r.Context(), upBody, func(data []byte) error {
		started = true
		out, err := fixChat(data, model, trim, req.IncludeUsage)
		if err != nil {
			out = data
		}
		if err := ev.raw(out); err != nil {
			return errClientGone
		}
		return nil
	})
	switch {
	case err == errClientGone:
		return
	case err != nil && !started && !isReadError(err):
		// no answer, or an error answer: nothing was sent yet
		writeError(w, s.chatFailure(r, err))
		return
	case err != nil:
		ev.fail(s.chatFailure(r, err))
		return
	}
	ev.done()
}

// errClientGone stops a chat stream whose client went away.
var errClientGone = errors.New("the client went away")

func isReadError(err error) bool {
	var re *llamaserver.ReadError
	return errors.As(err, &re)
}

// chatFailure is upstreamFailure for llama-server's chat endpoint, whose broken-off answers
// say only what happened to the connection; all but an error answer are logged.
func (s *Server) chatFailure(r *http.Request, err error) error {
	var (
		re *llamaserver.ReadError
		se *llamaserver.StatusError
	)
	if errors.As(err, &se) {
		return upstreamFailure(r.Context(), err)
	}
	s.requestFailed(r, err)
	if errors.As(err, &re) {
		return upstreamOrCanceled(r.Context(), re.Err)
	}
	return upstreamFailure(r.Context(), err)
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

// reasoningTemplate says whether a chat template writes reasoning (thinking) that
// llama-server's chat-output parser moves out of the content into reasoning_content: such a
// model's chats keep going through llama-server's chat endpoint.
func reasoningTemplate(src string) bool {
	s := strings.ToLower(src)
	return strings.Contains(s, "think") || strings.Contains(s, "reasoning") || strings.Contains(s, "<|channel|>")
}

// serveChat serves a chat request that needs no chat-output parser (no parserFields, only
// text content, a template without reasoning) through the completions path: llama-server's
// /apply-template renders the messages with the model's template exactly as its chat endpoint
// does, and the text is generated as a /v1/completions text prompt, which llama-server
// tokenizes as it tokenizes a chat's (special tokens parsed, BOS as the model wants).
//
// llama-server's chat endpoint runs the template's parser on every partial result and, on
// every build, fails on output that is not valid UTF-8 (a byte-fallback model's lone
// continuation byte): "does not match the expected peg-native format". The completions path
// does not on builds with the series (patch 0003); on others it fails as /v1/completions does,
// naming the cause. As in /v1/completions, bytes that are not valid UTF-8 reach the content as
// U+FFFD (a JSON string is UTF-8), and the logprobs' "bytes" carry them exactly.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, u *upstream, g *completionRequest, messages json.RawMessage) {
	text, err := u.ls.ApplyTemplate(r.Context(), messages)
	if err != nil {
		err = upstreamFailure(r.Context(), err)
		s.requestFailed(r, err)
		writeError(w, err)
		return
	}
	if text == nil {
		writeError(w, upstreamError("llama-server's /apply-template answered no prompt"))
		return
	}
	g.Prompts = []prompt{{Text: *text, IsText: true}}
	j := &job{s: s, u: u, req: g, p: g.Prompts[0]}
	head := chatResponse{ID: s.newID("chatcmpl"), Object: "chat.completion", Created: time.Now().Unix(), Model: s.modelName(u), SystemFingerprint: u.info.BuildInfo}
	if !g.Stream {
		c, err := j.run(r.Context())
		if err != nil {
			s.requestFailed(r, err)
			writeError(w, err)
			return
		}
		choice := chatChoice{Message: &chatMessage{Role: "assistant", Content: c.Text}, FinishReason: c.FinishReason}
		if g.Logprobs >= 0 {
			if choice.Logprobs, err = chatLogprobsOf(u.vocab, c.rows, g.Logprobs); err != nil {
				writeError(w, err)
				return
			}
		}
		resp := head
		resp.Choices = []chatChoice{choice}
		resp.Usage, _ = json.Marshal(j.usage)
		data, err := json.Marshal(resp)
		if err != nil {
			writeError(w, err)
			return
		}
		writeBody(w, http.StatusOK, data)
		return
	}
	head.Object = "chat.completion.chunk"
	out := &sse{w: w}
	out.f, _ = w.(http.Flusher)
	send := func(c chatChoice) error {
		ch := head
		ch.Choices = []chatChoice{c}
		if g.IncludeUsage {
			// with stream_options.include_usage every chunk carries usage, null until the last
			ch.Usage = json.RawMessage("null")
		}
		return out.send(ch)
	}
	// the role first, as OpenAI sends it, once there is something to follow it: an error
	// before that still gets its own status
	emit := func(c completionChoice) error {
		if !out.started {
			empty := ""
			if err := send(chatChoice{Delta: &chatDelta{Role: "assistant", Content: &empty}}); err != nil {
				return err
			}
		}
		if c.Text != "" || len(c.rows) > 0 {
			text := c.Text
			choice := chatChoice{Delta: &chatDelta{Content: &text}}
			if g.Logprobs >= 0 {
				var err error
				if choice.Logprobs, err = chatLogprobsOf(u.vocab, c.rows, g.Logprobs); err != nil {
					return err
				}
			}
			if err := send(choice); err != nil {
				return err
			}
		}
		if c.FinishReason != nil {
			return send(chatChoice{Delta: &chatDelta{}, FinishReason: c.FinishReason})
		}
		return nil
	}
	if err := j.stream(r.Context(), emit); err != nil {
		s.requestFailed(r, err)
		if !out.started {
			writeError(w, err)
			return
		}
		out.fail(err) // as /v1/completions ends it
		return
	}
	if g.IncludeUsage {
		last := head
		last.Choices = []chatChoice{}
		last.Usage, _ = json.Marshal(j.usage)
		if err := out.send(last); err != nil {
			return
		}
	}
	out.done()
}

// chatResponse is a chat completion, or one chunk of a streamed one.
type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []chatChoice `json:"choices"`
	// Usage is left out of chunks unless stream_options.include_usage asks for it.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatDelta    `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// chatLogprobs is a chat choice's logprobs: one entry per generated token.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

// chatTokenLogprob is OpenAI's entry, with llama-server's id beside it.
type chatTokenLogprob struct {
	ID          int              `json:"id"`
	Token       string           `json:"token"`
	Bytes       []int            `json:"bytes"`
	Logprob     jsonFloat        `json:"logprob"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	ID      int       `json:"id"`
	Token   string    `json:"token"`
	Bytes   []int     `json:"bytes"`
	Logprob jsonFloat `json:"logprob"`
}

// jsonFloat is written as a float even when integral (-21.0), as the completions' logprobs are.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) { return appendJSONFloat(nil, float64(f)), nil }

// chatLogprobsOf writes generated rows in the chat format, with top alternatives each: a
// token is named as in the legacy logprobs ("bytes:\xNN" for a piece that is not valid UTF-8)
// and its bytes are its piece's, exactly.
func chatLogprobsOf(v *vocab, rows []rowEntry, top int) (*chatLogprobs, error) {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, 0, len(rows))}
	pieceBytes := func(id int) []int {
		b := make([]int, 0, 8)
		if v.valid(id) {
			for _, c := range v.pieces[id] {
				b = append(b, int(c))
			}
		}
		return b
	}
	for i, r := range rows {
		if r.Row == nil {
			continue
		}
		if math.IsNaN(r.Row.Logprob) {
			return nil, nanError(i, r.ID, false)
		}
		e := chatTokenLogprob{ID: r.ID, Token: v.tokenString(r.ID), Bytes: pieceBytes(r.ID), Logprob: jsonFloat(clampLogprob(r.Row.Logprob)), TopLogprobs: make([]chatTopLogprob, 0, top)}
		for k, a := range r.Row.Top {
			if k >= top {
				break
			}
			if math.IsNaN(a.Logprob) {
				return nil, nanError(i, a.ID, true)
			}
			e.TopLogprobs = append(e.TopLogprobs, chatTopLogprob{ID: a.ID, Token: v.tokenString(a.ID), Bytes: pieceBytes(a.ID), Logprob: jsonFloat(clampLogprob(a.Logprob))})
		}
		out.Content = append(out.Content, e)
	}
	return out, nil
}
