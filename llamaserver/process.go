package llamaserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how to start llama-server and keep it running.
type Options[T any] struct {
	// Path is the llama-server executable.
	Path string
	// Args are its arguments (model, context, slots), without --host and --port: it gets a
	// private loopback port.
	Args []string
	// Env is its environment; nil means this process's own. Any LLAMA_API_KEY is replaced
	// by the process's own key.
	Env []string
	// Dir is its working directory; relative paths in Args resolve against it.
	Dir string
	// Output, if set, receives its stdout and stderr.
	Output io.Writer
	// ReadyTimeout bounds a start until /health answers 200 and Prepare is done; 0 means
	// 10 minutes (large models load slowly).
	ReadyTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before restarting an exited llama-server;
	// 0 means 250 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Prepare, if set, runs for every start once llama-server is healthy and its facts are
	// read, before it is offered: what it returns comes with the endpoint from Current, and
	// an error fails the start. The shim reads the vocabulary here.
	Prepare func(ctx context.Context, ep Endpoint) (T, error)
	// Describe, if set, adds attributes of Prepare's value to the "llama-server ready" log.
	Describe func(T) []any
	// GiveUpOnSameCrash stops supervision as soon as llama-server, never ready yet, has exited
	// twice, whatever its last lines said (a server that fails with another line each time is
	// no more likely to load the third time): each start of a large model costs minutes. The
	// error is a *CrashError.
	GiveUpOnSameCrash bool
}

func (o Options[T]) withDefaults() Options[T] {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	return o
}

// Endpoint is how to reach a ready llama-server and what it said about itself.
type Endpoint struct {
	// BaseURL is http://127.0.0.1:PORT.
	BaseURL string
	// APIKey goes in "Authorization: Bearer KEY" on every request: the private port
	// answers only its owner, not any local user who finds it.
	APIKey string
	// PID is llama-server's process id.
	PID int
	Info
}

// Process is a llama-server started on a private loopback port with its own API key and
// restarted with backoff when it exits, as llbuild serve and llbuild bench both run it.
// T is what Options.Prepare makes of each start.
type Process[T any] struct {
	opts Options[T]
	log  *slog.Logger

	mu       sync.Mutex
	ep       *Endpoint // the ready instance, nil when there is none
	v        T         // Prepare's value for ep
	pid      int
	why      string // why there is no ready instance
	started  time.Time
	restarts int
	ready    bool // llama-server has been ready at least once

	cancel context.CancelFunc // set by Start
	done   chan struct{}      // closed when Run returns
	err    error              // Run's error; read after done is closed
}

// startAttempts is how many times in a row llama-server may exit before it was ever
// ready: then supervision gives up, since a bad argument, a model it cannot load or an
// instruction the CPU lacks fails the same way on every restart.
const startAttempts = 5

// New returns a Process that Run starts.
func New[T any](opts Options[T], log *slog.Logger) *Process[T] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Process[T]{opts: opts.withDefaults(), log: log, why: "llama-server is starting", started: time.Now(),
		done: make(chan struct{})}
}

// Start starts llama-server as opts describe and supervises it until Stop is called or ctx
// is done. It returns at once; Ready waits for the server.
func Start[T any](ctx context.Context, opts Options[T], log *slog.Logger) (*Process[T], error) {
	if opts.Path == "" {
		return nil, errors.New("llamaserver: no llama-server path given")
	}
	p := New(opts, log)
	ctx, p.cancel = context.WithCancel(ctx)
	go p.Run(ctx)
	return p, nil
}

// Ready waits until llama-server is ready and returns its endpoint. It fails when ctx is
// done or supervision gave up (llama-server exited again and again without becoming
// ready: the error holds its last output).
func (p *Process[T]) Ready(ctx context.Context) (Endpoint, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if ep, _, err := p.Current(); err == nil {
			return ep, nil
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

// Stop stops a Process that Start started (SIGTERM to llama-server's process group,
// SIGKILL after a grace period) and waits until it is gone.
func (p *Process[T]) Stop() {
	p.cancel()
	<-p.done
}

// Current returns the ready llama-server and Prepare's value for it, or an error that
// says why there is none (it is starting, restarting or stopping).
func (p *Process[T]) Current() (Endpoint, T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ep == nil {
		var zero T
		return Endpoint{}, zero, errors.New(p.why)
	}
	return *p.ep, p.v, nil
}

// StartedAt is when the Process was made.
func (p *Process[T]) StartedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Restarts is how many times llama-server has exited and been started again. A client that
// needs one process throughout (a fresh-response measurement) checks it did not change.
func (p *Process[T]) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// PID is the process id of the llama-server started last, 0 before the first.
func (p *Process[T]) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Signal sends sig to the running llama-server's process group.
func (p *Process[T]) Signal(sig syscall.Signal) error {
	pid := p.PID()
	if pid == 0 {
		return errors.New("no llama-server process")
	}
	return syscall.Kill(-pid, sig)
}

func (p *Process[T]) set(ep *Endpoint, v T, why string) {
	p.mu.Lock()
	p.ep, p.v, p.why = ep, v, why
	p.mu.Unlock()
}

func (p *Process[T]) unset(why string) {
	var zero T
	p.set(nil, zero, why)
}

// Run keeps llama-server running until ctx is done. It returns an error only when
// llama-server exited startAttempts times without ever becoming ready.
func (p *Process[T]) Run(ctx context.Context) error {
	p.err = p.run(ctx)
	close(p.done)
	return p.err
}

func (p *Process[T]) run(ctx context.Context) error {
	if p.opts.Path == "" {
		return errors.New("llamaserver: no llama-server path given")
	}
	backoff := p.opts.MinBackoff
	for {
		began := time.Now()
		err := p.once(ctx)
		if ctx.Err() != nil {
			p.unset(stopping)
			return nil
		}
		p.mu.Lock()
		p.restarts++
		n, ready := p.restarts, p.ready
		p.mu.Unlock()
		if !ready && n >= startAttempts {
			p.unset("llama-server does not start")
			return fmt.Errorf("llama-server exited %d times without becoming ready: %w", n, err)
		}
		var exit *exitError
		if !ready && p.opts.GiveUpOnSameCrash && errors.As(err, &exit) && n >= 2 {
			p.unset("llama-server exits at every start")
			return &CrashError{Line: CrashLine(exit.output), Signal: signalOf(exit.err), Exits: n, Output: exit.output}
		}
		if time.Since(began) > 2*p.opts.MaxBackoff {
			backoff = p.opts.MinBackoff // it ran a good while: not a crash loop
		}
		p.unset(fmt.Sprintf("llama-server is restarting (exit: %v)", ShortError(err)))
		p.log.Error("llama-server exited; restarting", "err", err, "restart", n, "backoff", backoff)
		select {
		case <-ctx.Done():
			p.unset(stopping)
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.opts.MaxBackoff)
	}
}

// exitError is llama-server's exit with its last output.
type exitError struct {
	err    error
	output string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("llama-server exited: %v; last output:\n%s", e.err, e.output)
}

func (e *exitError) Unwrap() error { return e.err }

// CrashError is a llama-server that exited at each of two starts before it was ever
// ready (Options.GiveUpOnSameCrash).
type CrashError struct {
	// Line is the cause the last start's output gave (CrashLine: an assertion, the first error).
	Line string
	// Signal is the signal that ended it ("SIGSEGV"), "" when it exited with a status.
	Signal string
	// Exits is how many times it was started.
	Exits int
	// Output is the last start's output, its end.
	Output string
}

func (e *CrashError) Error() string {
	how := ""
	if e.Signal != "" {
		how = " (" + e.Signal + ")"
	}
	return fmt.Sprintf("llama-server exited at each of %d starts before it was ready%s: %s", e.Exits, how, e.Line)
}

var (
	hexAddr = regexp.MustCompile(`0x[0-9a-fA-F]+`)
	// logStamp is the time and level llama.cpp's log puts before each line ("0.00.024.885 E ").
	logStamp = regexp.MustCompile(`^[0-9][0-9.:]*\s+[A-Z]\s+`)
)

// CrashLine is the line of llama-server's output that says why it stopped, its cause: the first
// GGML_ASSERT or GGML_ABORT line, else the first line that says error, failed, abort or not
// found other than the consequences ("failed to load model", "exiting due to ..."), else the
// first consequence, else the last non-empty line; the log's time stamp is dropped and
// addresses are blanked, so that two crashes at one place compare equal.
func CrashLine(output string) string {
	lines := strings.Split(strings.ReplaceAll(output, "\r", ""), "\n")
	clean := func(l string) string { return logStamp.ReplaceAllString(strings.TrimSpace(l), "") }
	first := func(match func(string) bool) string {
		for _, l := range lines {
			if l = clean(l); l != "" && match(l) {
				return hexAddr.ReplaceAllString(l, "0x?")
			}
		}
		return ""
	}
	if l := first(func(l string) bool { return strings.Contains(l, "GGML_ASSERT") || strings.Contains(l, "GGML_ABORT") }); l != "" {
		return l
	}
	// the first error is the cause; "failed to load model" and "exiting due to" follow from it
	consequence := func(low string) bool {
		return strings.Contains(low, "exiting due to") || strings.Contains(low, "failed to load model")
	}
	errorLine := func(low string) bool {
		return strings.Contains(low, "error") || strings.Contains(low, "failed") || strings.Contains(low, "abort") ||
			strings.Contains(low, "not found") || strings.Contains(low, "segmentation fault")
	}
	if l := first(func(l string) bool { low := strings.ToLower(l); return errorLine(low) && !consequence(low) }); l != "" {
		return l
	}
	if l := first(func(l string) bool { return errorLine(strings.ToLower(l)) }); l != "" {
		return l
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := clean(lines[i]); l != "" {
			return hexAddr.ReplaceAllString(l, "0x?")
		}
	}
	return ""
}

// signalOf names the signal that ended a process ("SIGSEGV"), "" for an exit status.
func signalOf(err error) string {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return ""
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalName(ws.Signal())
	}
	return ""
}

// signalName is a signal's conventional name.
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGILL: "SIGILL",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d (%s)", int(s), s)
}

// stopping is why there is no llama-server once its owner stops it.
const stopping = "the shim is stopping"

// ShortError is err's first line, "none" for nil.
func ShortError(err error) string {
	if err == nil {
		return "none"
	}
	msg := err.Error()
	for i, c := range msg {
		if c == '\n' {
			return msg[:i]
		}
	}
	return msg
}

// once starts llama-server, waits until it is ready, offers it until it exits or ctx is
// done, and says why it ended.
func (p *Process[T]) once(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append(append([]string{}, p.opts.Args...), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	key, err := randomKey()
	if err != nil {
		return err
	}
	cmd := exec.Command(p.opts.Path, args...)
	// The key goes in the environment, which only this user can read, not on the command
	// line, which every local user can.
	cmd.Env = append(serverEnv(p.opts.Env), "LLAMA_API_KEY="+key)
	cmd.Dir = p.opts.Dir
	tail := &tailBuffer{max: 8 << 10}
	var out io.Writer = tail
	if p.opts.Output != nil {
		out = io.MultiWriter(tail, p.opts.Output)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that stopping it reaches anything it runs
	// and a terminal's Ctrl-C reaches only its owner, which stops it in order.
	// Pdeathsig: if the owner dies without stopping it (SIGKILL, a crash),
	// llama-server goes too instead of holding its port and memory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.opts.Path, err)
	}
	p.mu.Lock()
	p.pid = cmd.Process.Pid
	p.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p.log.Info("llama-server starting", "pid", cmd.Process.Pid, "addr", addr, "args", args)

	ep := &Endpoint{BaseURL: "http://" + addr, APIKey: key, PID: cmd.Process.Pid}
	type prepared struct {
		v   T
		err error
	}
	readyErr := make(chan prepared, 1)
	readyCtx, cancelReady := context.WithCancel(ctx)
	defer cancelReady()
	go func() {
		v, err := p.waitReady(readyCtx, ep)
		readyErr <- prepared{v, err}
	}()
	for {
		select {
		case err := <-exited:
			cancelReady()
			p.unset("llama-server exited")
			return &exitError{err: err, output: tail.String()}
		case <-ctx.Done():
			cancelReady()
			p.unset(stopping)
			stop(cmd, exited, 10*time.Second)
			p.log.Info("llama-server stopped")
			return ctx.Err()
		case r := <-readyErr:
			if r.err != nil {
				stop(cmd, exited, 10*time.Second)
				return fmt.Errorf("llama-server did not become ready: %w; last output:\n%s", r.err, tail.String())
			}
			readyErr = nil
			p.set(ep, r.v, "")
			p.mu.Lock()
			p.ready = true
			p.mu.Unlock()
			attrs := []any{"addr", addr, "slots", ep.TotalSlots, "n_ctx", ep.NCtx, "n_vocab", ep.NVocab, "build", ep.BuildInfo}
			if p.opts.Describe != nil {
				attrs = append(attrs, p.opts.Describe(r.v)...)
			}
			p.log.Info("llama-server ready", attrs...)
		}
	}
}

// waitReady polls /health until llama-server has loaded its model, reads what it says
// about itself into ep, and runs Prepare.
func (p *Process[T]) waitReady(ctx context.Context, ep *Endpoint) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadyTimeout)
	defer cancel()
	c := NewClient(ep.BaseURL, ep.APIKey)
	for c.Health(ctx) != nil {
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("waiting for /health: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	info, err := c.ReadInfo(ctx)
	if err != nil {
		return zero, err
	}
	ep.Info = info
	if p.opts.Prepare == nil {
		return zero, nil
	}
	return p.opts.Prepare(ctx, *ep)
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func stop(cmd *exec.Cmd, exited <-chan error, grace time.Duration) {
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// randomKey returns a fresh API key for one llama-server process.
func randomKey() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making llama-server's API key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// serverEnv is the environment llama-server runs with: the caller's (the process's own when
// nil, as exec does) without any LLAMA_API_KEY of its own, since the Process sets that.
func serverEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "LLAMA_API_KEY=") {
			out = append(out, kv)
		}
	}
	return out
}
