package preflight

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/targets"
)

// TestBinaryBringsItsOriginLibraries: an executable is baseline x86-64 while the library
// beside it (RUNPATH $ORIGIN, as llbuild builds llama-server) holds the AVX-512 code that
// kills it at start, so checking the executable alone must check that library too.
func TestBinaryBringsItsOriginLibraries(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		llamatest.Unavailable(t, "no gcc to build the test executable and library")
	}
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("wide.c", `#include <immintrin.h>
float wide_sum(const float *x) { __m512 v = _mm512_loadu_ps(x); return _mm512_reduce_add_ps(v); }
`)
	write("main.c", `float wide_sum(const float *x);
int main(void) { float x[16] = {0}; return (int)wide_sum(x); }
`)
	run := func(args ...string) {
		cmd := exec.Command("gcc", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	run("-O2", "-mavx512f", "-shared", "-fPIC", "-Wl,-soname,libwide.so", "-o", "libwide.so", "wide.c")
	run("-O2", "-o", "server", "main.c", "-L.", "-lwide", "-Wl,--enable-new-dtags,-rpath,$ORIGIN")

	bins, err := ReadFiles(context.Background(), []string{filepath.Join(dir, "server")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range bins {
		names = append(names, filepath.Base(b.Path))
	}
	if strings.Join(names, ",") != "server,libwide.so" {
		t.Fatalf("ReadFiles(server) read %v, want server and the libwide.so beside it", names)
	}
	v3, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	r := Check(v3.Host, "cpu-v3", Input{Name: "server", Binaries: bins})
	failed := false
	for _, v := range r.Verdicts {
		if v.Status == Fail && strings.HasSuffix(v.Subject, "libwide.so") {
			failed = true
		}
	}
	if !failed {
		t.Errorf("the AVX-512 library beside the executable did not fail on cpu-v3: %+v", r.Verdicts)
	}
}
