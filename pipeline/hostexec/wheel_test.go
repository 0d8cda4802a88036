package hostexec

import (
	"archive/zip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/pybuild"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
	"github.com/llbuild/llbuild/targets"
)

// fakeWheel is the llama-cpp-python-shaped test package.
func fakeWheel() string { return filepath.Join(fixture.Dir(), "fakewheel") }

var wheelSeries = []string{"0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch"}

// wheelPlan resolves the built-in wheel recipe for tg, pointed at the fake package, with
// fakellama as the vendored llama.cpp.
func wheelPlan(t testing.TB, tg *targets.Target, python string) (*pipeline.WheelPlan, []patches.Patch) {
	t.Helper()
	series := fixture.Patches(t, wheelSeries...)
	return fixture.WheelPlan(t, tg, series, python), series
}

// needWheelTools skips (fails in CI) without the compilers and Python build tools, and puts
// python-build and scikit-build-core from Debian on PYTHONPATH.
func needWheelTools(t testing.TB) string {
	t.Helper()
	fixture.NeedTools(t, "cmake", "ninja", "g++", "gcc", "git", "objdump")
	t.Setenv("PYTHONPATH", pybuild.Need(t))
	return pybuild.Python(t)
}

func buildWheelIn(t testing.TB, e env, pkg string, wp *pipeline.WheelPlan, series []patches.Patch) (string, error) {
	t.Helper()
	ex, err := NewWheel(WheelOptions{
		Options: Options{Source: fixture.Source(), WorkDir: e.work, CacheDir: e.cache, Series: series, Builder: pipeline.Builder{Version: "test"}},
		Package: pkg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ex.BuildWheel(context.Background(), wp, e.out)
}

func cpuTarget(t testing.TB, name string) *targets.Target {
	t.Helper()
	tg, err := targets.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestWheelBuildsForCPUTarget(t *testing.T) {
	py := needWheelTools(t)
	wp, series := wheelPlan(t, cpuTarget(t, "cpu-v3"), py)
	e := newEnv(t)
	dir, err := buildWheelIn(t, e, fakeWheel(), wp, series)
	if err != nil {
		t.Fatalf("BuildWheel() = %v", err)
	}
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Manifest.Files) != 1 || a.Manifest.Files[0].Kind != artifacts.KindWheel {
		t.Fatalf("artifacts = %+v, want one wheel", a.Manifest.Files)
	}
	name := a.Manifest.Files[0].Path
	if want := "llama_cpp_python-0.3.99+cpu.avx2-py3-none-linux_x86_64.whl"; name != want {
		t.Errorf("wheel = %s, want %s", name, want)
	}
	if a.Manifest.PlanHash != wp.Hash {
		t.Errorf("planHash = %s, want the wheel plan's %s", a.Manifest.PlanHash, wp.Hash)
	}
	prov, err := os.ReadFile(filepath.Join(dir, artifacts.ProvenanceFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"vendor"`, wp.Plan.Vendor.Commit, `"localVersion": "cpu.avx2"`, "0002-ggml-cpu-build-info.patch"} {
		if !strings.Contains(string(prov), want) {
			t.Errorf("provenance.json lacks %s", want)
		}
	}
	// both sources are plain directories here: neither commit was checked, both are hashed
	src, vendor := a.Provenance.Materials.Source, a.Provenance.Materials.Vendor
	if !src.Unverified || src.Tree == "" || vendor == nil || !vendor.Unverified || vendor.Tree == "" || src.Tree == vendor.Tree {
		t.Errorf("provenance sources = %+v, vendor %+v; want both unverified with their own tree hashes", src, vendor)
	}
	whl := filepath.Join(dir, name)

	// The libraries are AVX2 code without AVX-512 and name no build path.
	lib := t.TempDir()
	z, err := zip.OpenReader(whl)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	var libs []string
	seen := map[uint32]string{} // CRC-32 of each library's contents
	for _, f := range z.File {
		if strings.HasSuffix(f.Name, ".so") || strings.Contains(f.Name, ".so.") {
			libs = append(libs, f.Name)
			if other, ok := seen[f.CRC32]; ok {
				t.Errorf("wheel holds the same library twice: %s and %s", other, f.Name)
			}
			seen[f.CRC32] = f.Name
		}
		if strings.Contains(f.Name, "libcuda") {
			t.Errorf("wheel contains %s", f.Name)
		}
		// Everything inside the package: nothing in site-packages' lib/ or include/.
		if top, _, _ := strings.Cut(f.Name, "/"); top != "llama_cpp" && !strings.HasSuffix(top, ".dist-info") {
			t.Errorf("wheel installs %s outside the package", f.Name)
		}
		// Nothing the package does not load: headers, CMake/pkg-config files, llama-common.
		for _, out := range []string{"/include/", "/cmake/", "/pkgconfig/", "libllama-common"} {
			if strings.Contains(f.Name, out) {
				t.Errorf("wheel holds %s", f.Name)
			}
		}
	}
	if !slices.Contains(libs, "llama_cpp/lib/libllama.so") {
		t.Errorf("wheel libraries %v lack llama_cpp/lib/libllama.so", libs)
	}
	if err := unzipTo(whl, lib); err != nil {
		t.Fatal(err)
	}
	cpu := filepath.Join(lib, "llama_cpp", "lib", "libggml-cpu.so")
	if n := countInsns(t, cpu, "zmm"); n != 0 {
		t.Errorf("libggml-cpu.so has %d zmm operands, want 0 for an AVX2 target", n)
	}
	if n := countInsns(t, cpu, "ymm"); n == 0 {
		t.Errorf("libggml-cpu.so has no ymm operands: the AVX2 flags did not reach the compiler")
	}
	for _, l := range libs {
		b, _ := os.ReadFile(filepath.Join(lib, l))
		if strings.Contains(string(b), e.work) {
			t.Errorf("%s contains the work directory %s", l, e.work)
		}
	}

	// pip installs it, and the package loads its libraries through RUNPATH $ORIGIN.
	target := t.TempDir()
	pip := exec.Command("/usr/bin/python3", "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", "--target", target, whl)
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	run := exec.Command("/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import llama_cpp as l; print(l.__version__); print(l.llama_dot(8)); print(l.llama_print_system_info().decode())", target)
	run.Env = append(os.Environ(), "LD_LIBRARY_PATH=")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("importing the installed wheel: %v\n%s", err, out)
	}
	for _, want := range []string{"0.3.99+cpu.avx2\n", "16.0\n", "GGML_AVX2=ON", "GGML_AVX512=OFF", "GGML_NATIVE=OFF", "patched: 0002"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("installed package printed %q, want %q in it", out, want)
		}
	}
}

func unzipTo(whl, dir string) error {
	cmd := exec.Command("/usr/bin/python3", "-m", "zipfile", "-e", whl, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.New(string(out))
	}
	return nil
}

func TestWheelBuildIsReproducible(t *testing.T) {
	py := needWheelTools(t)
	wp, series := wheelPlan(t, cpuTarget(t, "cpu-v3"), py)
	var sums []string
	for i := 0; i < 2; i++ {
		dir, err := buildWheelIn(t, newEnv(t), fakeWheel(), wp, series)
		if err != nil {
			t.Fatalf("BuildWheel() #%d = %v", i+1, err)
		}
		a, err := artifacts.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, a.Manifest.Files[0].SHA256)
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds in two work directories gave wheels %s and %s, want one digest", sums[0], sums[1])
	}
}

func TestWheelRefusals(t *testing.T) {
	py := needWheelTools(t)

	// A wheel built with AVX-512 for a host without it: the plan's ISA says AVX-512 but the
	// target host is cpu-v3's, as when a target file is edited by hand.
	avx512 := cpuTarget(t, "cpu-v3")
	avx512.Name = "cpu-v3-avx512"
	for _, o := range []string{"GGML_AVX512", "GGML_AVX512_VNNI"} {
		avx512.Build.ISA[o] = true
	}

	// A package that binds a function the vendored llama.cpp does not have.
	stale := t.TempDir()
	if err := copyTree(context.Background(), fakeWheel(), stale); err != nil {
		t.Fatal(err)
	}
	binding := filepath.Join(stale, "llama_cpp", "llama_cpp.py")
	b, _ := os.ReadFile(binding)
	b = append(b, "\n\n@ctypes_function(\"llama_kv_self_clear\", [], None)\ndef llama_kv_self_clear():\n    ...\n"...)
	if err := os.WriteFile(binding, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// A package whose own C++ calls a llama.cpp function the vendored llama.h does not declare:
	// the bindings match, the compile does not.
	uncompilable := t.TempDir()
	if err := copyTree(context.Background(), fakeWheel(), uncompilable); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(uncompilable, "shim", "shim_cpp.cpp")
	b, _ = os.ReadFile(shim)
	b = append(b, "\nextern \"C\" void fake_clear(void) { llama_kv_cache_clear(nullptr); }\n"...)
	if err := os.WriteFile(shim, b, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		target *targets.Target
		python string
		pkg    string
		want   []string
		check  func(t *testing.T, err error)
	}{
		{
			name: "an AVX-512 wheel is refused for a host without AVX-512", target: avx512, python: py, pkg: fakeWheel(),
			want: []string{"would not run on cpu-v3-avx512", "libggml-cpu.so", "AVX512", "SIGILL"},
		},
		{
			name: "a Python the build machine lacks is named", target: cpuTarget(t, "cpu-v3"), python: "3.99", pkg: fakeWheel(),
			want: []string{"python3.99", "is not on PATH", "--python"},
		},
		{
			name: "a package whose code does not compile against the vendored llama.cpp is named", target: cpuTarget(t, "cpu-v3"), python: py, pkg: uncompilable,
			want: []string{"compiling failed", "shim/shim_cpp.cpp", "llama_kv_cache_clear", "does not match the vendored llama.cpp", "full log:"},
		},
		{
			name: "a package binding functions the vendored llama.cpp lacks is refused", target: cpuTarget(t, "cpu-v3"), python: py, pkg: stale,
			want: []string{"cannot be built against llama.cpp", "llama_kv_self_clear", "llama_cpp/llama_cpp.py"},
			check: func(t *testing.T, err error) {
				var be *pipeline.BindingError
				if !errors.As(err, &be) {
					t.Errorf("error is %T, want a *pipeline.BindingError", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wp, series := wheelPlan(t, tt.target, tt.python)
			e := newEnv(t)
			_, err := buildWheelIn(t, e, tt.pkg, wp, series)
			if err == nil {
				t.Fatal("BuildWheel() = nil error, want a refusal")
			}
			t.Logf("refusal: %v", err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("BuildWheel() = %v\nwant %q in it", err, w)
				}
			}
			if tt.check != nil {
				tt.check(t, err)
			}
			if _, err := os.Stat(e.out); err == nil {
				ents, _ := os.ReadDir(filepath.Join(e.out, wp.Plan.Target))
				if len(ents) > 0 {
					t.Errorf("a refused build left %d entries under %s", len(ents), e.out)
				}
			}
		})
	}
}

func TestWheelNeedsBothSources(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts WheelOptions
		want string
	}{
		{"no package source", WheelOptions{Options: Options{Source: fixture.Source()}}, "llama-cpp-python source"},
		{"no llama.cpp source", WheelOptions{Package: fakeWheel()}, "--llama-source"},
		{"a package source that is not a directory", WheelOptions{Options: Options{Source: fixture.Source()}, Package: filepath.Join(fakeWheel(), "pyproject.toml")}, "not a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewWheel(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewWheel() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
