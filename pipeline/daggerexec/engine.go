package daggerexec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"dagger.io/dagger"
	"dagger.io/dagger/engineconn"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
)

// runnerHost is the environment variable the dagger CLI reads a runner host from.
const runnerHost = "_EXPERIMENTAL_DAGGER_RUNNER_HOST"

// Options configure the Dagger executor.
type Options struct {
	// Source overrides where the source comes from: a local plain directory or git
	// repository/mirror. Empty: the engine fetches the plan's URL at the plan's commit.
	Source string
	// Engine is a runner host URL (tcp://, docker-container://, kube-pod://) handed to the
	// dagger CLI; empty uses the CLI's default (an engine it starts with docker).
	Engine string
	// Devel overrides where the devel image comes from: an image reference (a mirror),
	// oci-archive:PATH or oci-layout:PATH (a directory the engine imports as a tarball is not
	// supported: pass an archive).
	Devel   string
	Series  []patches.Patch
	Builder pipeline.Builder
	Logger  *slog.Logger
	// LogOutput receives the engine's progress; nil discards it. From it, each build logs
	// ninja's last step with its elapsed time every ProgressEvery (0: 30 s).
	LogOutput     io.Writer
	ProgressEvery time.Duration
	// Progress is stderr's status line where it is a terminal: the builds' progress is drawn
	// there instead of logged every ProgressEvery.
	Progress *progress.Term

	// ReadsDir keeps, by plan hash, what each build read from the source tree (Reads); empty:
	// llbuild/reads in the user's cache directory.
	ReadsDir string

	// conn replaces the engine connection (tests: a recording fake).
	conn engineconn.EngineConn
}

// Executor builds plans on a Dagger engine: each build in a session of its own, so that the
// engine's log of a session is the progress of that build alone (concurrent builds on one
// session share one log whose lines do not say which build they are from); checks and wheels
// share one session.
type Executor struct {
	opts Options

	mu     sync.Mutex
	client *dagger.Client
}

var _ pipeline.Executor = (*Executor)(nil)

// New returns a Dagger executor. It fails fast, before any build, when no engine can be
// reached: no session, no dagger CLI, or no way for the CLI to start an engine.
func New(opts Options) (*Executor, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Builder.Executor == "" {
		opts.Builder.Executor = pipeline.ExecutorDagger
	}
	if opts.ReadsDir == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			opts.ReadsDir = filepath.Join(cache, "llbuild", "reads")
		}
	}
	if opts.Source != "" {
		abs, err := filepath.Abs(opts.Source)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("source %s is not a directory", opts.Source)
		}
		opts.Source = abs
	}
	if opts.conn == nil {
		cli, err := checkEngine(opts.Engine)
		if err != nil {
			return nil, err
		}
		if err := dialEngine(opts.Engine); err != nil {
			return nil, err
		}
		// The SDK runs only the CLI _EXPERIMENTAL_DAGGER_CLI_BIN names; without it, it
		// downloads one from dl.dagger.io, whatever is on PATH. The dagger on PATH is the one
		// the user installed (and the checks above found): hand it to the SDK.
		if cli != "" {
			os.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", cli)
		}
	}
	return &Executor{opts: opts}, nil
}

// checkEngine fails when no engine can be reached; cli is the dagger CLI found on PATH when
// _EXPERIMENTAL_DAGGER_CLI_BIN names none.
func checkEngine(engine string) (cli string, err error) {
	if os.Getenv("DAGGER_SESSION_PORT") != "" {
		return "", nil
	}
	if bin := os.Getenv("_EXPERIMENTAL_DAGGER_CLI_BIN"); bin != "" {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%w: _EXPERIMENTAL_DAGGER_CLI_BIN=%s is not an executable", ErrNoEngine, bin)
		}
	} else if cli, err = exec.LookPath("dagger"); err != nil {
		// A runner host replaces docker, not the CLI: the SDK opens its session by running
		// `dagger session`, which dials the runner host (engineconn.startCLISession).
		if given := runnerHostGiven(engine); given != "" {
			return "", fmt.Errorf("%w: %s needs the dagger CLI (v%s) on this machine, and it is not on PATH: llbuild opens the session by running `dagger session`, which connects to that engine (docker is not needed); install the dagger CLI v%s, point _EXPERIMENTAL_DAGGER_CLI_BIN at it, run under `dagger run`, or build natively with --executor host --source DIR", ErrNoEngine, given, engineconn.CLIVersion, engineconn.CLIVersion)
		}
		return "", fmt.Errorf("%w: the dagger CLI is not on PATH and no session is open (DAGGER_SESSION_PORT); install the dagger CLI (v%s), run under `dagger run`, or build natively with --executor host --source DIR", ErrNoEngine, engineconn.CLIVersion)
	}
	if engine != "" || os.Getenv(runnerHost) != "" {
		return cli, nil
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		return "", fmt.Errorf("%w: the dagger CLI starts its engine with docker, which is not on PATH; pass --engine tcp://HOST:PORT (or docker-container://NAME, kube-pod://NAME) for a running engine, or use --executor host --source DIR", ErrNoEngine)
	}
	// The CLI would try `docker version` itself and fail with its whole log; ask the daemon
	// first and say it in one line.
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, docker, "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		why := lastLine(string(out))
		if ctx.Err() != nil {
			why = fmt.Sprintf("no answer within %v", dockerTimeout)
		} else if why == "" {
			why = err.Error()
		}
		return "", fmt.Errorf("%w: the dagger CLI starts its engine with docker, and the Docker daemon is not answering (docker version: %s); start Docker (systemctl start docker), or pass --engine tcp://HOST:PORT for a running engine (or set %s), or build natively with --executor host --source DIR", ErrNoEngine, why, runnerHost)
	}
	return cli, nil
}

// dockerTimeout bounds the check that the Docker daemon answers.
var dockerTimeout = 10 * time.Second

// lastLine is the last non-empty line of s (where a command says what failed), trimmed,
// without terminal colour codes.
func lastLine(s string) string {
	lines := strings.Split(ansi.ReplaceAllString(s, ""), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// dialTimeout bounds the check that a tcp:// engine listens: the CLI itself waits minutes on an
// address where nothing answers.
var dialTimeout = 5 * time.Second

// dialEngine checks that a tcp:// runner host (--engine, else the environment's) accepts a
// connection, so that an engine that is down or unreachable is said at once, with what to check.
func dialEngine(engine string) error {
	host := engine
	if host == "" {
		host = os.Getenv(runnerHost)
	}
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "tcp" {
		return nil
	}
	c, err := net.DialTimeout("tcp", u.Host, dialTimeout)
	if err != nil {
		return fmt.Errorf("%w: nothing answers at %s (%v): check that the engine runs on that machine and listens on that address and port (dagger-engine --addr tcp://0.0.0.0:PORT), that no firewall is between, and that this machine can reach it (nc -z HOST PORT); or build natively with --executor host --source DIR", ErrNoEngine, runnerHostGiven(engine), err)
	}
	return c.Close()
}

// runnerHostGiven says where the user named a runner host, its URL without credentials: the
// --engine flag, else the environment variable the CLI reads; "" when neither.
func runnerHostGiven(engine string) string {
	if engine != "" {
		return "--engine " + redactURL(engine)
	}
	if env := os.Getenv(runnerHost); env != "" {
		return runnerHost + "=" + redactURL(env)
	}
	return ""
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// connect returns the executor's shared session, opened at the first call.
func (e *Executor) connect(ctx context.Context) (*dagger.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		return e.client, nil
	}
	c, err := e.dial(ctx, e.opts.LogOutput)
	if err != nil {
		return nil, err
	}
	e.client = c
	return c, nil
}

// session opens a session of its own for one build: the engine's log of it goes to
// LogOutput, each line headed by label, and to follow (the build's progress). close ends it.
func (e *Executor) session(ctx context.Context, label string, follow io.Writer) (c *dagger.Client, close func() error, err error) {
	var log io.Writer
	var lines *labelledLines
	if e.opts.LogOutput != nil {
		lines = &labelledLines{w: e.opts.LogOutput, label: label + " | "}
		log = io.MultiWriter(lines, follow)
	}
	c, err = e.dial(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	return c, func() error {
		err := c.Close()
		if lines != nil {
			lines.flush()
		}
		return err
	}, nil
}

// dial opens an engine session whose log goes to log (nil: discarded).
func (e *Executor) dial(ctx context.Context, log io.Writer) (*dagger.Client, error) {
	var opts []dagger.ClientOpt
	if e.opts.conn != nil {
		opts = append(opts, dagger.WithConn(e.opts.conn))
	}
	if e.opts.Engine != "" {
		opts = append(opts, dagger.WithRunnerHost(e.opts.Engine))
	}
	if log != nil {
		opts = append(opts, dagger.WithLogOutput(log))
	}
	c, err := dagger.Connect(ctx, opts...)
	if err != nil {
		// The error carries the dagger CLI's whole log, which LogOutput has shown already:
		// its first line, uncoloured.
		why := err.Error()
		if i := strings.IndexByte(why, '\n'); i >= 0 {
			why = why[:i] + " (the dagger CLI's log is above)"
		}
		why = ansi.ReplaceAllString(why, "")
		if given := runnerHostGiven(e.opts.Engine); given != "" {
			return nil, fmt.Errorf("%w: connecting to %s: %s", ErrNoEngine, given, why)
		}
		return nil, fmt.Errorf("%w: connecting: %s", ErrNoEngine, why)
	}
	return c, nil
}

// labelledLines writes whole lines to w, each headed by label, so that the logs of
// concurrent sessions interleave by line and say whose each line is.
type labelledLines struct {
	mu      sync.Mutex
	w       io.Writer
	label   string
	partial []byte
}

func (l *labelledLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	data := append(l.partial, b...)
	var out []byte
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, l.label...), data[:i+1]...)
		data = data[i+1:]
	}
	l.partial = append(l.partial[:0], data...)
	if len(out) > 0 {
		if _, err := l.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush writes a last line that did not end.
func (l *labelledLines) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.w.Write(append(append([]byte(l.label), l.partial...), '\n'))
		l.partial = nil
	}
}

// Close ends the engine session.
func (e *Executor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client == nil {
		return nil
	}
	err := e.client.Close()
	e.client = nil
	return err
}
