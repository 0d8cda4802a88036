package daggerexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"dagger.io/dagger"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/wheel"
)

// Paths of a wheel build inside the container.
const (
	distDir = "/dist"
	// pyVenv is the venv the wheel is built with: python-build and scikit-build-core, the
	// devel image's own or installed into it with the plan's interpreter.
	pyVenv = "/opt/llbuild-python"
)

// PythonBuildTools are the build frontend and backend wheels are built with: the devel image's
// own when it carries exactly these versions, else pip-installed. Pinned to the versions
// llbuild's tests build the fake package with (Debian sid's).
var PythonBuildTools = []string{"build==1.5.1", "scikit-build-core==0.12.2"}

// WheelOptions configure a Dagger build of the llama-cpp-python wheel.
type WheelOptions struct {
	// Options.Source overrides where the vendored llama.cpp comes from.
	Options
	// Package overrides where llama-cpp-python comes from: a local plain directory or git
	// repository/mirror. Empty: the engine fetches the plan's URL at the plan's commit.
	Package string
	// Jobs is the compile's parallelism inside the container (CMAKE_BUILD_PARALLEL_LEVEL);
	// 0 leaves ninja's default. It is part of the build step's cache key, like any variable.
	Jobs int
}

// WheelExecutor builds wheel plans on a Dagger engine.
type WheelExecutor struct {
	ex   *Executor
	pkg  string
	jobs int
}

var _ pipeline.WheelExecutor = (*WheelExecutor)(nil)

// NewWheel returns a Dagger executor for wheels; like New it fails fast without an engine.
func NewWheel(opts WheelOptions) (*WheelExecutor, error) {
	ex, err := New(opts.Options)
	if err != nil {
		return nil, err
	}
	if opts.Jobs < 0 {
		return nil, fmt.Errorf("wheel build jobs %d: give a number of jobs, or 0 for the default", opts.Jobs)
	}
	w := &WheelExecutor{ex: ex, jobs: opts.Jobs}
	if opts.Package != "" {
		abs, err := filepath.Abs(opts.Package)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("llama-cpp-python source %s is not a directory", opts.Package)
		}
		w.pkg = abs
	}
	return w, nil
}

// Close ends the engine session.
func (w *WheelExecutor) Close() error { return w.ex.Close() }

type wheelState struct {
	*state
	wp        *pipeline.WheelPlan
	pkg       string
	jobs      int
	python    string
	version   string
	wheelFile string
	// pkgTree is the content hash of a plain-directory llama-cpp-python source.
	pkgTree string
}

func (s *wheelState) vendorDir() string { return path.Join(srcDir, s.wp.VendorDir) }

func wheelSteps() []pipeline.Step[*wheelState] {
	return []pipeline.Step[*wheelState]{
		pipeline.StepFunc("devel image", func(ctx context.Context, s *wheelState) error { return develImage(ctx, s.state) }),
		pipeline.StepFunc("apt packages", func(ctx context.Context, s *wheelState) error { return aptPackages(ctx, s.state) }),
		pipeline.StepFunc("cuda toolkit", func(ctx context.Context, s *wheelState) error { return cudaToolkit(ctx, s.state) }),
		pipeline.StepFunc("environment", func(ctx context.Context, s *wheelState) error { return environment(ctx, s.state) }),
		pipeline.StepFunc("python build tools", pythonTools),
		pipeline.StepFunc("sources", wheelSources),
		pipeline.StepFunc("patches", wheelPatches),
		pipeline.StepFunc("check bindings", wheelBindings),
		pipeline.StepFunc("stamp version", wheelVersion),
		pipeline.StepFunc("build wheel", wheelBuild),
		pipeline.StepFunc("export", wheelExport),
		pipeline.StepFunc("check wheel", wheelCheck),
		pipeline.StepFunc("write artifacts", wheelArtifacts),
	}
}

// BuildWheel defines the wheel build on the engine, runs it, exports the wheel, checks it
// against the target and writes it as artifacts under out.
func (w *WheelExecutor) BuildWheel(ctx context.Context, wp *pipeline.WheelPlan, out string) (string, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	c, err := w.ex.connect(ctx)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	exportDir := filepath.Join(out, ".export-wheel-"+wp.Plan.Target+"-"+wp.ShortHash())
	if err := os.RemoveAll(exportDir); err != nil {
		return "", err
	}
	if err := os.Mkdir(exportDir, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(exportDir)
	defer os.Remove(exportDir + "-devel.tar")
	s := &wheelState{
		state: &state{plan: wp.Plan, opts: w.ex.opts, dag: c, export: exportDir, out: out, patchExecs: map[string]string{}},
		wp:    wp,
		pkg:   w.pkg,
		jobs:  w.jobs,
	}
	log := w.ex.opts.Logger.With("target", wp.Plan.Target, "plan", wp.ShortHash())
	log.Info("building wheel", "executor", "dagger", "engine", w.ex.opts.Engine)
	if err := pipeline.RunSteps(ctx, logged(log, wheelSteps()), s); err != nil {
		return "", fmt.Errorf("target %s: wheel: %w", wp.Plan.Target, err)
	}
	return s.artifact, nil
}

// pythonTools gives the build a Python with the pinned build tools at pyVenv. A devel image
// that already carries them for the plan's interpreter (Debian's python3-build and
// python3-scikit-build-core, or a pip install baked in) is used as is, through a venv that sees
// its packages: nothing is downloaded, which is the only way an engine without PyPI (an
// air-gapped one, or CI's) can build wheels. Otherwise the tools are pip-installed into a
// fresh venv; when that fails too, the error says what to do. The interpreter's absence fails
// here with the image named.
//
// The image's tools must be exactly the pinned versions, not merely new enough: the backend
// writes itself into the wheel (WHEEL's Generator) and shapes its layout, so accepting whatever
// the image has would let one plan give different wheels on different devel images, and
// PythonBuildTools would no longer say what built them. Debian sid's versions are
// the pins today (internal/pybuild extracts them for the tests); when sid moves, the engine
// wheel test fails naming both versions, and the pins move with it.
func pythonTools(_ context.Context, s *wheelState) error {
	py := s.wp.Interpreter()
	pins := strings.Join(PythonBuildTools, " ")
	script := fmt.Sprintf(`command -v %[1]s >/dev/null || { echo "the devel image %[2]s has no %[1]s: pass --python with a version it has" >&2; exit 3; }
if %[1]s -c "$1" %[4]s; then exec %[1]s -m venv --system-site-packages --without-pip %[3]s; fi
%[1]s -m venv %[3]s && %[3]s/bin/python -m pip install --no-cache-dir --disable-pip-version-check -q %[4]s && exit 0
echo "no python build tools: the devel image %[2]s does not carry %[4]s for %[1]s, and installing them from the package index failed; use a devel image that has them (pip install %[4]s into it, or Debian's python3-build and python3-scikit-build-core at those versions), or let the engine reach a package index (PIP_INDEX_URL for a mirror)" >&2
exit 4`, py, s.plan.Images.Devel.Ref, pyVenv, pins)
	s.ctr = s.ctr.WithExec([]string{"sh", "-c", script, "llbuild-python-tools", probeTools})
	s.python = pyVenv + "/bin/python"
	return nil
}

// probeTools exits 0 when the interpreter imports every tool named in its arguments
// ("name==version") at exactly that version, and says on stderr which it found either way: the
// engine's log then records the versions the wheel was built with.
const probeTools = `import importlib, importlib.metadata as md, sys
pins = dict(a.split("==") for a in sys.argv[1:])
found = {}
for name in pins:
    try:
        found[name] = md.version(name)
    except md.PackageNotFoundError:
        found[name] = None
bad = [n + " " + (found[n] or "missing") + " (pinned: " + pins[n] + ")" for n in pins if found[n] != pins[n]]
if bad:
    sys.exit("llbuild: the devel image has " + ", ".join(bad) + "; installing the pinned tools into a venv")
for n in pins:
    importlib.import_module(n.replace("-", "_"))
print("llbuild: using the python build tools of the devel image: " + ", ".join(n + " " + found[n] for n in pins), file=sys.stderr)
`

// wheelSources puts llama-cpp-python at /src and the plan's llama.cpp at /src/vendor/llama.cpp.
func wheelSources(ctx context.Context, s *wheelState) error {
	p := s.plan
	pkg, pkgTree, err := s.sourceTreeOf(ctx, s.pkg, p.Source)
	if err != nil {
		return err
	}
	if p.Vendor == nil {
		return errors.New("the wheel plan has no vendored llama.cpp")
	}
	llama, llamaTree, err := s.sourceTreeOf(ctx, s.opts.Source, *p.Vendor)
	if err != nil {
		return err
	}
	// provenance records a plain directory as unverified, by its tree hash
	s.pkgTree, s.sourceTree = pkgTree, llamaTree
	s.ctr = s.ctr.
		WithDirectory(srcDir, pkg).
		WithoutDirectory(s.vendorDir()).
		WithDirectory(s.vendorDir(), llama).
		WithWorkdir(srcDir)
	return nil
}

func wheelPatches(ctx context.Context, s *wheelState) error {
	s.ctr = s.ctr.WithWorkdir(s.vendorDir())
	if err := applyPatches(ctx, s.state); err != nil {
		return err
	}
	s.ctr = s.ctr.WithWorkdir(srcDir)
	return nil
}

// readFile returns a file of the container, or ok false when it does not exist.
func (s *wheelState) readFile(ctx context.Context, p string) (string, bool, error) {
	ok, err := s.ctr.Exists(ctx, p)
	if err != nil {
		return "", false, s.engineError(err)
	}
	if !ok {
		return "", false, nil
	}
	c, err := s.ctr.File(p).Contents(ctx)
	if err != nil {
		return "", false, s.engineError(err)
	}
	return c, true, nil
}

func wheelBindings(ctx context.Context, s *wheelState) error {
	missing := map[string][]string{}
	for _, b := range s.wp.Bindings {
		py, ok, err := s.readFile(ctx, path.Join(srcDir, b.File))
		if err != nil {
			return err
		}
		bound := pipeline.BoundFunctions(py)
		if !ok || len(bound) == 0 {
			continue
		}
		var headers []string
		for _, h := range b.Headers {
			c, ok, err := s.readFile(ctx, path.Join(s.vendorDir(), h))
			if err != nil {
				return err
			}
			if ok {
				headers = append(headers, c)
			}
		}
		if len(headers) == 0 {
			missing[b.File] = []string{"(none of " + strings.Join(b.Headers, ", ") + " exists in the vendored llama.cpp)"}
		} else if m := pipeline.MissingFunctions(bound, headers...); len(m) > 0 {
			missing[b.File] = m
		}
	}
	if len(missing) > 0 {
		return &pipeline.BindingError{Package: s.plan.Source.Commit, Vendor: s.plan.Vendor.Commit, Missing: missing}
	}
	return nil
}

func wheelVersion(ctx context.Context, s *wheelState) error {
	f := path.Join(srcDir, s.wp.VersionFile)
	src, ok, err := s.readFile(ctx, f)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the package has no %s to stamp the local version label into", s.wp.VersionFile)
	}
	out, version, err := pipeline.StampVersion(src, s.wp.LocalVersion)
	if err != nil {
		return fmt.Errorf("%s: %w", s.wp.VersionFile, err)
	}
	s.version = version
	s.ctr = s.ctr.WithNewFile(f, out)
	return nil
}

func wheelBuild(_ context.Context, s *wheelState) error {
	ctr := s.ctr
	for _, kv := range pipeline.SortedEnv(s.wp.Env) {
		k, v, _ := strings.Cut(kv, "=")
		ctr = ctr.WithEnvVariable(k, s.expand(v))
	}
	if s.jobs > 0 {
		ctr = ctr.WithEnvVariable("CMAKE_BUILD_PARALLEL_LEVEL", fmt.Sprint(s.jobs))
	}
	args := []string{s.python, "-m", "build", "--wheel", "--no-isolation", "--outdir", distDir, srcDir}
	s.ctr = ctr.
		WithEnvVariable("CMAKE_ARGS", s.expand(s.wp.CMakeArgsEnv(srcDir))).
		WithEnvVariable("SKBUILD_BUILD_DIR", buildDir).
		WithMountedCache(ccacheDir, s.dag.CacheVolume("llbuild-ccache"), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeShared}).
		WithExec(withEnvScript(s.plan, args))
	return nil
}

func wheelExport(ctx context.Context, s *wheelState) error {
	if _, err := s.ctr.Directory(distDir).Export(ctx, s.export); err != nil {
		return s.engineError(err)
	}
	whls, _ := filepath.Glob(filepath.Join(s.export, "*.whl"))
	if len(whls) != 1 {
		return fmt.Errorf("the build left %d wheels in %s, want 1", len(whls), distDir)
	}
	s.wheelFile = whls[0]
	return nil
}

func wheelCheck(_ context.Context, s *wheelState) error {
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
		Version: s.version, Host: s.wp.Host, HostName: s.plan.Target, CUDAArchitectures: s.wp.CUDAArchitectures,
	})
	if err != nil {
		return err
	}
	return res.Err()
}

func wheelArtifacts(_ context.Context, s *wheelState) error {
	opts := s.provenance()
	if s.pkgTree != "" {
		opts = append(opts, pipeline.WithUnverifiedPackage(s.pkgTree))
	}
	prov := pipeline.ProvenanceOf(s.plan, s.opts.Builder, opts...)
	prov.Plan = s.wp.JSON()
	dir, err := artifacts.Write(s.out, artifacts.Input{
		Target:     s.plan.Target,
		PlanHash:   s.wp.Hash,
		Series:     s.plan.Series,
		Files:      []artifacts.InputFile{{Path: filepath.Base(s.wheelFile), From: s.wheelFile, Kind: artifacts.KindWheel}},
		Provenance: prov,
	})
	if err != nil {
		return err
	}
	s.artifact = dir
	return nil
}
