package llamaserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client speaks llama-server's own API (/completion, /tokenize, /detokenize,
// /apply-template, /slots, /metrics), which carries the timings, cache and draft counters
// that the OpenAI answers leave out, and passes OpenAI chat requests through
// (/v1/chat/completions). Its failures are a *ConnError (no answer), *ReadError (an
// answer broke off), *StatusError (an error answer), *DecodeError, *StreamError or
// ErrStreamEnded.
type Client struct {
	base, key string
	http      *http.Client
	raw       *rawPool // WithPool's kept-alive connections for whole answers, or nil
	// Now is the clock that times the chunks; NewClient sets time.Now.
	Now func() time.Time
}

// NewClient returns a client of the llama-server at base. Without options each request
// opens its own loopback connection: llama-server may close a connection after a streamed
// answer, and a request sent on it would fail; a fresh connection costs tens of
// microseconds, counted in the time to first token only. WithPool keeps connections alive.
func NewClient(base, key string, opts ...Option) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	t.DisableCompression = true
	t.Proxy = nil // llama-server is on loopback
	c := &Client{base: base, key: key, http: &http.Client{Transport: t}, Now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Timed is one streamed completion as the client saw it.
type Timed struct {
	Tokens  []int
	Probs   []TokenProb // one per token when the request asked for n_probs
	Text    string
	Timings Timings
	// Sent is when the request was sent; First and Last when the first and the last
	// generated token arrived; FirstN and LastN the server's count of generated tokens then.
	Sent, First, Last time.Time
	FirstN, LastN     int
}

// Tokenize returns the token ids of req's text.
func (c *Client) Tokenize(ctx context.Context, req TokenizeRequest) ([]int, error) {
	var out TokenizeResponse
	if err := c.PostJSON(ctx, "/tokenize", req, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// TokenPieces returns the piece of every token of ids (POST /tokenize with_pieces).
func (c *Client) TokenPieces(ctx context.Context, ids []int) ([]TokenPiece, error) {
	var out struct {
		Tokens []TokenPiece `json:"tokens"`
	}
	req := map[string]any{"content": ids, "with_pieces": true, "add_special": false}
	if err := c.PostJSON(ctx, "/tokenize", req, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// Detokenize returns the text of ids (POST /detokenize).
func (c *Client) Detokenize(ctx context.Context, ids []int) (string, error) {
	var out struct {
		Content string `json:"content"`
	}
	if err := c.PostJSON(ctx, "/detokenize", map[string]any{"tokens": ids}, &out); err != nil {
		return "", err
	}
	return out.Content, nil
}

// ApplyTemplate renders chat messages (a JSON array) with the model's template (POST
// /apply-template); nil when the answer has no prompt.
func (c *Client) ApplyTemplate(ctx context.Context, messages json.RawMessage) (*string, error) {
	var out struct {
		Prompt *string `json:"prompt"`
	}
	if err := c.PostJSON(ctx, "/apply-template", map[string]json.RawMessage{"messages": messages}, &out); err != nil {
		return nil, err
	}
	return out.Prompt, nil
}

// Slots reads GET /slots.
func (c *Client) Slots(ctx context.Context) ([]Slot, error) {
	var out []Slot
	if err := c.GetJSON(ctx, "/slots", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Complete sends req unstreamed and returns the answer.
func (c *Client) Complete(ctx context.Context, req *CompletionRequest) (*Completion, error) {
	req.Stream = false
	var out Completion
	if err := c.PostJSON(ctx, "/completion", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PromptLogprobs sends req, a request for the prompt's logprobs, and returns the answer.
func (c *Client) PromptLogprobs(ctx context.Context, req *PromptLogprobsRequest) (*Completion, error) {
	var out Completion
	if err := c.PostJSON(ctx, "/completion", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompleteStream sends req streamed and calls fn for every chunk until the final one (Stop
// true), which it also passes to fn; fn's error stops the stream and is returned as it is.
// A chunk with llama-server's error is a *StreamError, a stream that ends before the final
// chunk ErrStreamEnded.
func (c *Client) CompleteStream(ctx context.Context, req *CompletionRequest, fn func(*Completion) error) error {
	req.Stream = true
	resp, err := c.open(ctx, http.MethodPost, "/completion", req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	stopped, err := events(resp.Body, "/completion", func(data []byte) (bool, error) {
		var chunk Completion
		if err := json.Unmarshal(data, &chunk); err != nil {
			return false, &DecodeError{Path: "/completion", Stream: true, Err: err}
		}
		if chunk.Error != nil {
			return false, &StreamError{Err: *chunk.Error}
		}
		if err := fn(&chunk); err != nil {
			return false, err
		}
		return chunk.Stop, nil
	})
	if err != nil || stopped {
		return err
	}
	return ErrStreamEnded
}

// events calls fn with the data of every server-sent event of body ("data: " lines; blank
// separators and ": ping" comments are skipped) until fn says stop (stopped true), fn fails,
// or body ends; a failed read is a *ReadError for path.
func events(body io.Reader, path string, fn func(data []byte) (stop bool, err error)) (stopped bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if stop, err := fn(data); err != nil || stop {
			return stop, err
		}
	}
	if err := sc.Err(); err != nil {
		return false, &ReadError{Path: path, Stream: true, Err: err}
	}
	return false, nil
}

// Chat sends body, an OpenAI chat request with stream off, to /v1/chat/completions and
// returns the answer as it came.
func (c *Client) Chat(ctx context.Context, body []byte) ([]byte, error) {
	return c.call(ctx, http.MethodPost, "/v1/chat/completions", body)
}

// ChatStream sends body, an OpenAI chat request with stream on, to /v1/chat/completions and
// calls fn with the data of every event until [DONE] or the end of the stream; fn's error
// stops the stream and is returned as it is.
func (c *Client) ChatStream(ctx context.Context, body []byte, fn func(data []byte) error) error {
	resp, err := c.open(ctx, http.MethodPost, "/v1/chat/completions", json.RawMessage(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = events(resp.Body, "/v1/chat/completions", func(data []byte) (bool, error) {
		if bytes.Equal(data, []byte("[DONE]")) {
			return true, nil
		}
		return false, fn(data)
	})
	return err
}

// CompleteTimed sends req streamed and times every chunk on the client's clock.
func (c *Client) CompleteTimed(ctx context.Context, req CompletionRequest) (*Timed, error) {
	req.Stream, req.ReturnTokens = true, true
	r := &Timed{Sent: c.Now()}
	resp, err := c.open(ctx, http.MethodPost, "/completion", req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var text strings.Builder
	final := false
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			if bytes.HasPrefix(line, []byte("error: ")) {
				return nil, fmt.Errorf("llama-server stopped the stream: %s", bytes.TrimPrefix(line, []byte("error: ")))
			}
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		at := c.Now()
		var ch Completion
		if err := json.Unmarshal(data, &ch); err != nil {
			return nil, fmt.Errorf("reading /completion's stream: %w (%.200s)", err, data)
		}
		if len(ch.Tokens) > 0 && !ch.Stop {
			if r.First.IsZero() {
				r.First, r.FirstN = at, ch.TokensPredicted
			}
			r.Last, r.LastN = at, ch.TokensPredicted
			r.Tokens = append(r.Tokens, ch.Tokens...)
			r.Probs = append(r.Probs, ch.Probs...)
			text.WriteString(ch.Content)
		}
		if ch.Stop {
			if ch.Timings == nil {
				return nil, errors.New("llama-server's last chunk has no timings")
			}
			// a final chunk may still carry tokens (non-streaming servers, or one sent whole)
			if len(r.Tokens) == 0 && len(ch.Tokens) > 0 {
				r.Tokens = ch.Tokens
				r.First, r.FirstN, r.Last, r.LastN = at, 1, at, ch.TokensPredicted
			}
			text.WriteString(ch.Content)
			r.Timings = *ch.Timings
			final = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading /completion's stream: %w", err)
	}
	if !final {
		return nil, errors.New("llama-server's stream ended without its final chunk")
	}
	r.Text = text.String()
	return r, nil
}

// SpecCounters are llama-server's speculative-decoding counters from GET /metrics (upstream
// #26389, 34af94cd9 and later; /metrics needs --metrics or LLAMA_ARG_ENDPOINT_METRICS).
type SpecCounters struct {
	Drafted, Accepted, Drafts float64
}

// SpecMetrics reads the counters; ok is false when the server does not offer them (no
// /metrics endpoint, or a build from before the counters).
func (c *Client) SpecMetrics(ctx context.Context) (m SpecCounters, ok bool, err error) {
	resp, err := c.Send(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return m, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return m, false, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return m, false, fmt.Errorf("reading /metrics: %w", err)
	}
	return ParseSpecMetrics(string(body))
}

// ParseSpecMetrics reads the three spec-decode counters from Prometheus text.
func ParseSpecMetrics(text string) (m SpecCounters, ok bool, err error) {
	want := map[string]*float64{
		"llamacpp:spec_decode_num_draft_tokens_total":    &m.Drafted,
		"llamacpp:spec_decode_num_accepted_tokens_total": &m.Accepted,
		"llamacpp:spec_decode_num_drafts_total":          &m.Drafts,
	}
	found := 0
	for _, line := range strings.Split(text, "\n") {
		name, value, cut := strings.Cut(strings.TrimSpace(line), " ")
		if !cut || strings.HasPrefix(name, "#") {
			continue
		}
		if dst, wanted := want[name]; wanted {
			v, perr := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if perr != nil {
				return m, false, fmt.Errorf("/metrics: %s has value %q: %v", name, value, perr)
			}
			*dst = v
			found++
		}
	}
	return m, found == len(want), nil
}
