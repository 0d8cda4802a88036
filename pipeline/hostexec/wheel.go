package hostexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/wheel"
)

// WheelOptions configure a host build of the llama-cpp-python wheel.
type WheelOptions struct {
	// Options.Source is the llama.cpp source that replaces the package's vendor/llama.cpp.
	Options
	// Package is the llama-cpp-python source: a plain directory, or a git repository or mirror
	// holding the plan's commit.
	Package string
}

// WheelExecutor builds wheel plans natively.
type WheelExecutor struct {
	ex  *Executor
	pkg string
}

var _ pipeline.WheelExecutor = (*WheelExecutor)(nil)

// NewWheel returns a host executor for wheels.
func NewWheel(opts WheelOptions) (*WheelExecutor, error) {
	if opts.Package == "" {
		return nil, errors.New("the host executor needs the llama-cpp-python source (--source DIR); it fetches nothing")
	}
	pkg, err := filepath.Abs(opts.Package)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(pkg); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("llama-cpp-python source %s is not a directory", opts.Package)
	}
	if opts.Source == "" {
		return nil, errors.New("the host executor needs the llama.cpp source for vendor/llama.cpp (--llama-source DIR); it fetches nothing")
	}
	ex, err := New(opts.Options)
	if err != nil {
		return nil, err
	}
	if within(ex.opts.WorkDir, pkg) {
		return nil, fmt.Errorf("work directory %s is inside the package source %s; choose one outside it", ex.opts.WorkDir, pkg)
	}
	return &WheelExecutor{ex: ex, pkg: pkg}, nil
}

// wheelState is what the wheel steps share: the package tree and, inside it, the llama.cpp
// tree (whose state the server steps for sources and patches work on).
type wheelState struct {
	plan   *pipeline.WheelPlan
	pkg    *state // the package source, at root/src
	vendor *state // the vendored llama.cpp, at root/src/<VendorDir>
	python string
	dist   string
	// version is the full version stamped into the package; wheelFile the built wheel.
	version   string
	wheelFile string
	result    *wheel.Result
	artifact  string
}

func wheelSteps() []pipeline.Step[*wheelState] {
	return []pipeline.Step[*wheelState]{
		pipeline.StepFunc("check tools", checkWheelTools),
		pipeline.StepFunc("prepare package source", preparePackage),
		pipeline.StepFunc("prepare vendored llama.cpp", prepareVendor),
		pipeline.StepFunc("apply patches", func(ctx context.Context, s *wheelState) error { return applyPatches(ctx, s.vendor) }),
		pipeline.StepFunc("check bindings", checkBindings),
		pipeline.StepFunc("stamp version", stampVersion),
		pipeline.StepFunc("check python build backend", checkBackend),
		pipeline.StepFunc("build wheel", buildWheel),
		pipeline.StepFunc("check wheel", checkWheel),
		pipeline.StepFunc("write artifacts", writeWheelArtifacts),
	}
}

// BuildWheel runs the wheel plan in the work directory and writes the wheel, checked against
// the target, as artifacts under out.
func (w *WheelExecutor) BuildWheel(ctx context.Context, wp *pipeline.WheelPlan, out string) (string, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	opts := w.ex.opts
	root := filepath.Join(opts.WorkDir, "wheel-"+wp.Plan.Target+"-"+wp.ShortHash())
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	held, unlock, err := lock(root + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	for _, d := range []string{"src", "build", "logs", "dist", "patches"} {
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			return "", err
		}
	}
	src := filepath.Join(root, "src")
	pkgOpts := opts
	pkgOpts.Source = w.pkg
	// The package's plan has no vendor, so prepareSource checks out the package's own commit.
	pkgPlan := *wp.Plan
	pkgPlan.Vendor = nil
	s := &wheelState{
		plan:   wp,
		pkg:    &state{plan: &pkgPlan, opts: pkgOpts, out: out, root: root, src: src, build: filepath.Join(root, "build"), logs: filepath.Join(root, "logs"), held: held},
		vendor: &state{plan: wp.Plan, opts: opts, out: out, root: root, src: filepath.Join(src, filepath.FromSlash(wp.VendorDir)), logs: filepath.Join(root, "logs", "llama.cpp"), held: held},
		dist:   filepath.Join(root, "dist"),
	}
	for _, d := range []string{s.pkg.logs, s.vendor.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	log := opts.Logger.With("target", wp.Plan.Target, "plan", wp.ShortHash())
	log.Info("building wheel", "executor", "host", "work", root)
	if err := pipeline.RunSteps(ctx, pipeline.LoggedAll(log, wheelSteps()), s); err != nil {
		return "", fmt.Errorf("target %s: wheel: %w", wp.Plan.Target, err)
	}
	return s.artifact, nil
}

func checkWheelTools(ctx context.Context, s *wheelState) error {
	// The server's tool check covers cmake, ninja, git, compilers, CUDA and oneAPI, and sets
	// the environment; the package's configure arguments are the plan's, so it applies as is.
	if err := checkTools(ctx, s.pkg); err != nil {
		return err
	}
	py := s.plan.Interpreter()
	path, err := exec.LookPath(py)
	if err != nil {
		found, _ := filepath.Glob("/usr/bin/python3.*")
		var have []string
		for _, f := range found {
			if b := filepath.Base(f); regexp.MustCompile(`^python3\.\d+$`).MatchString(b) {
				have = append(have, b)
			}
		}
		hint := "none in /usr/bin"
		if len(have) > 0 {
			hint = strings.Join(have, ", ")
		}
		return fmt.Errorf("%w: %s (the plan builds with Python %s) is not on PATH; this machine has %s: pass --python with one of them, or install it", errMissingTools, py, pythonOf(s.plan), hint)
	}
	s.python = path
	s.vendor.env, s.vendor.cfgArgs = s.pkg.env, s.pkg.cfgArgs
	return nil
}

func pythonOf(wp *pipeline.WheelPlan) string {
	if wp.Python == "" {
		return "3"
	}
	return wp.Python
}

func preparePackage(ctx context.Context, s *wheelState) error {
	if err := prepareSource(ctx, s.pkg); err != nil {
		return fmt.Errorf("llama-cpp-python: %w", err)
	}
	return nil
}

// prepareVendor replaces the package's vendor/llama.cpp (a submodule, empty in a clone) with
// the plan's llama.cpp commit: the server recipe's source, so wheel and server share it.
func prepareVendor(ctx context.Context, s *wheelState) error {
	if err := os.RemoveAll(s.vendor.src); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.vendor.src), 0o755); err != nil {
		return err
	}
	if err := prepareSource(ctx, s.vendor); err != nil {
		return fmt.Errorf("llama.cpp: %w", err)
	}
	return nil
}

func checkBindings(_ context.Context, s *wheelState) error {
	missing := map[string][]string{}
	for _, b := range s.plan.Bindings {
		py, err := os.ReadFile(filepath.Join(s.pkg.src, filepath.FromSlash(b.File)))
		if errors.Is(err, os.ErrNotExist) {
			continue // an older package without this binding
		}
		if err != nil {
			return err
		}
		var headers []string
		for _, h := range b.Headers {
			data, err := os.ReadFile(filepath.Join(s.vendor.src, filepath.FromSlash(h)))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			headers = append(headers, string(data))
		}
		bound := pipeline.BoundFunctions(string(py))
		if len(bound) == 0 {
			continue
		}
		if len(headers) == 0 {
			missing[b.File] = []string{"(none of " + strings.Join(b.Headers, ", ") + " exists in the vendored llama.cpp)"}
			continue
		}
		if m := pipeline.MissingFunctions(bound, headers...); len(m) > 0 {
			missing[b.File] = m
		}
	}
	if len(missing) > 0 {
		v := s.plan.Plan.Source.Commit
		if s.plan.Plan.Vendor != nil {
			v = s.plan.Plan.Vendor.Commit
		}
		return &pipeline.BindingError{Package: s.plan.Plan.Source.Commit, Vendor: v, Missing: missing}
	}
	return nil
}

func stampVersion(_ context.Context, s *wheelState) error {
	f := filepath.Join(s.pkg.src, filepath.FromSlash(s.plan.VersionFile))
	b, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("reading the version file: %w", err)
	}
	out, version, err := pipeline.StampVersion(string(b), s.plan.LocalVersion)
	if err != nil {
		return fmt.Errorf("%s: %w", s.plan.VersionFile, err)
	}
	s.version = version
	return os.WriteFile(f, []byte(out), 0o644)
}

var buildBackend = regexp.MustCompile(`(?m)^\s*build-backend\s*=\s*["']([\w.:]+)["']`)

// checkBackend makes sure the interpreter can import python-build and the package's build
// backend: the build runs without isolation, as nothing may be fetched from an index.
func checkBackend(ctx context.Context, s *wheelState) error {
	pp, err := os.ReadFile(filepath.Join(s.pkg.src, "pyproject.toml"))
	if err != nil {
		return fmt.Errorf("reading pyproject.toml: %w", err)
	}
	mods := []string{"build"}
	if m := buildBackend.FindSubmatch(pp); m != nil {
		mod, _, _ := strings.Cut(string(m[1]), ":")
		mods = append(mods, mod)
	}
	for _, mod := range mods {
		c := command{dir: s.pkg.src, env: s.pkg.env, args: []string{s.python, "-c", "import " + mod}}
		if out, err := c.output(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %s cannot import %s (%s): install it for that interpreter (Debian: %s), or put it on PYTHONPATH; the build runs with --no-isolation and fetches nothing", errMissingTools, filepath.Base(s.python), mod, lastLine(out), debianPackage(mod))
		}
	}
	return nil
}

func debianPackage(mod string) string {
	top, _, _ := strings.Cut(mod, ".")
	return "python3-" + strings.ReplaceAll(top, "_", "-")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func buildWheel(ctx context.Context, s *wheelState) error {
	env := append([]string(nil), s.pkg.env...)
	for k, v := range s.plan.Env {
		env = append(env, k+"="+pipeline.Expand(v, s.pkg.src, s.pkg.cuda))
	}
	args := s.plan.CMakeArgs
	if _, err := exec.LookPath("ccache"); err != nil {
		var kept []string
		for _, a := range args {
			if !strings.HasSuffix(a, "_COMPILER_LAUNCHER=ccache") {
				kept = append(kept, a)
			}
		}
		args = kept
	}
	cp := *s.plan
	cp.CMakeArgs = args
	env = append(env,
		"CMAKE_ARGS="+pipeline.Expand(cp.CMakeArgsEnv(s.pkg.src), s.pkg.src, s.pkg.cuda),
		// scikit-build-core's build directory, inside the work directory and kept for ccache
		// and for reading after a failure.
		"SKBUILD_BUILD_DIR="+s.pkg.build,
	)
	if s.pkg.opts.Jobs > 0 {
		env = append(env, fmt.Sprintf("CMAKE_BUILD_PARALLEL_LEVEL=%d", s.pkg.opts.Jobs))
	}
	args = []string{s.python, "-m", "build", "--wheel", "--no-isolation", "--outdir", s.dist, s.pkg.src}
	if s.plan.Plan.EnvScript != "" {
		args = append([]string{"bash", "-c", `. "$0" >/dev/null && exec "$@"`, s.plan.Plan.EnvScript}, args...)
	}
	c := command{dir: s.pkg.src, env: env, log: s.pkg.logPath("wheel"), args: args, hold: s.pkg.held}
	if err := c.run(ctx); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) {
			return fmt.Errorf("%s%w", buildFailureHint(ce.Log, s.plan), err)
		}
		return err
	}
	whls, _ := filepath.Glob(filepath.Join(s.dist, "*.whl"))
	if len(whls) != 1 {
		return fmt.Errorf("the build left %d wheels in %s, want 1", len(whls), s.dist)
	}
	s.wheelFile = whls[0]
	return nil
}

var compileError = regexp.MustCompile(`(?m)^(\S+\.(?:c|cc|cpp|cu|h|hpp)):\d+:\d+: (?:fatal )?error: .*$`)

// buildFailureHint says what a failed build most likely means: compile errors in the
// package's own code or where it meets llama.cpp's API mean the pinned llama-cpp-python was
// made for another llama.cpp.
func buildFailureHint(logFile string, wp *pipeline.WheelPlan) string {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return ""
	}
	log := string(b)
	switch {
	case strings.Contains(log, "Missing dependencies") || strings.Contains(log, "ERROR Missing dependencies"):
		return "the Python build dependencies named in pyproject.toml are not installed for this interpreter: "
	case strings.Contains(log, "CMake Error"):
		if m := regexp.MustCompile(`(?m)^CMake Error at ([^\n]*)`).FindStringSubmatch(log); m != nil && strings.Contains(m[1], wp.VendorDir) {
			return "configuring the vendored llama.cpp failed (" + strings.TrimSpace(m[1]) + "): "
		}
		return "CMake could not configure the package against the vendored llama.cpp; if the error is in the package's CMakeLists.txt, the pinned llama-cpp-python expects another llama.cpp: "
	}
	if m := compileError.FindString(log); m != "" {
		return fmt.Sprintf("compiling failed (%s); if this is code that calls llama.cpp, the pinned llama-cpp-python %s does not match the vendored llama.cpp: ", strings.TrimSpace(m), short(wp.Plan.Source.Commit))
	}
	return ""
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func checkWheel(_ context.Context, s *wheelState) error {
	f, err := os.Open(s.wheelFile)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	res, err := wheel.Check(f, fi.Size(), s.wheelFile, wheel.Expect{
		Version:           s.version,
		Host:              s.plan.Host,
		HostName:          s.plan.Plan.Target,
		CUDAArchitectures: s.plan.CUDAArchitectures,
	})
	if err != nil {
		return err
	}
	for _, v := range res.Report.Verdicts {
		s.pkg.opts.Logger.Info("preflight", "check", v.Check, "subject", v.Subject, "status", string(v.Status), "reason", v.Reason)
	}
	s.result = res
	return res.Err()
}

func writeWheelArtifacts(_ context.Context, s *wheelState) error {
	var opts []pipeline.ProvenanceOption
	if s.pkg.sourceTree != "" {
		opts = append(opts, pipeline.WithUnverifiedPackage(s.pkg.sourceTree))
	}
	if s.vendor.sourceTree != "" {
		opts = append(opts, pipeline.WithUnverifiedSource(s.plan.Plan, s.vendor.sourceTree))
	}
	if s.pkg.cuda != nil {
		opts = append(opts, pipeline.WithCUDAToolchain(s.pkg.cuda))
	}
	prov := pipeline.ProvenanceOf(s.plan.Plan, s.pkg.opts.Builder, opts...)
	prov.Plan = s.plan.JSON()
	dir, err := artifacts.Write(s.pkg.out, artifacts.Input{
		Target:     s.plan.Plan.Target,
		PlanHash:   s.plan.Hash,
		Series:     s.plan.Plan.Series,
		Files:      []artifacts.InputFile{{Path: filepath.Base(s.wheelFile), From: s.wheelFile, Kind: artifacts.KindWheel}},
		Provenance: prov,
	})
	if err != nil {
		return err
	}
	s.artifact = dir
	return nil
}
