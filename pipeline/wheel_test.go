package pipeline

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

func loadWheelInputs(t *testing.T) (*recipes.Recipe, *recipes.Recipe, []patches.Patch) {
	t.Helper()
	r, err := recipes.Load("wheel")
	if err != nil {
		t.Fatal(err)
	}
	v, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	series, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	return r, v, series
}

func resolveWheel(t *testing.T, target string, opts WheelOptions) *WheelPlan {
	t.Helper()
	tg, err := targets.Load(target)
	if err != nil {
		t.Fatal(err)
	}
	r, v, series := loadWheelInputs(t)
	opts.AllowFloating = true
	w, err := ResolveWheel(tg, r, series, v, opts)
	if err != nil {
		t.Fatalf("ResolveWheel(%s) = %v", target, err)
	}
	return w
}

// pep440Local is a normalized PEP 440 local version label.
var pep440Local = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9]+)*$`)

func TestWheelLocalVersionSaysWhatItIsFor(t *testing.T) {
	tests := []struct {
		target, label, variant string
		archs                  []string
	}{
		{"cpu-v3", "cpu.avx2", "cpu", nil},
		{"rtx3090", "cu131.sm86.avx2", "cu131", []string{"86"}},
		{"h200", "cu130.sm90.avx2", "cu130", []string{"90"}},
		{"olares-one", "cu131.sm120a.avx2.vnni", "cu131", []string{"120a"}},
		{"b70", "sycl.bmgg31.avx2", "sycl", nil},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			w := resolveWheel(t, tt.target, WheelOptions{})
			if w.LocalVersion != tt.label || w.Variant != tt.variant {
				t.Errorf("label, variant = %s, %s; want %s, %s", w.LocalVersion, w.Variant, tt.label, tt.variant)
			}
			if !pep440Local.MatchString(w.LocalVersion) {
				t.Errorf("label %q is not a normalized PEP 440 local version", w.LocalVersion)
			}
			if !reflect.DeepEqual(w.CUDAArchitectures, tt.archs) {
				t.Errorf("CUDAArchitectures = %v, want %v", w.CUDAArchitectures, tt.archs)
			}
		})
	}
}

func TestWheelCMakeArgs(t *testing.T) {
	w := resolveWheel(t, "rtx3090", WheelOptions{})
	args := strings.Join(w.CMakeArgs, " ")
	for _, want := range []string{"-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_AVX512=OFF", "-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=86", "-DCMAKE_SHARED_LINKER_FLAGS=-L" + CUDAStubsToken} {
		if !strings.Contains(args, want) {
			t.Errorf("CMakeArgs lack %s: %s", want, args)
		}
	}
	for _, f := range targets.ISAFlags {
		if !strings.Contains(args, "-D"+f.Option+"=") {
			t.Errorf("CMakeArgs leave %s to its default", f.Option)
		}
	}
	for _, a := range w.CMakeArgs {
		if a == "-G" || strings.HasPrefix(a, "-DCMAKE_BUILD_TYPE") {
			t.Errorf("CMakeArgs hold %q, which scikit-build-core does not take from CMAKE_ARGS", a)
		}
	}
	if w.Env["CMAKE_GENERATOR"] != "Ninja" || w.Env["SOURCE_DATE_EPOCH"] == "" {
		t.Errorf("Env = %v, want CMAKE_GENERATOR=Ninja and SOURCE_DATE_EPOCH", w.Env)
	}
	b70 := resolveWheel(t, "b70", WheelOptions{})
	if s := strings.Join(b70.CMakeArgs, " "); !strings.Contains(s, "-DGGML_SYCL=ON") || !strings.Contains(s, "-DGGML_SYCL_DEVICE_ARCH=bmg-g31") || !strings.Contains(s, "-DCMAKE_CXX_COMPILER=icpx") {
		t.Errorf("b70 CMakeArgs lack the SYCL ahead-of-time flags: %s", s)
	}
}

// scikit-build-core splits CMAKE_ARGS with Python's shlex: the rendered value must split back
// into the plan's arguments.
func TestCMakeArgsEnvSplitsBackWithShlex(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	w := resolveWheel(t, "olares-one", WheelOptions{})
	w.CMakeArgs = append(w.CMakeArgs, "-DX=a b", `-DY=it's "quoted"`, "-DZ=$HOME;*")
	src := "/work dir/src"
	out, err := exec.Command(py, "-c", "import json, shlex, sys; print(json.dumps(shlex.split(sys.argv[1])))", w.CMakeArgsEnv(src)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range w.CMakeArgs {
		want = append(want, strings.ReplaceAll(a, SourceDirToken, src))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shlex.split(CMakeArgsEnv) = %q\nwant %q", got, want)
	}
}

func TestWithArchitectures(t *testing.T) {
	rtx, _ := targets.Load("rtx3090")
	cpu, _ := targets.Load("cpu-v3")
	tests := []struct {
		name   string
		target *targets.Target
		archs  []string
		want   string // error substring; "" for success
	}{
		{"an older minor of the same major runs on the GPU", rtx, []string{"80"}, ""},
		{"two architectures", rtx, []string{"80", "86"}, ""},
		{"an architecture CUDA 13 cannot compile", rtx, []string{"61"}, "sm_61 cannot be compiled by CUDA 13.1.1"},
		{"an architecture that does not run on the GPU", rtx, []string{"90"}, "does not run on host.gpus[0]"},
		{"not an architecture", rtx, []string{"sm86"}, "is not a CUDA architecture"},
		{"a CPU target", cpu, []string{"86"}, "CUDA targets only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WithArchitectures(tt.target, tt.archs)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("WithArchitectures() = %v", err)
				}
				if !reflect.DeepEqual(got.Build.CUDA.Architectures, tt.archs) || reflect.DeepEqual(tt.target.Build.CUDA.Architectures, tt.archs) {
					t.Errorf("architectures = %v (original %v), want %v in a copy", got.Build.CUDA.Architectures, tt.target.Build.CUDA.Architectures, tt.archs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WithArchitectures() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestResolveWheelRefuses(t *testing.T) {
	tg, _ := targets.Load("cpu-v3")
	r, v, series := loadWheelInputs(t)
	noVendor := *r
	noVendor.Source.Vendor = ""
	tests := []struct {
		name   string
		recipe *recipes.Recipe
		opts   WheelOptions
		want   string
	}{
		{"a recipe that vendors nothing", &noVendor, WheelOptions{}, "vendors no llama.cpp"},
		{"a malformed Python version", r, WheelOptions{Python: "python3"}, "is not of the form 3.N"},
		{"a short commit", r, WheelOptions{Commit: "629bd1b"}, "short commit id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolveWheel(tg, tt.recipe, series, v, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ResolveWheel() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestWheelPlanHash(t *testing.T) {
	a := resolveWheel(t, "cpu-v3", WheelOptions{})
	b := resolveWheel(t, "cpu-v3", WheelOptions{})
	if a.Hash != b.Hash || string(a.JSON()) != string(b.JSON()) {
		t.Errorf("one input gave hashes %s and %s", a.Hash, b.Hash)
	}
	for name, o := range map[string]WheelOptions{
		"python": {Python: "3.12"},
		"commit": {Commit: strings.Repeat("a", 40)},
	} {
		if c := resolveWheel(t, "cpu-v3", o); c.Hash == a.Hash {
			t.Errorf("changing %s left the hash %s", name, a.Hash)
		}
	}
	c := resolveWheel(t, "cpu-v3", WheelOptions{Commit: strings.Repeat("a", 40)})
	if c.Plan.Source.Commit != strings.Repeat("a", 40) {
		t.Errorf("--commit gave source commit %s", c.Plan.Source.Commit)
	}
	if a.Interpreter() != "python3" || resolveWheel(t, "cpu-v3", WheelOptions{Python: "3.12"}).Interpreter() != "python3.12" {
		t.Errorf("Interpreter() does not follow Python")
	}
}

func TestStampVersion(t *testing.T) {
	tests := []struct {
		name, in, label, wantFile, wantVersion string
		wantErr                                bool
	}{
		{"adds the label", "from .x import *\n\n__version__ = \"0.3.34\"\n", "cpu.avx2", "from .x import *\n\n__version__ = \"0.3.34+cpu.avx2\"\n", "0.3.34+cpu.avx2", false},
		{"replaces a label", "__version__ = '0.3.34+old'\n", "cu131.sm86.avx2", "__version__ = '0.3.34+cu131.sm86.avx2'\n", "0.3.34+cu131.sm86.avx2", false},
		{"only the assignment at the start of a line", "x = \"__version__ = '9'\"\n__version__=\"1.0\"\n", "cpu", "x = \"__version__ = '9'\"\n__version__=\"1.0+cpu\"\n", "1.0+cpu", false},
		{"no version", "VERSION = 1\n", "cpu", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, v, err := StampVersion(tt.in, tt.label)
			if (err != nil) != tt.wantErr || f != tt.wantFile || v != tt.wantVersion {
				t.Errorf("StampVersion() = %q, %q, %v; want %q, %q, error %v", f, v, err, tt.wantFile, tt.wantVersion, tt.wantErr)
			}
		})
	}
}

func FuzzStampVersion(f *testing.F) {
	f.Add("__version__ = \"0.3.34\"\n", "cpu.avx2")
	f.Add("__version__='1+x'", "")
	f.Fuzz(func(t *testing.T, src, label string) {
		out, v, err := StampVersion(src, label)
		if err != nil {
			return
		}
		if !strings.Contains(out, v) {
			t.Errorf("StampVersion(%q) returned version %q that the file does not hold", src, v)
		}
		if _, v2, err := StampVersion(out, label); err != nil || v2 != v {
			t.Errorf("stamping twice gave %q, %v; want %q", v2, err, v)
		}
	})
}

func TestBindingsAgainstHeaders(t *testing.T) {
	py := `
@ctypes_function("llama_backend_init", [], None)
def llama_backend_init(): ...

@ctypes_function(
    "llama_model_load_from_file",
    [ctypes.c_char_p, llama_model_params],
    llama_model_p_ctypes,
)
def llama_model_load_from_file(path, params): ...

@ctypes_function("llama_backend_init", [], None)
def again(): ...

_lib.llama_eval.argtypes = [llama_context_p, c_int]
_lib.llama_eval.restype = c_int
`
	bound := BoundFunctions(py)
	if want := []string{"llama_backend_init", "llama_eval", "llama_model_load_from_file"}; !reflect.DeepEqual(bound, want) {
		t.Fatalf("BoundFunctions() = %v, want %v", bound, want)
	}
	header := `
LLAMA_API void llama_backend_init(void);
LLAMA_API struct llama_model * llama_model_load_from_file(
                         const char * path_model,
          struct llama_model_params   params);
// LLAMA_API int llama_eval(struct llama_context * ctx); removed: use llama_decode
/* DEPRECATED(LLAMA_API int llama_eval(...)) */
`
	if got := MissingFunctions(bound, header); !reflect.DeepEqual(got, []string{"llama_eval"}) {
		t.Errorf("MissingFunctions() = %v, want [llama_eval] (a name in a comment is not a declaration)", got)
	}
	if got := MissingFunctions(bound, header, "int llama_eval(void);"); len(got) != 0 {
		t.Errorf("MissingFunctions() over two headers = %v, want none", got)
	}
	e := &BindingError{Package: strings.Repeat("a", 40), Vendor: strings.Repeat("b", 40), Missing: map[string][]string{"llama_cpp/llama_cpp.py": {"llama_eval"}}}
	for _, want := range []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb", "1 functions", "llama_cpp/llama_cpp.py: llama_eval"} {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("BindingError = %q, want %q in it", e.Error(), want)
		}
	}
}
