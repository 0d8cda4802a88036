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

// Client speaks llama-server's own API (/completion, /tokenize, /metrics), which carries
// the timings, cache and draft counters that the OpenAI answers leave out.
type Client struct {
	base, key string
	http      *http.Client
	// Now is the clock that times the chunks; NewClient sets time.Now.
	Now func() time.Time
}

// NewClient returns a client of the llama-server at base. Each request opens its own
// loopback connection: llama-server may close a connection after a streamed answer, and a
// request sent on it would fail; a fresh connection costs tens of microseconds, counted in
// the time to first token only.
func NewClient(base, key string) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	t.DisableCompression = true
	t.Proxy = nil // llama-server is on loopback
	return &Client{base: base, key: key, http: &http.Client{Transport: t}, Now: time.Now}
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

// StatusError is an answer of llama-server with a status other than 200.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("llama-server answered %d: %s", e.Status, strings.TrimSpace(e.Body))
}

func (c *Client) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("POST %s: %w", path, &StatusError{Status: resp.StatusCode, Body: string(msg)})
	}
	return resp, nil
}

// Tokenize returns the token ids of req's text.
func (c *Client) Tokenize(ctx context.Context, req TokenizeRequest) ([]int, error) {
	resp, err := c.post(ctx, "/tokenize", req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out TokenizeResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading /tokenize: %w", err)
	}
	return out.Tokens, nil
}

// CompleteTimed sends req streamed and times every chunk on the client's clock.
func (c *Client) CompleteTimed(ctx context.Context, req CompletionRequest) (*Timed, error) {
	req.Stream, req.ReturnTokens = true, true
	r := &Timed{Sent: c.Now()}
	resp, err := c.post(ctx, "/completion", req)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return m, false, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return m, false, fmt.Errorf("GET /metrics: %w", err)
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
