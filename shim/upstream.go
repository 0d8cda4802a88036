package shim

import (
	"context"
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
	key string
	// ls is llama-server's client, its connections kept alive for its slots.
	ls     *llamaserver.Client
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

// complete sends req unstreamed (upstreamFailure).
func (u *upstream) complete(ctx context.Context, req *llamaserver.CompletionRequest) (*llamaserver.Completion, error) {
	c, err := u.ls.Complete(ctx, req)
	return c, upstreamFailure(ctx, err)
}

// completeStream sends req with stream on and calls fn for every chunk
// until the final one (Stop true), which it also passes to fn.
func (u *upstream) completeStream(ctx context.Context, req *llamaserver.CompletionRequest, fn func(*llamaserver.Completion) error) error {
	return upstreamFailure(ctx, u.ls.CompleteStream(ctx, req, fn))
}

// tokenize asks llama-server to tokenize text the way /completion does
// with a string prompt (special tokens parsed, BOS added when the model
// wants it) unless addSpecial is false.
func (u *upstream) tokenize(ctx context.Context, text string, addSpecial bool) ([]int, error) {
	parse := true
	ids, err := u.ls.Tokenize(ctx, llamaserver.TokenizeRequest{Content: text, AddSpecial: addSpecial, ParseSpecial: &parse})
	return ids, upstreamFailure(ctx, err)
}

// callTimes is where one job's calls to llama-server spent their time:
// wire from sending each call to the last byte of its answer.
type callTimes struct {
	wire time.Duration
}

func (c *callTimes) add(o callTimes) { c.wire += o.wire }

// withCallTimes has llama-server's client add the calls made with the
// returned context to ct. One goroutine at a time may make them.
func withCallTimes(ctx context.Context, ct *callTimes) context.Context {
	return llamaserver.WithWireTime(ctx, &ct.wire)
}

// errCanceled marks work stopped because the client went away.
var errCanceled = errors.New("request canceled by the client")

// upstreamFailure is the OpenAI error for a failed call to llama-server: a call that got
// no answer, or whose answer broke off, is a 503 (or errCanceled when the client went
// away), an error answer is what statusError makes of it, an answer that cannot be
// decoded or a stream llama-server stopped a 502. Other errors (nil, the stream
// callback's) pass as they are.
func upstreamFailure(ctx context.Context, err error) error {
	var (
		se *llamaserver.StatusError
		st *llamaserver.StreamError
		de *llamaserver.DecodeError
		ce *llamaserver.ConnError
		re *llamaserver.ReadError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return statusError(se.Path, se.Status, se.Message())
	case errors.As(err, &st):
		if strings.Contains(st.Err.Message, "does not match the expected") {
			return invalidUTF8Error(st.Err.Message)
		}
		return upstreamError("llama-server stopped the stream: %s", st.Err.Message)
	case errors.As(err, &de):
		return upstreamError("%s", de.Error())
	case errors.As(err, &ce), errors.As(err, &re), errors.Is(err, llamaserver.ErrStreamEnded):
		return upstreamOrCanceled(ctx, err)
	}
	return err
}

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
	case errors.Is(err, llamaserver.ErrStreamEnded):
		what = llamaserver.ErrStreamEnded.Error()
	}
	var r *llamaserver.ReadError
	if errors.As(err, &r) {
		if r.Stream {
			return "reading the stream: " + what
		}
		return "reading its answer to " + r.Path + ": " + what
	}
	return what
}

// statusError is the OpenAI error for llama-server's answer to path with status and
// message msg: its 4xx as 400 for the client, 503 as 503, anything else as 502.
func statusError(path string, status int, msg string) error {
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

// prepare makes the shim's view of a llama-server that just became ready: a client sized to
// its slots, the slot pool, its vocabulary (read with llama-server run from dir) and the
// prompt scorer that suits it.
func prepare(dir string) func(ctx context.Context, ep llamaserver.Endpoint) (*upstream, error) {
	return func(ctx context.Context, ep llamaserver.Endpoint) (*upstream, error) {
		u := &upstream{base: ep.BaseURL, key: ep.APIKey, ls: llamaserver.NewClient(ep.BaseURL, ep.APIKey, llamaserver.WithPool(ep.TotalSlots)), info: ep.Info,
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
