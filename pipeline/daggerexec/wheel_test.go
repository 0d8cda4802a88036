package daggerexec

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// wheelFake is the recording fake engine that also serves files of the container: what the
// wheel build reads back (the bindings, the headers, the version file) comes from containerFiles,
// as an engine would read it from the container's file system.
type wheelFake struct {
	*fakeEngine
	containerFiles map[string]string
}

func (f *wheelFake) Do(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var body struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	q := strings.TrimPrefix(body.Query, "query Query ")
	if strings.Contains(q, "{exists(") || strings.Contains(q, "{contents") {
		fl, err := parseField(q[1 : len(q)-1])
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		f.queries = append(f.queries, normalize(q))
		f.mu.Unlock()
		data := f.fileAnswer(fl, "")
		out, _ := json.Marshal(map[string]any{"data": data})
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(out))}, nil
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return f.fakeEngine.Do(req)
}

// fileAnswer answers a chain ending in exists(path) or file(path){contents}.
func (f *wheelFake) fileAnswer(fl *field, path string) map[string]any {
	if fl.name == "file" {
		path = fl.stringArg("path")
	}
	if fl.sub == nil {
		switch fl.name {
		case "exists":
			_, ok := f.containerFiles[fl.stringArg("path")]
			return map[string]any{"exists": ok}
		case "contents":
			return map[string]any{"contents": f.containerFiles[path]}
		}
		return map[string]any{fl.name: ""}
	}
	return map[string]any{fl.name: f.fileAnswer(fl.sub, path)}
}

// builtWheel is a wheel as the build would export it: a real shared library, compiled for
// the target's ISA, under llama_cpp/lib.
func builtWheel(t *testing.T, version string) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "v.c")
	os.WriteFile(src, []byte("void scale(float *x, int n, float k) { for (int i = 0; i < n; i++) x[i] *= k; }\n"), 0o644)
	lib := filepath.Join(dir, "lib.so")
	if out, err := exec.Command("gcc", "-O3", "-mavx2", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	so, _ := os.ReadFile(lib)
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, body := range map[string][]byte{
		"llama_cpp/lib/libggml-cpu.so":                        so,
		"llama_cpp_python-" + version + ".dist-info/METADATA": []byte("Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: " + version + "\n"),
	} {
		w, _ := z.Create(name)
		w.Write(body)
	}
	z.Close()
	return "llama_cpp_python-" + version + "-py3-none-linux_x86_64.whl", buf.String()
}

func wheelPlanFor(t *testing.T, target string) *pipeline.WheelPlan {
	t.Helper()
	tg, err := targets.Load(target)
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipes.Load("wheel")
	if err != nil {
		t.Fatal(err)
	}
	r.Source.Commit = strings.Repeat("b", 40)
	v := fixture.Recipe(t, strings.Repeat("a", 40))
	r.Source.Vendor = v.Name
	wp, err := pipeline.ResolveWheel(tg, r, series(t), v, pipeline.WheelOptions{Python: "3.12"})
	if err != nil {
		t.Fatal(err)
	}
	return wp
}

const fakeBinding = `@ctypes_function("llama_dot", [ctypes.c_int], ctypes.c_float)
def llama_dot(n): ...
`

// soundPackage is a llama-cpp-python source whose bindings match the vendored llama.h, at
// version 0.3.99: what the container's files say for a wheel that builds.
func soundPackage() map[string]string {
	return map[string]string{
		"/src/llama_cpp/llama_cpp.py":           fakeBinding,
		"/src/vendor/llama.cpp/include/llama.h": "float llama_dot(int n);\n",
		"/src/llama_cpp/__init__.py":            "__version__ = \"0.3.99\"\n",
	}
}

func newWheelFake(t *testing.T, out string, files map[string]string, containerFiles map[string]string) *wheelFake {
	return &wheelFake{fakeEngine: &fakeEngine{files: files, paths: map[string]string{out: "$OUT"}}, containerFiles: containerFiles}
}

func TestWheelBuildSendsThePlanAsQueries(t *testing.T) {
	wp := wheelPlanFor(t, "cpu-v3")
	name, whl := builtWheel(t, "0.3.99+cpu.avx2")
	out := t.TempDir()
	f := newWheelFake(t, out, map[string]string{name: whl}, soundPackage())
	ex, err := NewWheel(WheelOptions{Options: Options{conn: f, Series: series(t), Builder: pipeline.Builder{Version: "test"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	dir, err := ex.BuildWheel(context.Background(), wp, out)
	if err != nil {
		t.Fatalf("BuildWheel() = %v", err)
	}
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Manifest.Files) != 1 || a.Manifest.Files[0].Path != name || a.Manifest.PlanHash != wp.Hash {
		t.Errorf("artifacts = %+v (plan %s), want %s of plan %s", a.Manifest.Files, a.Manifest.PlanHash, name, wp.Hash)
	}
	all := strings.Join(f.recorded(), "\n")
	for _, want := range []string{
		`git(url:"https://github.com/abetlen/llama-cpp-python"`, `commit(id:"` + strings.Repeat("b", 40) + `")`,
		`git(url:"https://example.invalid/fakellama"`, `commit(id:"` + strings.Repeat("a", 40) + `")`,
		`withoutDirectory(path:"/src/vendor/llama.cpp")`, `withDirectory(path:"/src/vendor/llama.cpp", source:`,
		`python3.12 -m venv /opt/llbuild-python`, "build==1.5.1 scikit-build-core==0.12.2",
		`git apply --check --whitespace=nowarn`, `withWorkdir(path:"/src/vendor/llama.cpp")`,
		`withNewFile(contents:"__version__ = \"0.3.99+cpu.avx2\"\n", path:"/src/llama_cpp/__init__.py")`,
		`name:"CMAKE_ARGS"`, `-DGGML_AVX2=ON`, `-DGGML_AVX512=OFF`, `name:"SOURCE_DATE_EPOCH", value:"1784810751"`,
		`name:"SKBUILD_BUILD_DIR", value:"/build"`, `name:"CMAKE_GENERATOR", value:"Ninja"`,
		`name:"SKBUILD_WHEEL_EXCLUDE", value:"llama_cpp/include/**;`, `-DCMAKE_INSTALL_LIBDIR=llama_cpp/lib`,
		`"/opt/llbuild-python/bin/python","-m","build","--wheel","--no-isolation","--outdir","/dist","/src"`,
		`directory(path:"/dist"){export(`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no query carries %s", want)
		}
	}
}

func TestWheelBuildRefusesMismatchedBindings(t *testing.T) {
	wp := wheelPlanFor(t, "cpu-v3")
	out := t.TempDir()
	f := newWheelFake(t, out, nil, map[string]string{
		"/src/llama_cpp/llama_cpp.py":           fakeBinding + "@ctypes_function(\"llama_eval\", [], None)\ndef llama_eval(): ...\n",
		"/src/vendor/llama.cpp/include/llama.h": "float llama_dot(int n);\n",
		"/src/llama_cpp/__init__.py":            "__version__ = \"0.3.99\"\n",
	})
	ex, err := NewWheel(WheelOptions{Options: Options{conn: f, Series: series(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	_, err = ex.BuildWheel(context.Background(), wp, out)
	var be *pipeline.BindingError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "llama_eval") {
		t.Fatalf("BuildWheel() = %v, want a BindingError naming llama_eval", err)
	}
	if strings.Contains(strings.Join(f.recorded(), "\n"), "{export(") {
		t.Errorf("a refused build still exported")
	}
}

func TestWheelBuildRefusesAWheelThatWouldNotRun(t *testing.T) {
	wp := wheelPlanFor(t, "rtx3090")
	// A CPU-only wheel where CUDA sm_86 was asked for: no cubin for sm_86.
	name, whl := builtWheel(t, "0.3.99+cu131.sm86.avx2")
	out := t.TempDir()
	f := newWheelFake(t, out, map[string]string{name: whl}, map[string]string{
		"/src/llama_cpp/__init__.py": "__version__ = \"0.3.99\"\n",
	})
	ex, err := NewWheel(WheelOptions{Options: Options{conn: f, Series: series(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	_, err = ex.BuildWheel(context.Background(), wp, out)
	if err == nil || !strings.Contains(err.Error(), "no cubin for sm_86") {
		t.Fatalf("BuildWheel() = %v, want a refusal for the missing sm_86 kernels", err)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "rtx3090", "*")); len(m) > 0 {
		t.Errorf("a refused wheel was written: %v", m)
	}
}

// --build-jobs reaches the container's compile as CMAKE_BUILD_PARALLEL_LEVEL, as it reaches
// the host executor's, and is left out where 0 asks for the default.
func TestWheelBuildSetsTheCompilesParallelism(t *testing.T) {
	for _, jobs := range []int{0, 3} {
		wp := wheelPlanFor(t, "cpu-v3")
		name, whl := builtWheel(t, "0.3.99+cpu.avx2")
		out := t.TempDir()
		f := newWheelFake(t, out, map[string]string{name: whl}, soundPackage())
		ex, err := NewWheel(WheelOptions{Options: Options{conn: f, Series: series(t), Builder: pipeline.Builder{Version: "test"}}, Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ex.BuildWheel(context.Background(), wp, out); err != nil {
			t.Fatalf("jobs %d: BuildWheel() = %v", jobs, err)
		}
		ex.Close()
		all := strings.Join(f.recorded(), "\n")
		has := strings.Contains(all, `name:"CMAKE_BUILD_PARALLEL_LEVEL", value:"3"`)
		if any := strings.Contains(all, "CMAKE_BUILD_PARALLEL_LEVEL"); has != (jobs == 3) || any != (jobs != 0) {
			t.Errorf("jobs %d: the queries set CMAKE_BUILD_PARALLEL_LEVEL=3 %v (any value %v)", jobs, has, any)
		}
	}
	if _, err := NewWheel(WheelOptions{Options: Options{conn: newWheelFake(t, t.TempDir(), nil, nil)}, Jobs: -1}); err == nil || !strings.Contains(err.Error(), "jobs -1") {
		t.Errorf("NewWheel(Jobs -1) = %v, want an error naming the jobs", err)
	}
}
