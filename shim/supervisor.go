package shim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// supervisor runs llama-server, restarts it with backoff when it exits,
// and hands out the current ready instance.
type supervisor struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	up       *upstream
	pid      int
	why      string // why there is no ready instance
	started  time.Time
	restarts int
	ready    bool // llama-server has been ready at least once
}

// startAttempts is how many times in a row llama-server may exit before it was ever
// ready: then the shim gives up, since a bad argument, a model it cannot load or an
// instruction the CPU lacks fails the same way on every restart.
const startAttempts = 5

func newSupervisor(opts Options, log *slog.Logger) *supervisor {
	return &supervisor{opts: opts, log: log, why: "llama-server is starting", started: time.Now()}
}

// current returns the ready llama-server, or a 503 saying why there is none.
func (s *supervisor) current() (*upstream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up == nil {
		return nil, unavailable("%s; retry shortly", s.why)
	}
	return s.up, nil
}

func (s *supervisor) startedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *supervisor) set(up *upstream, why string) {
	s.mu.Lock()
	s.up, s.why = up, why
	s.mu.Unlock()
}

// run keeps llama-server running until ctx is done. It returns an error only when
// llama-server exited startAttempts times without ever becoming ready.
func (s *supervisor) run(ctx context.Context) error {
	backoff := s.opts.MinBackoff
	for {
		began := time.Now()
		err := s.once(ctx)
		if ctx.Err() != nil {
			s.set(nil, "the shim is stopping")
			return nil
		}
		s.mu.Lock()
		s.restarts++
		n, ready := s.restarts, s.ready
		s.mu.Unlock()
		if !ready && n >= startAttempts {
			s.set(nil, "llama-server does not start")
			return fmt.Errorf("llama-server exited %d times without becoming ready: %w", n, err)
		}
		if time.Since(began) > 2*s.opts.MaxBackoff {
			backoff = s.opts.MinBackoff // it ran a good while: not a crash loop
		}
		s.set(nil, fmt.Sprintf("llama-server is restarting (exit: %v)", shortError(err)))
		s.log.Error("llama-server exited; restarting", "err", err, "restart", n, "backoff", backoff)
		select {
		case <-ctx.Done():
			s.set(nil, "the shim is stopping")
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

func shortError(err error) string {
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

// once starts llama-server, waits until it is ready, serves with it until
// it exits or ctx is done, and says why it ended.
func (s *supervisor) once(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append(append([]string{}, s.opts.ServerArgs...), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	key, err := randomKey()
	if err != nil {
		return err
	}
	cmd := exec.Command(s.opts.ServerPath, args...)
	// The key goes in the environment, which only this user can read, not on the command
	// line, which every local user can.
	cmd.Env = append(serverEnv(s.opts.Env), "LLAMA_API_KEY="+key)
	cmd.Dir = s.opts.Dir
	tail := &tailBuffer{max: 8 << 10}
	var out io.Writer = tail
	if s.opts.ServerOutput != nil {
		out = io.MultiWriter(tail, s.opts.ServerOutput)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that stopping it reaches anything it runs
	// and a terminal's Ctrl-C reaches only the shim, which stops it in order.
	// Pdeathsig: if the shim dies without stopping it (SIGKILL, a crash),
	// llama-server goes too instead of holding its port and memory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.opts.ServerPath, err)
	}
	s.mu.Lock()
	s.pid = cmd.Process.Pid
	s.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.log.Info("llama-server starting", "pid", cmd.Process.Pid, "addr", addr, "args", args)

	u := &upstream{base: "http://" + addr, key: key, client: newUpstreamClient(4)}
	readyErr := make(chan error, 1)
	readyCtx, cancelReady := context.WithCancel(ctx)
	defer cancelReady()
	go func() { readyErr <- s.waitReady(readyCtx, u) }()
	for {
		select {
		case err := <-exited:
			cancelReady()
			s.set(nil, "llama-server exited")
			return fmt.Errorf("llama-server exited: %v; last output:\n%s", err, tail.String())
		case <-ctx.Done():
			cancelReady()
			s.set(nil, "the shim is stopping")
			stop(cmd, exited, 10*time.Second)
			s.log.Info("llama-server stopped")
			return ctx.Err()
		case err := <-readyErr:
			if err != nil {
				stop(cmd, exited, 10*time.Second)
				return fmt.Errorf("llama-server did not become ready: %w; last output:\n%s", err, tail.String())
			}
			readyErr = nil
			u.client = newUpstreamClient(u.info.TotalSlots)
			s.set(u, "")
			s.mu.Lock()
			s.ready = true
			s.mu.Unlock()
			s.log.Info("llama-server ready", "addr", addr, "slots", u.info.TotalSlots, "n_ctx", u.info.NCtx,
				"n_vocab", u.info.NVocab, "build", u.info.BuildInfo, "scorer", u.scorer.Name())
		}
	}
}

// waitReady polls /health until llama-server has loaded its model, then
// reads what the shim needs to know about it.
func (s *supervisor) waitReady(ctx context.Context, u *upstream) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadyTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.base+"/health", nil)
		resp, err := u.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for /health: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := u.load(ctx); err != nil {
		return err
	}
	v, err := loadVocab(ctx, u, s.opts.Dir)
	if err != nil {
		return err
	}
	u.vocab = v
	u.scorer = chooseScorer(u)
	return nil
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

func (s *supervisor) currentPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// kill sends sig to the running llama-server's process group (tests use
// it to check supervision).
func (s *supervisor) kill(sig syscall.Signal) error {
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	if pid == 0 {
		return errors.New("no llama-server process")
	}
	return syscall.Kill(-pid, sig)
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

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
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
// nil, as exec does) without any LLAMA_API_KEY of its own, since the shim sets that.
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
