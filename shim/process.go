package shim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Process is a llama-server started and supervised exactly as Run starts it (private
// loopback port, its own API key, restart with backoff), for a client that talks to
// llama-server's own API rather than the shim's: llbuild bench reads the server's timings
// and draft counters, which the OpenAI answers do not carry.
type Process struct {
	sup    *supervisor
	cancel context.CancelFunc
	done   chan struct{}
	err    error // why the supervisor stopped; read after done is closed
}

// Endpoint is how to reach a ready llama-server and what it said about itself.
type Endpoint struct {
	// BaseURL is http://127.0.0.1:PORT.
	BaseURL string
	// APIKey goes in "Authorization: Bearer KEY" on every request.
	APIKey string
	// PID is llama-server's process id.
	PID int
	// Slots is its number of slots (--parallel).
	Slots int
	// NCtx is a slot's context size.
	NCtx int
	// NVocab is the model's vocabulary size.
	NVocab int
	// BuildInfo is llama-server's build string ("b10106-1425386fd").
	BuildInfo string
	// Series says the server was built with llbuild's patch series (its /props has
	// prompt_logprobs): a request with n_probs > 0 then generates without drafting (0004).
	Series bool
	// Speculative says its slots draft tokens.
	Speculative bool
}

// StartProcess starts llama-server as opts describe (Addr, Listener and APIKey are not used:
// nothing listens but llama-server) and supervises it until Stop is called or ctx is done.
// It returns at once; Ready waits for the server.
func StartProcess(ctx context.Context, opts Options, log *slog.Logger) (*Process, error) {
	if opts.ServerPath == "" {
		return nil, errors.New("shim: no llama-server path given")
	}
	opts = opts.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Process{sup: newSupervisor(opts, log), cancel: cancel, done: make(chan struct{})}
	go func() {
		p.err = p.sup.run(ctx)
		close(p.done)
	}()
	return p, nil
}

// Ready waits until llama-server answers and returns its endpoint. It fails when ctx is
// done or the supervisor gave up (llama-server exited again and again without becoming
// ready: the error holds its last output).
func (p *Process) Ready(ctx context.Context) (Endpoint, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if up, err := p.sup.current(); err == nil {
			i := up.info
			return Endpoint{BaseURL: up.base, APIKey: up.key, PID: p.sup.currentPID(), Slots: i.TotalSlots,
				NCtx: i.NCtx, NVocab: i.NVocab, BuildInfo: i.BuildInfo, Series: i.Series, Speculative: i.Speculative}, nil
		}
		select {
		case <-p.done:
			if p.err != nil {
				return Endpoint{}, p.err
			}
			return Endpoint{}, errors.New("llama-server stopped before it was ready")
		case <-ctx.Done():
			return Endpoint{}, fmt.Errorf("waiting for llama-server: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Restarts is how many times llama-server has exited and been started again. A client that
// needs one process throughout (a fresh-response measurement) checks it did not change.
func (p *Process) Restarts() int {
	p.sup.mu.Lock()
	defer p.sup.mu.Unlock()
	return p.sup.restarts
}

// Stop stops llama-server (SIGTERM to its process group, SIGKILL after a grace period) and
// waits until it is gone.
func (p *Process) Stop() {
	p.cancel()
	<-p.done
}
