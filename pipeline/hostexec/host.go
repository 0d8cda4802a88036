package hostexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
)

// Options configure the host executor.
type Options struct {
	// Source is the llama.cpp source: a plain directory, or a git repository or mirror in
	// which the plan's commit is checked out. Required: the host executor fetches nothing.
	Source string
	// WorkDir holds per-build source copies, build trees and logs. Default:
	// $XDG_CACHE_HOME/llbuild/work. Never inside Source.
	WorkDir string
	// CacheDir holds ccache's cache (CCACHE_DIR) unless the environment sets CCACHE_DIR.
	// Default: $XDG_CACHE_HOME/llbuild/ccache.
	CacheDir string
	// Series holds the patch files by name; the plan says which are applied, in which order.
	Series []patches.Patch
	// Jobs is ninja's parallelism; 0 leaves ninja's default.
	Jobs    int
	Builder pipeline.Builder
	Logger  *slog.Logger
	// ProgressEvery is how often a running build logs ninja's progress ([n/N]) with its
	// elapsed time; 0 means 30 s (progress.PlainEvery).
	ProgressEvery time.Duration
	// Progress is stderr's status line where it is a terminal: the build's progress is drawn
	// there instead of logged every ProgressEvery.
	Progress *progress.Term
}

// Executor builds plans natively.
type Executor struct{ opts Options }

var _ pipeline.Executor = (*Executor)(nil)

// New returns a host executor.
func New(opts Options) (*Executor, error) {
	if opts.Source == "" {
		return nil, errors.New("the host executor needs --source: a llama.cpp directory or git mirror")
	}
	src, err := filepath.Abs(opts.Source)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("source %s is not a directory", opts.Source)
	}
	opts.Source = src
	cache, _ := os.UserCacheDir()
	if cache == "" {
		cache = os.TempDir()
	}
	if opts.WorkDir == "" {
		opts.WorkDir = filepath.Join(cache, "llbuild", "work")
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(cache, "llbuild", "ccache")
	}
	for _, d := range []*string{&opts.WorkDir, &opts.CacheDir} {
		if *d, err = filepath.Abs(*d); err != nil {
			return nil, err
		}
	}
	if within(opts.WorkDir, src) {
		return nil, inputerr.Errorf("work directory %s is inside the source %s; choose one outside it (--work-dir)", opts.WorkDir, src)
	}
	// the build names its work directory in compiler flags (-ffile-prefix-map=DIR=...), which
	// CMake splits at spaces
	if strings.ContainsAny(opts.WorkDir, " \t\n") {
		return nil, inputerr.Errorf("work directory %q holds a space, which the compiler flags naming it cannot take (-ffile-prefix-map): give --work-dir a path without spaces", opts.WorkDir)
	}
	if opts.Builder.Executor == "" {
		opts.Builder.Executor = pipeline.ExecutorHost
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Executor{opts: opts}, nil
}

// state is what the steps share.
type state struct {
	// logger is the build's, with its target and plan
	logger   *slog.Logger
	plan     *pipeline.Plan
	opts     Options
	out      string
	root     string // work directory of this plan
	src      string
	build    string
	logs     string
	env      []string
	cfgArgs  []string
	artifact string
	// held is the work directory's lock (lock), handed to every command the build runs so that
	// the lock outlives an llbuild killed outright until the last compiler it started exits
	held *os.File
	nlog int
	// sourceTree is the content hash of a plain-directory source, whose commit nothing checks.
	sourceTree string
	// cuda is the CUDA toolchain found on this machine, for CUDA plans.
	cuda *pipeline.CUDAToolchain
}

func (s *state) logPath(name string) string {
	s.nlog++
	return filepath.Join(s.logs, fmt.Sprintf("%02d-%s.log", s.nlog, name))
}

func (s *state) cmd(dir, logName string, args ...string) command {
	return command{dir: dir, env: s.env, log: s.logPath(logName), args: args, hold: s.held}
}

// steps are the host build, in order.
func steps() []pipeline.Step[*state] {
	return []pipeline.Step[*state]{
		pipeline.StepFunc("check tools", checkTools),
		pipeline.StepFunc("prepare source", prepareSource),
		pipeline.StepFunc("apply patches", applyPatches),
		pipeline.StepFunc("configure", configure),
		pipeline.StepFunc("build", build),
		pipeline.StepFunc("write artifacts", writeArtifacts),
	}
}

// Build runs the plan in the work directory and writes its artifacts under out.
func (e *Executor) Build(ctx context.Context, p *pipeline.Plan, out string) (string, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	s := &state{plan: p, opts: e.opts, out: out, root: e.root(p)}
	s.src, s.build, s.logs = filepath.Join(s.root, "src"), filepath.Join(s.root, "build"), filepath.Join(s.root, "logs")
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return "", err
	}
	held, unlock, err := lock(s.root + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	s.held = held
	for _, d := range []string{s.src, s.build, s.logs} {
		if err := os.RemoveAll(d); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(s.logs, 0o755); err != nil {
		return "", err
	}
	log := e.opts.Logger.With("target", p.Target, "plan", p.ShortHash())
	s.logger = log
	log.Info("building", "executor", "host", "work", s.root)
	if err := pipeline.RunSteps(ctx, pipeline.LoggedAll(log, steps()), s); err != nil {
		return "", fmt.Errorf("target %s: %w", p.Target, err)
	}
	return s.artifact, nil
}

// root is where the build of p works: its source copy, build tree and logs.
func (e *Executor) root(p *pipeline.Plan) string {
	return filepath.Join(e.opts.WorkDir, p.Target+"-"+p.ShortHash())
}

// lock takes an exclusive lock so two builds of one plan do not share a work directory. The
// commands a build runs get the lock's file (command.hold): a flock belongs to the open file,
// so it is held while any of them lives, and a build whose llbuild was killed outright (kill
// -9, a lost terminal) keeps a new build out of its directory until its cmake, ninja and
// compilers have exited.
func lock(name string) (*os.File, func(), error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("another build of this plan holds %s (or the processes of one that was killed still run: wait for them, or find them with fuser %s)", name, name)
	}
	return f, func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// configuredValue returns the value of -DNAME=... in args, the last one winning as in CMake.
func configuredValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		k, val, ok := strings.Cut(strings.TrimPrefix(a, "-D"), "=")
		k, _, _ = strings.Cut(k, ":")
		if ok && strings.HasPrefix(a, "-D") && k == name {
			v = val
		}
	}
	return v
}

func checkTools(ctx context.Context, s *state) error {
	p := s.plan
	var missing []string
	need := func(what string, names ...string) string {
		for _, n := range names {
			if path, err := exec.LookPath(n); err == nil {
				return path
			}
		}
		missing = append(missing, what)
		return ""
	}
	need("cmake", "cmake")
	need("ninja (apt install ninja-build)", "ninja")
	need("git", "git")
	if cxx := configuredValue(p.Configure, "CMAKE_CXX_COMPILER"); cxx != "" {
		need(cxx+" (the target's C++ compiler)", cxx)
	} else if env := os.Getenv("CXX"); env != "" {
		need(env+" (from $CXX)", env)
	} else {
		need("a C++ compiler (c++, g++ or clang++; apt install build-essential)", "c++", "g++", "clang++")
	}
	if cc := configuredValue(p.Configure, "CMAKE_C_COMPILER"); cc != "" {
		need(cc+" (the target's C compiler)", cc)
	}
	if p.SYCL != nil {
		need("icpx (Intel oneAPI DPC++, for SYCL targets)", "icpx")
	}
	env := buildEnv(os.Environ())
	if p.CUDA != nil {
		out, _ := exec.CommandContext(ctx, "sh", "-c", pipeline.CUDAProbeScript).Output()
		tc, err := pipeline.ParseCUDAProbe(string(out), "this machine")
		if tc.NVCC == "" {
			missing = append(missing, "nvcc (the CUDA toolkit "+p.CUDA.Toolkit+", for CUDA targets)")
		} else if err != nil {
			missing = append(missing, "the CUDA toolkit's driver stub ("+err.Error()+")")
		} else if err := p.CheckToolkit(tc, "this machine"); err != nil {
			return err
		} else {
			if _, err := exec.LookPath("nvcc"); err != nil {
				env = append(env, "CUDACXX="+tc.NVCC)
			}
			s.cuda = tc
		}
	}
	if p.EnvScript != "" {
		if _, err := os.Stat(p.EnvScript); err != nil {
			missing = append(missing, p.EnvScript+" (the environment script the plan sources)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; install them, or use --executor dagger, which builds in the plan's devel image", errMissingTools, strings.Join(missing, ", "))
	}

	args := make([]string, 0, len(p.Configure))
	_, ccacheErr := exec.LookPath("ccache")
	for _, a := range p.Configure {
		if ccacheErr != nil && strings.HasSuffix(a, "_COMPILER_LAUNCHER=ccache") {
			continue
		}
		args = append(args, pipeline.Expand(a, s.src, s.cuda))
	}
	if ccacheErr != nil {
		s.opts.Logger.Warn("ccache not found: building without a compiler cache")
	}
	s.cfgArgs = args
	for _, kv := range pipeline.SortedEnv(p.Env) {
		env = append(env, pipeline.Expand(kv, s.src, s.cuda))
	}
	if os.Getenv("CCACHE_DIR") == "" {
		env = append(env, "CCACHE_DIR="+s.opts.CacheDir)
	}
	// git must not read the user's configuration or find a repository above the work dir.
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES="+filepath.Dir(s.root))
	s.env = env
	return nil
}

func prepareSource(ctx context.Context, s *state) error {
	src, commit := s.opts.Source, s.plan.Source.Commit
	if s.plan.Vendor != nil {
		commit = s.plan.Vendor.Commit
	}
	// Only a repository whose top is src counts, not one src happens to sit inside.
	isGit := command{dir: src, env: append(s.env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(src)), args: []string{"git", "-C", src, "rev-parse", "--git-dir"}}
	// An empty repository (git init, nothing committed) holds no commit to check out: its
	// files are the source, as in a plain directory.
	hasCommits := command{dir: src, env: isGit.env, args: []string{"git", "-C", src, "rev-parse", "--verify", "-q", "HEAD^{commit}"}}
	_, gitErr := isGit.output(ctx)
	if _, err := hasCommits.output(ctx); gitErr == nil && err == nil {
		if out, err := (command{env: s.env, args: []string{"git", "-C", src, "cat-file", "-e", commit + "^{commit}"}}).output(ctx); err != nil {
			return fmt.Errorf("source %s does not have the plan's commit %s (%s): %s", src, commit, oneLine(out), gitref.FetchHint(src, commit))
		}
		// A mirror may lack blobs that no build reads (upstream's large vocabulary files, say):
		// a checkout would fail on them, so the commit's tree is archived without them.
		missing, err := gitref.MissingBlobs(ctx, src, commit)
		if err != nil {
			return fmt.Errorf("reading %s's tree in %s: %w", commit, src, err)
		}
		if len(missing) > 0 {
			s.opts.Logger.Warn("the source lacks some files of the commit; building without them", "commit", commit, "missing", strings.Join(missing, " "))
			if err := gitref.Archive(ctx, src, commit, s.src, missing); err != nil {
				return err
			}
			return s.cmd(s.src, "git-init", "git", "init", "--quiet").run(ctx)
		}
		if err := s.cmd("", "clone", "git", "clone", "--quiet", "--no-checkout", src, s.src).run(ctx); err != nil {
			return fmt.Errorf("cloning %s: %w", src, err)
		}
		if err := s.cmd(s.src, "checkout", "git", "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit).run(ctx); err != nil {
			return fmt.Errorf("checking out %s: %w", commit, err)
		}
		return nil
	}
	tree, err := pipeline.TreeHash(src)
	if err != nil {
		return err
	}
	if err := pipeline.CheckSourceTree(s.plan, src, tree); err != nil {
		return err
	}
	s.sourceTree = tree
	s.opts.Logger.Warn("source is a plain directory: its commit cannot be checked against the plan's; provenance records it as unverified, by its tree hash", "source", src, "commit", commit, "tree", tree)
	if err := copyTree(ctx, src, s.src); err != nil {
		return fmt.Errorf("copying the source %s: %w", src, err)
	}
	// git apply needs to know the tree's top: make the copy a repository of its own.
	return s.cmd(s.src, "git-init", "git", "init", "--quiet").run(ctx)
}

func applyPatches(ctx context.Context, s *state) error {
	if len(s.plan.Patches) == 0 {
		return nil
	}
	byName := map[string]patches.Patch{}
	for _, p := range s.opts.Series {
		byName[p.Name] = p
	}
	dir := filepath.Join(s.root, "patches")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var files []string
	for _, pp := range s.plan.Patches {
		p, ok := byName[pp.Name]
		if !ok {
			return fmt.Errorf("patch %s is in the plan but not in the series given to the executor", pp.Name)
		}
		if p.SHA256 != pp.SHA256 {
			return fmt.Errorf("patch %s has sha256 %s, the plan pins %s", pp.Name, p.SHA256, pp.SHA256)
		}
		f := filepath.Join(dir, p.Name)
		if err := os.WriteFile(f, p.Data, 0o644); err != nil {
			return err
		}
		files = append(files, f)
	}
	git := func(args ...string) (string, error) {
		return command{dir: s.src, env: s.env, args: append([]string{"git", "apply", "--whitespace=nowarn"}, args...)}.output(ctx)
	}
	// Patches apply in order, each checked before it is applied; a patch that does not apply
	// undoes the ones before it, so the tree is never left half-patched.
	for i, f := range files {
		if out, err := git("--check", f); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			perr := &PatchError{Patch: s.plan.Patches[i].Name, File: f, Hunks: parseApplyError(out), Output: out}
			for j := i - 1; j >= 0; j-- {
				if rout, rerr := git("-R", files[j]); rerr != nil {
					return fmt.Errorf("%w; reverting %s then failed too (%s): remove %s", perr, s.plan.Patches[j].Name, oneLine(rout), s.src)
				}
			}
			return perr
		}
		if out, err := git(f); err != nil {
			return fmt.Errorf("applying patch %s after it checked clean: %s", s.plan.Patches[i].Name, oneLine(out))
		}
	}
	return nil
}

func configure(ctx context.Context, s *state) error {
	args := append([]string{"cmake", "-S", s.src, "-B", s.build}, s.cfgArgs...)
	if s.plan.EnvScript != "" {
		args = append([]string{"bash", "-c", `. "$0" >/dev/null && exec "$@"`, s.plan.EnvScript}, args...)
	}
	return s.cmd(s.root, "configure", args...).run(ctx)
}

func build(ctx context.Context, s *state) error {
	args := []string{"cmake", "--build", s.build, "--target"}
	args = append(args, s.plan.BuildTargets...)
	if s.opts.Jobs > 0 {
		args = append(args, "--parallel", fmt.Sprint(s.opts.Jobs))
	}
	if s.plan.EnvScript != "" {
		args = append([]string{"bash", "-c", `. "$0" >/dev/null && exec "$@"`, s.plan.EnvScript}, args...)
	}
	c := s.cmd(s.root, "build", args...)
	c.progress = pipeline.NewNinjaProgress(progress.Reporter{Term: s.opts.Progress, Log: s.logger, Every: s.opts.ProgressEvery}, s.plan.Target)
	return c.run(ctx)
}

func writeArtifacts(_ context.Context, s *state) error {
	opts := []pipeline.ProvenanceOption{pipeline.WithPatchFiles(s.opts.Series)}
	if s.sourceTree != "" {
		opts = append(opts, pipeline.WithUnverifiedSource(s.plan, s.sourceTree))
	}
	if s.cuda != nil {
		opts = append(opts, pipeline.WithCUDAToolchain(s.cuda))
	}
	dir, err := pipeline.WriteArtifacts(s.plan, s.build, s.out, s.opts.Builder, opts...)
	if err != nil {
		return err
	}
	s.artifact = dir
	return nil
}

// buildEnv is the caller's environment with the locale fixed to C: ccache puts LANG, LC_ALL,
// LC_CTYPE and LC_MESSAGES into its keys, so without this the same build from a shell with
// LANG=C.UTF-8 and from one without LANG (cron, CI, env -i) missed each other's cache entirely;
// compiler messages are then also the same wherever the build runs.
func buildEnv(environ []string) []string {
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LANG=C", "LC_ALL=C")
}
