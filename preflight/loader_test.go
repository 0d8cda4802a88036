package preflight

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

// linkInto symlinks files from the Debian sysroot into dir under their own names.
func linkInto(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		if err := os.Symlink(f, filepath.Join(dir, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
}

// dlBuild lays out a GGML_BACKEND_DL build the way upstream's images do: an executable with
// DT_RPATH $ORIGIN (inherited by the libraries it loads) that needs Debian's libggml.so.0 (ggml's loader, which dlopens
// libggml-cpu-*.so from the executable's directory), and the given CPU variants beside it.
func dlBuild(t *testing.T, variants ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		llamatest.Unavailable(t, "no gcc to build the test executable")
	}
	root := debfetch.Root(t)
	backends := debfetch.GGMLBackends(t)
	dir := t.TempDir()
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	linkInto(t, dir, filepath.Join(lib, "libggml.so.0"), filepath.Join(lib, "libggml-base.so.0"))
	for _, v := range variants {
		linkInto(t, dir, filepath.Join(backends, "libggml-cpu-"+v+".so"))
	}
	if err := os.WriteFile(filepath.Join(dir, "main.c"), []byte("void ggml_backend_load_all(void);\nint main(void) { ggml_backend_load_all(); return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gcc", "-O2", "-o", "llama-server", "main.c", "-L.", "-l:libggml.so.0", "-Wl,-rpath-link,.", "-Wl,--allow-shlib-undefined", "-Wl,--disable-new-dtags,-rpath,$ORIGIN")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return dir
}

func cpuVerdictEnding(r *Report, suffix string) *Verdict {
	for i := range r.Verdicts {
		if r.Verdicts[i].Check == CheckCPU && strings.HasSuffix(r.Verdicts[i].Subject, suffix) {
			return &r.Verdicts[i]
		}
	}
	return nil
}

// TestBinaryChecksTheBackendsGGMLLoads: with GGML_BACKEND_DL, llama-server's own code and
// its DT_NEEDED libraries are baseline; the code that runs is the libggml-cpu-*.so ggml
// dlopens from the executable's directory. --binary must check those, choosing the variant
// as ggml would.
func TestBinaryChecksTheBackendsGGMLLoads(t *testing.T) {
	host := loadTarget(t, "cpu-v3")
	t.Run("only an AVX-512 variant", func(t *testing.T) {
		dir := dlBuild(t, "skylakex")
		bins, err := ReadFiles(context.Background(), []string{filepath.Join(dir, "llama-server")})
		if err != nil {
			t.Fatal(err)
		}
		r := Check(host, "cpu-v3", Input{Name: "llama-server", Binaries: bins})
		if r.ExitCode() != 1 {
			t.Errorf("ExitCode = %d, want 1; verdicts %+v", r.ExitCode(), r.Verdicts)
		}
		v := cpuVerdictEnding(r, "libggml-cpu-skylakex.so")
		if v == nil || v.Status != Fail || !strings.Contains(v.Reason, "AVX512F") {
			t.Errorf("skylakex verdict = %+v, want would fail naming AVX512F", v)
		}
	})
	t.Run("haswell beside skylakex", func(t *testing.T) {
		dir := dlBuild(t, "skylakex", "haswell", "x64")
		bins, err := ReadFiles(context.Background(), []string{filepath.Join(dir, "llama-server")})
		if err != nil {
			t.Fatal(err)
		}
		r := Check(host, "cpu-v3", Input{Name: "llama-server", Binaries: bins})
		if len(r.GGML) != 1 || !strings.HasSuffix(r.GGML[0].Loaded, "libggml-cpu-haswell.so") {
			t.Fatalf("GGML choices = %+v, want haswell loaded", r.GGML)
		}
		if r.ExitCode() != 0 {
			t.Errorf("ExitCode = %d, want 0; verdicts %+v", r.ExitCode(), r.Verdicts)
		}
	})
}

// TestBinaryNeededNotFoundIsUnknown: Debian's llama-server needs libllama-server-impl.so
// from its RUNPATH /usr/lib/x86_64-linux-gnu/llama, which this machine lacks. Copied beside
// only libggml-cpu-skylakex.so it must not read as "1 ok": the missing library is unknown
// and the AVX-512 variant ggml would dlopen fails on an AVX2 host.
func TestBinaryNeededNotFoundIsUnknown(t *testing.T) {
	root := debfetch.Root(t)
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/llama/libllama-server-impl.so"); err == nil {
		t.Skip("this machine has Debian's libllama-server-impl.so installed")
	}
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(root, "usr/bin/llama-server"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llama-server"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	linkInto(t, dir, filepath.Join(debfetch.GGMLBackends(t), "libggml-cpu-skylakex.so"))
	bins, err := ReadFiles(context.Background(), []string{filepath.Join(dir, "llama-server")})
	if err != nil {
		t.Fatal(err)
	}
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Name: "llama-server", Binaries: bins})
	var missing *Verdict
	for i, v := range r.Verdicts {
		if v.Check == CheckLibraries && strings.Contains(v.Subject, "libllama-server-impl.so") {
			missing = &r.Verdicts[i]
		}
	}
	if missing == nil || missing.Status != Unknown || !strings.Contains(missing.Reason, "not found") {
		t.Errorf("libllama-server-impl.so verdict = %+v, want unknown: not found", missing)
	}
	if v := cpuVerdictEnding(r, "libggml-cpu-skylakex.so"); v == nil || v.Status != Fail {
		t.Errorf("skylakex verdict = %+v, want would fail", v)
	}
	if r.ExitCode() != 1 {
		t.Errorf("ExitCode = %d, want 1", r.ExitCode())
	}
}

func TestGGMLBackendFileNames(t *testing.T) {
	for _, c := range []struct {
		name    string
		backend string
	}{
		{"libggml-cpu-haswell.so", "cpu"},
		{"libggml-cpu.so", "cpu"},
		{"libggml-cuda.so", "cuda"},
		{"libggml-zendnn.so", "zendnn"},     // AMD's CPU backend, loaded before the CPU variants
		{"libggml-openvino.so", "openvino"}, // in the pinned llama.cpp's list
		{"libggml-cpu-haswell.so.0", ""},    // extension ".0": ggml skips it
		{"libggml-cpu-haswell.so.bak", ""},
		{"libggml-base.so", ""},
		{"libggml.so", ""},
	} {
		got, _ := ggmlBackendFile(c.name)
		if got != c.backend {
			t.Errorf("ggmlBackendFile(%q) = %q, want %q", c.name, got, c.backend)
		}
	}
}
