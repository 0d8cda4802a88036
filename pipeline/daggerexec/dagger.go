package daggerexec

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
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

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
)

// Paths inside the build container.
const (
	srcDir     = "/src"
	buildDir   = "/build"
	patchDir   = "/patches"
	ccacheDir  = "/ccache"
	tailLines  = 20
	platform   = dagger.Platform("linux/amd64")
	runnerHost = "_EXPERIMENTAL_DAGGER_RUNNER_HOST"
)

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

// ErrNoEngine is returned (wrapped) when no Dagger engine is reachable.
var ErrNoEngine = errors.New("no Dagger engine reachable")

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

// state is what the steps share: the container being defined and where outputs go.
type state struct {
	plan     *pipeline.Plan
	opts     Options
	dag      *dagger.Client
	ctr      *dagger.Container
	export   string
	out      string
	artifact string
	// patchExecs maps a patch exec's command line to the patch, to name it in errors.
	patchExecs map[string]string
	// develRef and develDigest name the devel image the build runs in (develDigest "" when
	// unknown); develRef is empty when it is the plan's.
	develRef, develDigest string
	// sourceTree is the content hash of a plain-directory source, whose commit nothing checks.
	sourceTree string
	// cuda is the CUDA toolchain found in the devel image, for CUDA plans.
	cuda *pipeline.CUDAToolchain
}

// provenance says where the build's inputs differed from the plan's.
func (s *state) provenance() []pipeline.ProvenanceOption {
	var opts []pipeline.ProvenanceOption
	if s.develRef != "" {
		opts = append(opts, pipeline.WithDevelImage(s.develRef, s.develDigest))
	}
	if s.sourceTree != "" {
		opts = append(opts, pipeline.WithUnverifiedSource(s.plan, s.sourceTree))
	}
	if s.cuda != nil {
		opts = append(opts, pipeline.WithCUDAToolchain(s.cuda))
	}
	return opts
}

// develSubstituted reports whether the build runs in another devel image than the plan's.
func (s *state) develSubstituted() bool {
	return s.develRef != "" && pipeline.DevelSubstituted(s.plan, s.develDigest)
}

// lazySteps only define the build's container: the engine runs them when the export asks for
// the result, so their own times say nothing and are logged at debug level; the export's time
// is the build's.
var lazySteps = map[string]bool{"devel image": true, "apt packages": true, "environment": true, "patches": true, "configure": true, "build": true, "build wheel": true}

func logged[S any](log *slog.Logger, steps []pipeline.Step[S]) []pipeline.Step[S] {
	out := make([]pipeline.Step[S], len(steps))
	for i, st := range steps {
		if lazySteps[st.Name()] {
			out[i] = pipeline.LoggedDebug(log, st)
		} else {
			out[i] = pipeline.Logged(log, st)
		}
	}
	return out
}

func steps() []pipeline.Step[*state] {
	return []pipeline.Step[*state]{
		pipeline.StepFunc("devel image", develImage),
		pipeline.StepFunc("apt packages", aptPackages),
		pipeline.StepFunc("cuda toolkit", cudaToolkit),
		pipeline.StepFunc("environment", environment),
		pipeline.StepFunc("source", source),
		pipeline.StepFunc("patches", applyPatches),
		pipeline.StepFunc("configure", configure),
		pipeline.StepFunc("build", build),
		pipeline.StepFunc("export", export),
		pipeline.StepFunc("write artifacts", writeArtifacts),
	}
}

// Build defines the plan's container on the engine, runs it, exports the outputs and writes
// the artifacts under out.
func (e *Executor) Build(ctx context.Context, p *pipeline.Plan, out string) (string, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	log := e.opts.Logger.With("target", p.Target, "plan", p.ShortHash())
	follow := pipeline.NewNinjaProgress(progress.Reporter{Term: e.opts.Progress, Log: log, Every: e.opts.ProgressEvery}, p.Target)
	c, closeSession, err := e.session(ctx, p.Target, follow)
	if err != nil {
		return "", err
	}
	defer closeSession()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	// One export directory per plan, named so that the engine's calls are the same each run.
	exportDir := filepath.Join(out, ".export-"+p.Target+"-"+p.ShortHash())
	if err := os.RemoveAll(exportDir); err != nil {
		return "", err
	}
	if err := os.Mkdir(exportDir, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(exportDir)
	defer os.Remove(exportDir + "-devel.tar")
	defer os.RemoveAll(exportDir + "-src")
	s := &state{plan: p, opts: e.opts, dag: c, export: exportDir, out: out, patchExecs: map[string]string{}}
	log.Info("building", "executor", "dagger", "engine", e.opts.Engine)
	follow.Start()
	defer follow.Stop()
	if err := pipeline.RunSteps(ctx, logged(log, steps()), s); err != nil {
		return "", fmt.Errorf("target %s: %w", p.Target, err)
	}
	return s.artifact, nil
}

func develImage(_ context.Context, s *state) error {
	p := s.plan
	ctr := s.dag.Container(dagger.ContainerOpts{Platform: platform})
	// Provenance names the image the build ran in, by digest, and no host path: an archive
	// or layout by its base name.
	switch d := s.opts.Devel; {
	case strings.HasPrefix(d, "oci-archive:"):
		file := strings.TrimPrefix(d, "oci-archive:")
		m, err := ocitar.IndexManifest(file)
		if err == nil {
			s.develDigest, err = ocitar.OnlyDigest(m)
		}
		if err != nil {
			return fmt.Errorf("--base devel=%s: %w", d, err)
		}
		s.develRef = "oci-archive:" + filepath.Base(file)
		ctr = ctr.Import(s.dag.Host().File(file))
	case strings.HasPrefix(d, "oci-layout:"):
		dir := strings.TrimPrefix(d, "oci-layout:")
		m, err := ocitar.LayoutIndexManifest(dir)
		if err == nil {
			s.develDigest, err = ocitar.OnlyDigest(m)
		}
		if err != nil {
			return fmt.Errorf("--base devel=%s: %w", d, err)
		}
		s.develRef = "oci-layout:" + filepath.Base(filepath.Clean(dir))
		// The engine imports archives: tar the layout for it. The file must outlive the
		// build, as the engine reads it when it evaluates the container.
		f, err := tarLayout(dir, s.export)
		if err != nil {
			return fmt.Errorf("--base devel=%s: %w", d, err)
		}
		ctr = ctr.Import(s.dag.Host().File(f))
	case d != "":
		ref := d
		if p.Images.Devel.Digest != "" && !strings.Contains(ref, "@") {
			ref += "@" + p.Images.Devel.Digest
		}
		s.develRef = ref
		if _, dg, ok := strings.Cut(ref, "@"); ok {
			s.develDigest = dg
		}
		ctr = ctr.From(ref)
	default:
		ctr = ctr.From(p.Images.Devel.Ref)
	}
	s.ctr = ctr.WithEnvVariable("DEBIAN_FRONTEND", "noninteractive")
	return nil
}

// develName names the devel image in messages: the substitute given, else the plan's.
func (s *state) develName() string {
	if s.develRef != "" {
		return s.develRef
	}
	return s.plan.Images.Devel.Ref
}

// cudaToolkit finds, in the devel image, the CUDA compiler that will build and the driver
// stub it links against (pipeline.CUDAProbeScript), and refuses a compiler of another CUDA
// release than the plan's. This runs the image up to here on the engine, before the build.
func cudaToolkit(ctx context.Context, s *state) error {
	if s.plan.CUDA == nil {
		return nil
	}
	where := "the devel image " + s.develName()
	out, err := s.ctr.WithExec([]string{"sh", "-c", pipeline.CUDAProbeScript}).Stdout(ctx)
	if err != nil {
		return s.engineError(err)
	}
	tc, err := pipeline.ParseCUDAProbe(out, where)
	if err != nil {
		return err
	}
	if err := s.plan.CheckToolkit(tc, where); err != nil {
		return err
	}
	if tc.Driver != "" {
		s.opts.Logger.Warn("the devel image has a real CUDA driver library: the link can succeed against it where a driverless one would need the stub; provenance records it", "driver", tc.Driver, "image", s.develName())
	}
	s.opts.Logger.Info("cuda toolkit", "nvcc", tc.NVCC, "release", tc.Release, "stubs", tc.Stubs)
	s.cuda = tc
	return nil
}

// expand replaces the plan's tokens with their places in the container.
func (s *state) expand(v string) string {
	return pipeline.Expand(v, srcDir, s.cuda)
}

// environment sets the plan's build environment.
func environment(_ context.Context, s *state) error {
	ctr := s.ctr
	for _, kv := range pipeline.SortedEnv(s.plan.Env) {
		k, v, _ := strings.Cut(kv, "=")
		ctr = ctr.WithEnvVariable(k, s.expand(v))
	}
	s.ctr = ctr.WithEnvVariable("CCACHE_DIR", ccacheDir)
	return nil
}

// tarLayout writes the OCI layout dir as an OCI archive in tmpDir and returns its path.
func tarLayout(dir, tmpDir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return "", fmt.Errorf("%s is not an OCI layout: %w", dir, err)
	}
	name := filepath.Join(filepath.Dir(tmpDir), filepath.Base(tmpDir)+"-devel.tar")
	f, err := os.Create(name)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func source(ctx context.Context, s *state) error {
	src := s.plan.Source
	if s.plan.Vendor != nil {
		src = *s.plan.Vendor
	}
	dir, tree, err := s.sourceTreeOf(ctx, s.opts.Source, src)
	if err != nil {
		return err
	}
	s.sourceTree = tree
	s.ctr = s.ctr.WithDirectory(srcDir, dir).WithWorkdir(srcDir)
	return nil
}

// sourceTreeOf is src at the plan's commit: fetched by the engine (local empty), from a local
// git repository or mirror, or a local plain directory, whose commit nothing checks; for that
// one it also returns its content hash, which provenance records.
func (s *state) sourceTreeOf(ctx context.Context, local string, src pipeline.Source) (*dagger.Directory, string, error) {
	switch {
	case local == "":
		return s.dag.Git(src.URL).Commit(src.Commit).Tree(), "", nil
	case isGitRepo(ctx, local):
		// A mirror may lack blobs that no build reads (upstream's large vocabulary files, say):
		// the engine's checkout would fail on them, so the commit's tree is archived without them.
		missing, err := gitref.MissingBlobs(ctx, local, src.Commit)
		if err != nil {
			return nil, "", fmt.Errorf("reading %s's tree in %s: %w", src.Commit, local, err)
		}
		if len(missing) == 0 {
			return s.dag.Host().Directory(local).AsGit().Commit(src.Commit).Tree(), "", nil
		}
		s.opts.Logger.Warn("the source lacks some files of the commit; building without them", "commit", src.Commit, "missing", strings.Join(missing, " "))
		tmp := s.export + "-src"
		if err := os.RemoveAll(tmp); err != nil {
			return nil, "", err
		}
		if err := gitref.Archive(ctx, local, src.Commit, tmp, missing); err != nil {
			return nil, "", err
		}
		return s.dag.Host().Directory(tmp), "", nil
	default:
		tree, err := pipeline.TreeHash(local)
		if err != nil {
			return nil, "", err
		}
		s.opts.Logger.Warn("source is a plain directory: its commit cannot be checked against the plan's; provenance records it as unverified, by its tree hash", "source", local, "commit", src.Commit, "tree", tree)
		return s.dag.Host().Directory(local, dagger.HostDirectoryOpts{Exclude: []string{".git"}}), tree, nil
	}
}

// isGitRepo reports whether dir is the top of a git repository with at least one commit.
func isGitRepo(ctx context.Context, dir string) bool {
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	if cmd.Run() != nil {
		return false
	}
	top, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--absolute-git-dir").Output()
	if err != nil {
		return false
	}
	g := strings.TrimSpace(string(top))
	return g == dir || g == filepath.Join(dir, ".git")
}

func applyPatches(_ context.Context, s *state) error {
	byName := map[string]patches.Patch{}
	for _, p := range s.opts.Series {
		byName[p.Name] = p
	}
	// One exec per patch, each checked before it is applied: an exec error then names the
	// patch. A failed exec leaves nothing behind: the container's state is discarded.
	for _, pp := range s.plan.Patches {
		p, ok := byName[pp.Name]
		if !ok {
			return fmt.Errorf("patch %s is in the plan but not in the series given to the executor", pp.Name)
		}
		if p.SHA256 != pp.SHA256 {
			return fmt.Errorf("patch %s has sha256 %s, the plan pins %s", pp.Name, p.SHA256, pp.SHA256)
		}
		file := patchDir + "/" + p.Name
		args := []string{"sh", "-c", `git apply --check --whitespace=nowarn "$1" && git apply --whitespace=nowarn "$1"`, "apply", file}
		s.patchExecs[strings.Join(args, "\x00")] = p.Name
		s.ctr = s.ctr.WithNewFile(file, string(p.Data)).WithExec(args)
	}
	return nil
}

func withEnvScript(p *pipeline.Plan, args []string) []string {
	if p.EnvScript == "" {
		return args
	}
	return append([]string{"bash", "-c", `. "$0" >/dev/null && exec "$@"`, p.EnvScript}, args...)
}

func configure(_ context.Context, s *state) error {
	args := []string{"cmake", "-S", srcDir, "-B", buildDir}
	for _, a := range s.plan.Configure {
		args = append(args, s.expand(a))
	}
	// ccache handles concurrent use itself: the volume is shared between builds.
	s.ctr = s.ctr.
		WithMountedCache(ccacheDir, s.dag.CacheVolume("llbuild-ccache"), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeShared}).
		WithExec(withEnvScript(s.plan, args))
	return nil
}

func build(_ context.Context, s *state) error {
	args := append([]string{"cmake", "--build", buildDir, "--target"}, s.plan.BuildTargets...)
	s.ctr = s.ctr.WithExec(withEnvScript(s.plan, args))
	return nil
}

func export(ctx context.Context, s *state) error {
	var include []string
	for _, o := range s.plan.Outputs {
		include = append(include, o.Glob)
	}
	outputs := s.dag.Directory().WithDirectory("/", s.ctr.Directory(buildDir), dagger.DirectoryWithDirectoryOpts{Include: include})
	if _, err := outputs.Export(ctx, s.export); err != nil {
		return s.engineError(err)
	}
	return nil
}

func writeArtifacts(_ context.Context, s *state) error {
	dir, err := pipeline.WriteArtifacts(s.plan, s.export, s.out, s.opts.Builder, s.provenance()...)
	if err != nil {
		return err
	}
	s.artifact = dir
	return nil
}

// PatchError is a patch that did not apply in the engine.
type PatchError struct {
	Patch string
	Hunks []string
	Tail  string
}

func (e *PatchError) Error() string {
	what := "it does not apply"
	if len(e.Hunks) > 0 {
		what = "hunk at " + strings.Join(e.Hunks, ", hunk at ") + " does not apply"
	}
	return fmt.Sprintf("patch %s does not apply: %s; git apply said:\n%s", e.Patch, what, e.Tail)
}

// ExecError is a command that failed in the engine, with the tail of its output.
type ExecError struct {
	Cmd      []string
	ExitCode int
	Tail     string
	// Engine is the engine's own message when the command did not run (exit code -1: the
	// container could not start).
	Engine string
}

func (e *ExecError) Error() string {
	if e.ExitCode < 0 && strings.TrimSpace(e.Tail) == "" {
		return fmt.Sprintf("%s did not start in the engine (its container could not run): %s; the engine's log says more", strings.Join(e.Cmd, " "), e.Engine)
	}
	return fmt.Sprintf("%s exited with %d in the engine; last lines of its output:\n%s\n(its full output is in the engine's progress log, which llbuild build writes to stderr; under `dagger run`, in dagger's own view)", strings.Join(e.Cmd, " "), e.ExitCode, e.Tail)
}

var hunkFailed = regexp.MustCompile(`(?m)^error: patch failed: (.+):(\d+)$`)

// engineError turns the engine's exec errors into llbuild's: the failed command, its exit
// code and the last lines of its output; a patch exec becomes a PatchError.
func (s *state) engineError(err error) error {
	var ee *dagger.ExecError
	if !errors.As(err, &ee) {
		return s.fetchError(err)
	}
	out := strings.TrimRight(ee.Stdout, "\n")
	if ee.Stderr != "" {
		if out != "" {
			out += "\n"
		}
		out += strings.TrimRight(ee.Stderr, "\n")
	}
	tail := lastLines(out, tailLines)
	if name, ok := s.patchExecs[strings.Join(ee.Cmd, "\x00")]; ok {
		var hunks []string
		for _, m := range hunkFailed.FindAllStringSubmatch(ee.Stderr, -1) {
			hunks = append(hunks, m[1]+":"+m[2])
		}
		return &PatchError{Patch: name, Hunks: hunks, Tail: tail}
	}
	return &ExecError{Cmd: ee.Cmd, ExitCode: ee.ExitCode, Tail: tail, Engine: ee.Message()}
}

// fetchError says what to do when the engine could not fetch an input: the llama.cpp source
// from upstream, or a base image from its registry.
func (s *state) fetchError(err error) error {
	msg := err.Error()
	src := s.plan.Source.URL
	if s.plan.Vendor != nil && strings.Contains(msg, s.plan.Vendor.URL) {
		src = s.plan.Vendor.URL
	}
	devel := s.plan.Images.Devel
	switch {
	case s.opts.Source == "" && src != "" && (strings.Contains(msg, src) || strings.Contains(msg, "git-upload-pack")):
		return fmt.Errorf("engine: fetching the source %s at %s: %w; the engine fetches the plan's commit from upstream unless --source DIR names a local llama.cpp checkout, mirror or plain tree: give one on a machine without network", src, s.plan.Source.Commit, err)
	case s.opts.Devel == "" && devel.Repository != "" && strings.Contains(msg, devel.Repository):
		return fmt.Errorf("engine: pulling the devel image %s: %w; on a machine without the registry give the image yourself: --base devel=oci-archive:FILE (skopeo copy docker://%s oci-archive:FILE), --base devel=oci-layout:DIR, or a mirror --base devel=MIRROR/REPO", devel.Ref, err, devel.Ref)
	}
	return fmt.Errorf("engine: %w", err)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
