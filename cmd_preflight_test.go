package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/manifest"
)

// The command end to end on Debian's prebuilt ggml CPU variants: exit codes 0 (all pass),
// 1 (something would fail), 2 (usage), with the report on stdout.
// ggmlBackends returns the directory of Debian sid's libggml-cpu-*.so.
func ggmlBackends(t *testing.T) string {
	t.Helper()
	root := llamatest.Server(t).Root
	m, _ := filepath.Glob(filepath.Join(root, "usr/lib/*/ggml/backends0"))
	if len(m) != 1 {
		t.Fatalf("%s has %d ggml/backends0 directories, want 1", root, len(m))
	}
	return m[0]
}

func TestPreflightCommand(t *testing.T) {
	dir := ggmlBackends(t)
	variant := func(v string) string { return filepath.Join(dir, "libggml-cpu-"+v+".so") }
	all, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	var allArgs []string
	for _, f := range all {
		allArgs = append(allArgs, "--binary", f)
	}

	for _, c := range []struct {
		name     string
		args     []string
		wantCode int
		stdout   string
	}{
		{"haswell on an AVX2 host", []string{"--target", "cpu-v3", "--binary", variant("haswell")}, 0, "the CPU has them"},
		{"skylakex on an AVX2 host", []string{"--target", "cpu-v3", "--binary", variant("skylakex")}, 1, "libggml-cpu-skylakex.so .text+0x"},
		{"the whole set on an AVX2 host", append([]string{"--target", "cpu-v3"}, allArgs...), 0, "ggml would load libggml-cpu-haswell.so (score 64)"},
		{"the whole set on Olares One", append([]string{"--target", "olares-one"}, allArgs...), 0, "ggml would load libggml-cpu-alderlake.so (score 128)"},
		{"nothing to check", []string{"--target", "cpu-v3"}, 2, ""},
		{"unknown target", []string{"--target", "no-such-host", "--binary", variant("x64")}, 2, ""},
		{"missing file", []string{"--target", "cpu-v3", "--binary", filepath.Join(t.TempDir(), "nope.so")}, 2, ""},
		{"both image flags", []string{"--image", "a", "--image-archive", "b"}, 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"preflight"}, c.args...)...)
			if code != c.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.wantCode, out, stderr)
			}
			if !strings.Contains(out, c.stdout) {
				t.Errorf("stdout lacks %q:\n%s", c.stdout, out)
			}
		})
	}

	code, out, stderr := runCLI(t, "preflight", "--target", "cpu-v3", "--json", "--binary", variant("alderlake"))
	if code != 1 {
		t.Fatalf("--json alderlake: exit %d, want 1: %s", code, stderr)
	}
	var rep struct {
		ExitCode int
		Verdicts []struct{ Check, Status, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	found := false
	for _, v := range rep.Verdicts {
		found = found || (v.Check == "cpu" && v.Status == "would fail" && strings.Contains(v.Reason, "AVX_VNNI"))
	}
	if rep.ExitCode != 1 || !found {
		t.Errorf("JSON report = %+v, want exitCode 1 and a cpu failure naming AVX_VNNI", rep)
	}
}

// Without --target the command reads this machine; whatever it has, the x64 variant runs.
func TestPreflightThisMachine(t *testing.T) {
	f := filepath.Join(ggmlBackends(t), "libggml-cpu-x64.so")
	if _, err := os.Stat(f); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "preflight", "--binary", f)
	if code != 0 || !strings.Contains(out, "against this machine") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// A bundle directory without a single ELF file was not checked: that is exit 2 ("could
// not check"), not a pass.
func TestPreflightNothingFoundIsNotAPass(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a binary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "preflight", "--target", "cpu-v3", "--bundle", dir)
	if code != 2 || !strings.Contains(out, "nothing to check") {
		t.Errorf("exit %d, want 2 with 'nothing to check'\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// TestPreflightRunTimeDispatch: code that only an ifunc resolver hands out is reported as
// dispatched at run time (exit 0), and the system's own libc, named with --binary, is never
// "would fail" on the machine that runs it.
func TestPreflightRunTimeDispatch(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		llamatest.Unavailable(t, "no "+libc)
	}
	code, out, stderr := runCLI(t, "preflight", "--binary", libc)
	if code == 1 || strings.Contains(out, "would fail  ") {
		t.Errorf("preflight --binary %s: exit %d, want 0 or 2 and no failure\nstdout:\n%s\nstderr:\n%s", libc, code, out, stderr)
	}

	if _, err := exec.LookPath("gcc"); err != nil {
		llamatest.Unavailable(t, "no gcc to build a target_clones library")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "scale.c")
	os.WriteFile(src, []byte(`__attribute__((target_clones("avx512f","default")))
void scale(float *a, int n) { for (int i = 0; i < n; i++) a[i] *= 3.0f; }
`), 0o644)
	lib := filepath.Join(dir, "libscale.so")
	if b, err := exec.Command("gcc", "-O3", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	code, out, stderr = runCLI(t, "preflight", "--target", "cpu-v3", "--binary", lib)
	if code != 0 || !strings.Contains(out, "dispatched at run time") || !strings.Contains(out, "in scale.avx512f") {
		t.Errorf("preflight --binary libscale.so on cpu-v3: exit %d, want 0 with 'dispatched at run time' naming scale.avx512f\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// A bundle that lacks a library its manifest lists would not start: preflight says so with
// exit 1 (a verdict), not 2 (could not check).
func TestPreflightOfABundleMissingAFileWouldFail(t *testing.T) {
	p, _ := cpuPlans(t)
	dir := bundleOf(t, newBundleInputs(t), p)
	m, err := manifest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var libs []string
	for _, f := range m.Files {
		if f.Kind == manifest.KindLibrary && f.Link == "" {
			libs = append(libs, filepath.Join(dir, filepath.FromSlash(f.Path)))
		}
	}
	if len(libs) == 0 {
		t.Fatalf("the bundle lists no library: %+v", m.Files)
	}
	os.Remove(libs[0])
	code, _, stderr := runCLI(t, "preflight", "--target", "cpu-v3", "--bundle", dir)
	if code != 1 || !strings.Contains(stderr, "would not start") || !strings.Contains(stderr, filepath.Base(libs[0])) {
		t.Errorf("preflight of a bundle without %s: exit %d %s, want 1 naming it", filepath.Base(libs[0]), code, stderr)
	}
}
