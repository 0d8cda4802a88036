package llamaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Option configures a Client (NewClient).
type Option func(*Client)

// WithPool gives the client connections kept alive for a server of slots slots (2*slots+8
// of them), as a server answering many requests at once wants: for a plain http://host:port
// server, calls with a whole answer go over its own kept-alive connections, read on the
// caller's goroutine (rawPool); streams use Go's transport, whose connections are kept alive
// too. llama-server closes kept-alive connections after a few requests or seconds; a request
// that found its reused connection closed before anything was answered is sent again (every
// request through Go's transport carries an X-Idempotency-Key for that).
func WithPool(slots int) Option {
	return func(c *Client) {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 2*slots + 8
		t.MaxIdleConns = 2*slots + 8
		t.DisableCompression = true
		t.Proxy = nil // llama-server is on loopback; never route it through a proxy
		c.http = &http.Client{Transport: t}
		if os.Getenv(TransportEnv) != "go" {
			c.raw = newRawPool(c.base, c.key, 2*slots+8)
			if c.raw != nil {
				c.raw.spin = spinFromEnv()
			}
		}
	}
}

// TransportEnv set to "go" keeps Go's transport for every call of a pooled client: the way to
// measure what the raw connections save (scripts/echo-bench.sh AB=transport), not a setting.
const TransportEnv = "LLBUILD_LLAMA_TRANSPORT"

// SpinEnv, a duration up to 100ms (say "20ms"), has a pooled client's whole-answer calls poll
// their connection for the answer that long before the goroutine parks: the way to measure
// whether the wake-up of an idle shim, after it waited for a GPU's answer, is part of its hop
// (scripts/echo-bench.sh AB=env B_ENV=LLBUILD_LLAMA_SPIN=20ms; scripts/gpu-bench.sh overhead),
// not a setting. It takes a core while it polls.
const SpinEnv = "LLBUILD_LLAMA_SPIN"

// spinFromEnv reads SpinEnv; what is not a duration from 0 to 100ms is 0.
func spinFromEnv() time.Duration {
	d, err := time.ParseDuration(os.Getenv(SpinEnv))
	if err != nil || d < 0 || d > 100*time.Millisecond {
		return 0
	}
	return d
}

// WithHTTPClient has the client send all its requests with h.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) { c.http, c.raw = h, nil }
}

// StatusError is an answer of llama-server with a status other than 200.
type StatusError struct {
	Method, Path string
	Status       int
	// Body is the answer's body (its first MiB).
	Body string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("llama-server answered %d: %s", e.Status, strings.TrimSpace(e.Body))
	if e.Path != "" {
		s = e.Method + " " + e.Path + ": " + s
	}
	return s
}

// Message is the message of llama-server's error object in the body, or else the body.
func (e *StatusError) Message() string {
	var b struct {
		Error Error `json:"error"`
	}
	if json.Unmarshal([]byte(e.Body), &b) == nil && b.Error.Message != "" {
		return b.Error.Message
	}
	return strings.TrimSpace(e.Body)
}

// ConnError is a request that got no answer: the connection was refused, reset or closed,
// or timed out.
type ConnError struct {
	Method, Path string
	Err          error
}

func (e *ConnError) Error() string { return e.Method + " " + e.Path + ": " + e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }

// ReadError is a failure while reading an answer that had begun; Stream says it was a
// streamed one.
type ReadError struct {
	Path   string
	Stream bool
	Err    error
}

func (e *ReadError) Error() string {
	if e.Stream {
		return "reading llama-server's stream from " + e.Path + ": " + e.Err.Error()
	}
	return "reading llama-server's answer to " + e.Path + ": " + e.Err.Error()
}
func (e *ReadError) Unwrap() error { return e.Err }

// DecodeError is an answer, or a streamed chunk of one (Stream), that is not the JSON
// expected.
type DecodeError struct {
	Path   string
	Stream bool
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Stream {
		return fmt.Sprintf("decoding a streamed chunk from llama-server: %v", e.Err)
	}
	return fmt.Sprintf("decoding llama-server's answer to %s: %v", e.Path, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// StreamError is the error object with which llama-server stopped a stream.
type StreamError struct {
	Err Error
}

func (e *StreamError) Error() string { return "llama-server stopped the stream: " + e.Err.Message }

// ErrStreamEnded is a stream of /completion that ended without its final chunk.
var ErrStreamEnded = errors.New("the stream ended without a final chunk")

type wireKey struct{}

// WithWireTime has the client add to *d the time of every call with a whole answer (not a
// stream) made with the returned context, from sending it to the last byte of its answer.
// One goroutine at a time may make them.
func WithWireTime(ctx context.Context, d *time.Duration) context.Context {
	return context.WithValue(ctx, wireKey{}, d)
}

// Send sends a request with body (nil for none) and returns the answer as it came, any
// status, for a caller that reads it itself; the caller closes its body. An error is a
// *ConnError, or the request could not be made.
func (c *Client) Send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, fmt.Errorf("building request for %s: %w", path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// With this header Go's transport resends a request that found its reused connection
	// closed before anything was answered (WithPool).
	req.Header.Set("X-Idempotency-Key", "llbuild")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &ConnError{Method: method, Path: path, Err: err}
	}
	return resp, nil
}

// open sends a request whose answer is read as it comes: a 200 answer, or a *StatusError.
func (c *Client) open(ctx context.Context, method, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding request for %s: %w", path, err)
	}
	resp, err := c.Send(ctx, method, path, b)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, &StatusError{Method: method, Path: path, Status: resp.StatusCode, Body: string(data)}
	}
	return resp, nil
}

// call sends a request with body (nil for none) and returns the whole of a 200 answer.
func (c *Client) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	t0 := time.Now()
	status, data, err := c.roundTrip(ctx, method, path, body)
	var re *ReadError
	if d, ok := ctx.Value(wireKey{}).(*time.Duration); ok && (err == nil || errors.As(err, &re)) {
		*d += time.Since(t0) // an answer came, whole or not
	}
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		if len(data) > 1<<20 {
			data = data[:1<<20]
		}
		return nil, &StatusError{Method: method, Path: path, Status: status, Body: string(data)}
	}
	return data, nil
}

// roundTrip sends a request and reads its whole answer, over the pool's own connections
// (WithPool) or Go's transport: its status and body, or a *ConnError (no answer) or a
// *ReadError (an answer that broke off).
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	if c.raw != nil {
		return c.raw.do(ctx, method, path, body)
	}
	resp, err := c.Send(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := readAll(resp)
	if err != nil {
		return 0, nil, &ReadError{Path: path, Err: err}
	}
	return resp.StatusCode, data, nil
}

// readAll reads resp's body into a buffer of its announced length, rather than growing
// one from 512 bytes (an echo answer is 24 KB and more).
func readAll(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 1<<30 {
		// the transport reads no more than the announced length
		data := make([]byte, n)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(resp.Body)
}

// PostJSON sends in to path as JSON and decodes the answer into out (a *Completion with
// Completion.Decode), for an endpoint without a method of its own. Errors are those of
// the methods: *ConnError, *ReadError, *StatusError, *DecodeError.
func (c *Client) PostJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding request for %s: %w", path, err)
	}
	return c.callJSON(ctx, http.MethodPost, path, body, out)
}

// GetJSON decodes the answer of GET path into out (PostJSON).
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	return c.callJSON(ctx, http.MethodGet, path, nil, out)
}

func (c *Client) callJSON(ctx context.Context, method, path string, body []byte, out any) error {
	data, err := c.call(ctx, method, path, body)
	if err != nil {
		return err
	}
	decode := func() error { return json.Unmarshal(data, out) }
	if r, ok := out.(*Completion); ok {
		decode = func() error { return r.Decode(data) }
	}
	if err := decode(); err != nil {
		return &DecodeError{Path: path, Err: err}
	}
	return nil
}
