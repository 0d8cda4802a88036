package publishtest

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// Target loads built-in target name, points its runtime base at base (by digest, under a
// repository that does not resolve, so only --base can supply it) and applies edit.
func Target(t testing.TB, name string, base v1.Image, edit func(*targets.Target)) *targets.Target {
	t.Helper()
	tg, err := targets.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := base.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tg.Build.Images.Runtime = "example.invalid/llbuild-testbase:1@" + d.String()
	if edit != nil {
		edit(tg)
	}
	return tg
}

// TargetFile writes tg to a target file in dir and returns its path.
func TargetFile(t testing.TB, dir string, tg *targets.Target) string {
	t.Helper()
	b, err := tg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, tg.Name+".yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := targets.LoadFile(p); err != nil {
		t.Fatalf("the test's target file does not load: %v", err)
	}
	return p
}

// FatbinPath is a real .nv_fatbin section from nvcc 13.0 (cubins for sm_86, sm_90a and
// sm_120a, PTX for compute_90), kept in preflight's test data.
func FatbinPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "preflight", "fatbin", "testdata", "realbuild", "mixed.nv_fatbin")
}

// ServerArtifacts compiles stand-ins for a server build of p with gcc and writes them as p's
// artifact directory under out (where publish looks before building): a llama-server
// executable and libllama.so, and for a CUDA plan a libggml-cuda.so that needs
// libcudart.so.<toolkit major> and carries a real .nv_fatbin section (added with objcopy).
// They are real ELF files, so preflight reads them as it reads a real build. Without gcc
// or objcopy it fails when CI=true and skips otherwise.
func ServerArtifacts(t testing.TB, out string, p *pipeline.Plan) *artifacts.Artifacts {
	t.Helper()
	gcc, objcopy := tool(t, "gcc"), tool(t, "objcopy")
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	run := func(prog string, args ...string) {
		if b, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, b)
		}
	}
	lib := filepath.Join(dir, "libllama.so")
	run(gcc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libllama.so", "-o", lib, write("llama.c", "int llama_answer(void) { return 42; }\n"))
	exe := filepath.Join(dir, "llama-server")
	run(gcc, "-O1", "-o", exe, write("server.c", "extern int llama_answer(void);\nint main(void) { return llama_answer() == 42 ? 0 : 1; }\n"), lib)
	files := []artifacts.InputFile{
		{Path: "llama-server", From: exe, Kind: artifacts.KindExecutable},
		{Path: "libllama.so", From: lib, Kind: artifacts.KindLibrary},
	}
	if p.CUDA != nil {
		major, _, _ := strings.Cut(p.CUDA.Toolkit, ".")
		cudart := "libcudart.so." + major
		stub := filepath.Join(dir, cudart)
		run(gcc, "-shared", "-fPIC", "-Wl,-soname,"+cudart, "-o", stub, write("cudart.c", "int cudaGetDeviceCount(int *n) { *n = 0; return 0; }\n"))
		cu := filepath.Join(dir, "libggml-cuda.so")
		run(gcc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libggml-cuda.so", "-Wl,--no-as-needed", "-o", cu,
			write("cuda.c", "extern int cudaGetDeviceCount(int *);\nint ggml_cuda_devices(void) { int n; cudaGetDeviceCount(&n); return n; }\n"), stub)
		run(objcopy, "--add-section", ".nv_fatbin="+FatbinPath(), "--set-section-flags", ".nv_fatbin=alloc,readonly", cu)
		files = append(files, artifacts.InputFile{Path: "libggml-cuda.so", From: cu, Kind: artifacts.KindLibrary})
	}
	d, err := artifacts.Write(out, artifacts.Input{
		Target: p.Target, PlanHash: p.Hash, Series: p.Series, Files: files,
		Provenance: pipeline.ProvenanceOf(p, pipeline.Builder{Version: "test", Executor: "host"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifacts.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found (apt-get install build-essential binutils)", name)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
