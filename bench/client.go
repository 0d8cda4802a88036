package bench

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

// client speaks llama-server's own API (/completion, /tokenize), which carries the
// timings, cache and draft counters that the OpenAI answers leave out.
type client struct {
	base, key string
	http      *http.Client
	now       func() time.Time
}

// newClient returns a client of the llama-server at base. Each request opens its own
// loopback connection: llama-server may close a connection after a streamed answer, and a
// request sent on it would fail; a fresh connection costs tens of microseconds, counted in
// the time to first token only.
func newClient(base, key string) *client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	t.DisableCompression = true
	t.Proxy = nil // llama-server is on loopback
	return &client{base: base, key: key, http: &http.Client{Transport: t}, now: time.Now}
}

// completionRequest is the part of /completion's request the bench uses.
type completionRequest struct {
	Prompt       any     `json:"prompt"` // text or token ids
	NPredict     int     `json:"n_predict"`
	Temperature  float64 `json:"temperature"`
	TopK         int     `json:"top_k"`
	Seed         int     `json:"seed"`
	IgnoreEOS    bool    `json:"ignore_eos"`
	CachePrompt  bool    `json:"cache_prompt"`
	Stream       bool    `json:"stream"`
	ReturnTokens bool    `json:"return_tokens"`
	// NProbs > 0 makes a server with llbuild's series generate without drafting (patch 0004).
	NProbs int `json:"n_probs,omitempty"`
}

// Timings are llama-server's own figures for one response.
type Timings struct {
	CacheN             int     `json:"cache_n"`
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftN             int     `json:"draft_n"`
	DraftNAccepted     int     `json:"draft_n_accepted"`
}

type completionChunk struct {
	Content         string   `json:"content"`
	Tokens          []int    `json:"tokens"`
	Stop            bool     `json:"stop"`
	TokensPredicted int      `json:"tokens_predicted"`
	TokensEvaluated int      `json:"tokens_evaluated"`
	TokensCached    int      `json:"tokens_cached"`
	StopType        string   `json:"stop_type"`
	Timings         *Timings `json:"timings"`
	// Probs are the chunk's tokens' probabilities, when the request asked for n_probs.
	Probs []tokenProbs `json:"completion_probabilities"`
}

// tokenProbs is a generated token's log probability and the top alternatives at its position.
type tokenProbs struct {
	ID      int     `json:"id"`
	Logprob float64 `json:"logprob"`
	Top     []struct {
		ID      int     `json:"id"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

// response is one completion as the client saw it.
type response struct {
	Tokens  []int
	Probs   []tokenProbs // one per token when the request asked for n_probs
	Text    string
	Timings Timings
	// Sent is when the request was sent; First and Last when the first and the last
	// generated token arrived; FirstN and LastN the server's count of generated tokens then.
	Sent, First, Last time.Time
	FirstN, LastN     int
}

// apiError is an error answer of llama-server.
type apiError struct {
	Status int
	Body   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("llama-server answered %d: %s", e.Status, strings.TrimSpace(e.Body))
}

func (c *client) post(ctx context.Context, path string, body any) (*http.Response, error) {
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
		return nil, fmt.Errorf("POST %s: %w", path, &apiError{Status: resp.StatusCode, Body: string(msg)})
	}
	return resp, nil
}

// tokenize returns the token ids of text, with the model's BOS when it adds one.
func (c *client) tokenize(ctx context.Context, text string) ([]int, error) {
	resp, err := c.post(ctx, "/tokenize", map[string]any{"content": text, "add_special": true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Tokens []int `json:"tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading /tokenize: %w", err)
	}
	return out.Tokens, nil
}

// complete sends req streamed and times every chunk on the client's clock.
func (c *client) complete(ctx context.Context, req completionRequest) (*response, error) {
	req.Stream, req.ReturnTokens = true, true
	r := &response{Sent: c.now()}
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
		at := c.now()
		var ch completionChunk
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

// specCounters are llama-server's speculative-decoding counters from GET /metrics (upstream
// #26389, 34af94cd9 and later; /metrics needs --metrics or LLAMA_ARG_ENDPOINT_METRICS).
type specCounters struct {
	Drafted, Accepted, Drafts float64
}

// specMetrics reads the counters; ok is false when the server does not offer them (no
// /metrics endpoint, or a build from before the counters).
func (c *client) specMetrics(ctx context.Context) (m specCounters, ok bool, err error) {
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
	return parseSpecMetrics(string(body))
}

// parseSpecMetrics reads the three spec-decode counters from Prometheus text.
func parseSpecMetrics(text string) (m specCounters, ok bool, err error) {
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
