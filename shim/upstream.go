package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// upstream is one running, ready llama-server: its address, what it told
// us about itself, its vocabulary and the pool of its slots.
type upstream struct {
	base string
	// key is the API key the shim started llama-server with: its private port answers
	// only the shim, not any local user who finds it.
	key    string
	client *http.Client
	info   llamaserver.Info
	vocab  *vocab
	slots  *slotPool
	scorer PromptScorer
}

// draftedLogprobs refuses a request for the logprobs of more than one generated token
// from a server that drafts without the series: it gives every token accepted from the
// draft logprob 0 and a one-entry top list (patch 0004 makes such requests generate
// without drafting). The first generated token is never drafted.
func (u *upstream) draftedLogprobs(param string, maxTokens int) error {
	if !u.info.Speculative || u.info.Series || maxTokens == 0 || maxTokens == 1 {
		return nil
	}
	return badRequest(param, "this llama-server drafts tokens (speculative decoding) and was built without llbuild's patch series (patch 0004), so tokens accepted from the draft would get logprob 0 and a one-entry top list: ask without logprobs, with max_tokens 1, or serve a bundle built with the series or without a draft")
}

func newUpstreamClient(slots int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2*slots + 8
	t.MaxIdleConns = 2*slots + 8
	t.DisableCompression = true
	t.Proxy = nil // llama-server is on loopback; never route it through a proxy
	return &http.Client{Transport: t}
}

// postJSON sends v to path as JSON and decodes the answer into out
// (callJSON).
func (u *upstream) postJSON(ctx context.Context, path string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding request for %s: %w", path, err)
	}
	return u.callJSON(ctx, http.MethodPost, path, body, out)
}

func (u *upstream) getJSON(ctx context.Context, path string, out any) error {
	return u.callJSON(ctx, http.MethodGet, path, nil, out)
}

// callJSON sends a request with body (nil for none) and decodes a 200
// answer into out. An error answer from llama-server becomes an apiError:
// its 4xx as 400 for the client, 503 as 503, anything else as 502.
func (u *upstream) callJSON(ctx context.Context, method, path string, body []byte, out any) error {
	t0 := time.Now()
	resp, err := u.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := readAll(resp)
	if ct, ok := ctx.Value(callTimesKey{}).(*callTimes); ok {
		ct.wire += time.Since(t0)
	}
	if err != nil {
		return upstreamOrCanceled(ctx, &readError{"reading its answer to " + path, err})
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(path, resp.StatusCode, data)
	}
	decode := func() error { return json.Unmarshal(data, out) }
	if r, ok := out.(*llamaserver.Completion); ok {
		decode = func() error { return r.Decode(data) }
	}
	if err := decode(); err != nil {
		return upstreamError("decoding llama-server's answer to %s: %v", path, err)
	}
	return nil
}

// readAll reads resp's body into a buffer of its announced length, rather
// than growing one from 512 bytes (an echo answer is 24 KB and more).
func readAll(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 1<<30 {
		// the transport reads no more than the announced length
		data := make([]byte, n)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(resp.Body)
}

// callTimes is where one job's calls to llama-server spent their time:
// wire from sending each call to the last byte of its answer.
type callTimes struct {
	wire time.Duration
}

func (c *callTimes) add(o callTimes) { c.wire += o.wire }

type callTimesKey struct{}

// withCallTimes has callJSON add the calls made with the returned context
// to ct. One goroutine at a time may make them.
func withCallTimes(ctx context.Context, ct *callTimes) context.Context {
	return context.WithValue(ctx, callTimesKey{}, ct)
}

func (u *upstream) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.base+path, r)
	if err != nil {
		return nil, fmt.Errorf("building request for %s: %w", path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// llama-server closes kept-alive connections after a few requests or
	// seconds; with this header Go's transport resends a request that
	// found its reused connection closed before anything was answered.
	req.Header.Set("X-Idempotency-Key", "shim")
	if u.key != "" {
		req.Header.Set("Authorization", "Bearer "+u.key)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, upstreamOrCanceled(ctx, err)
	}
	return resp, nil
}

// errCanceled marks work stopped because the client went away.
var errCanceled = errors.New("request canceled by the client")

func upstreamOrCanceled(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %v", errCanceled, ctx.Err())
	}
	return unavailable("llama-server is not answering (%s); it may be restarting, retry shortly", connFailure(err))
}

// connFailure says what went wrong with a connection to llama-server in words that leave
// out its private address and the ports: the client only needs to know it may retry.
func connFailure(err error) string {
	what := "the connection failed"
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		what = "it refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		what = "it reset the connection"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		what = "it closed the connection"
	case errors.As(err, &ne) && ne.Timeout():
		what = "the connection timed out"
	case errors.Is(err, errStreamEnded):
		what = errStreamEnded.Error()
	}
	var r *readError
	if errors.As(err, &r) {
		return r.what + ": " + what
	}
	return what
}

// readError marks a failure while reading an answer that had begun, with what was read.
type readError struct {
	what string
	err  error
}

func (e *readError) Error() string { return e.what + ": " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

var errStreamEnded = errors.New("the stream ended without a final chunk")

func statusError(path string, status int, data []byte) error {
	var e struct {
		Error llamaserver.Error `json:"error"`
	}
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	switch {
	case strings.Contains(msg, "does not match the expected"):
		// Newer llama-server builds (llama.cpp 1425386fd among them) run
		// every output through the chat parser, which fails on bytes that
		// are not valid UTF-8. patches/0003-common-chat-raw-content.patch
		// fixes it in llbuild's builds for completions (no parser
		// definition); other builds, and chat with a template's parser,
		// still answer 500, so keep naming the cause.
		return invalidUTF8Error(msg)
	case status == http.StatusServiceUnavailable:
		return unavailable("llama-server is busy or loading: %s", msg)
	case status >= 400 && status < 500:
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "llama-server rejected the request: " + msg}
	default:
		return upstreamError("llama-server answered %s with status %d: %s", path, status, msg)
	}
}

func (u *upstream) complete(ctx context.Context, req *llamaserver.CompletionRequest) (*llamaserver.Completion, error) {
	req.Stream = false
	var out llamaserver.Completion
	if err := u.postJSON(ctx, "/completion", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// completeStream sends req with stream on and calls fn for every chunk
// until the final one (Stop true), which it also passes to fn.
func (u *upstream) completeStream(ctx context.Context, req *llamaserver.CompletionRequest, fn func(*llamaserver.Completion) error) error {
	req.Stream = true
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding request for /completion: %w", err)
	}
	resp, err := u.do(ctx, http.MethodPost, "/completion", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return statusError("/completion", resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue // blank separators and ": ping" comments
		}
		var chunk llamaserver.Completion
		if err := json.Unmarshal(data, &chunk); err != nil {
			return upstreamError("decoding a streamed chunk from llama-server: %v", err)
		}
		if chunk.Error != nil {
			if strings.Contains(chunk.Error.Message, "does not match the expected") {
				return invalidUTF8Error(chunk.Error.Message)
			}
			return upstreamError("llama-server stopped the stream: %s", chunk.Error.Message)
		}
		if err := fn(&chunk); err != nil {
			return err
		}
		if chunk.Stop {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return upstreamOrCanceled(ctx, &readError{"reading the stream", err})
	}
	return upstreamOrCanceled(ctx, errStreamEnded)
}

// tokenize asks llama-server to tokenize text the way /completion does
// with a string prompt (special tokens parsed, BOS added when the model
// wants it) unless addSpecial is false.
func (u *upstream) tokenize(ctx context.Context, text string, addSpecial bool) ([]int, error) {
	var out llamaserver.TokenizeResponse
	parse := true
	req := llamaserver.TokenizeRequest{Content: text, AddSpecial: addSpecial, ParseSpecial: &parse}
	if err := u.postJSON(ctx, "/tokenize", req, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// prepare makes the shim's view of a llama-server that just became ready: a client sized to
// its slots, the slot pool, its vocabulary (read with llama-server run from dir) and the
// prompt scorer that suits it.
func prepare(dir string) func(ctx context.Context, ep llamaserver.Endpoint) (*upstream, error) {
	return func(ctx context.Context, ep llamaserver.Endpoint) (*upstream, error) {
		u := &upstream{base: ep.BaseURL, key: ep.APIKey, client: newUpstreamClient(ep.TotalSlots), info: ep.Info,
			slots: newSlotPool(ep.TotalSlots)}
		v, err := loadVocab(ctx, u, dir)
		if err != nil {
			return nil, err
		}
		u.vocab = v
		u.scorer = chooseScorer(u)
		return u, nil
	}
}

// acquire takes a free slot for a prompt of key (slotKey; nil: unknown),
// waiting at most wait.
func (u *upstream) acquire(ctx context.Context, wait time.Duration, key []byte) (int, error) {
	return u.slots.acquire(ctx, wait, key)
}

// release gives slot back after a request whose prompt was key.
func (u *upstream) release(slot int, key []byte) { u.slots.release(slot, key) }

// invalidUTF8Error is llama-server's failure on output that is not valid UTF-8 (a random or
// byte-fallback model's lone continuation byte): its chat-output parser runs on every result,
// plain completions too, and rejects it. Patch 0003 of llbuild's series fixes it for
// completions; say so.
func invalidUTF8Error(msg string) error {
	return upstreamError("llama-server could not return output that is not valid UTF-8 (its chat-output parser rejects it, for plain completions too; a llama-server built with llbuild's series, patch 0003, does not; Debian's 0.7.0 build does not either): %s", msg)
}
