package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

// runCLI runs llbuild in-process and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"llbuild"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPlanOlaresOneJSON(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "--target", "olares-one", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p struct {
		Configure []string
		Images    struct{ Devel, Runtime struct{ Digest string } }
		Patches   []struct{ Name, SHA256 string }
		CUDA      struct{ BuiltAs []string }
		Runtime   struct{ Env map[string]string }
		Notes     []string
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	args := strings.Join(p.Configure, "\n")
	for _, want := range []string{"-DCMAKE_CUDA_ARCHITECTURES=120", "-DGGML_AVX512=OFF", "-DGGML_AVX2=ON", "-DGGML_NATIVE=OFF", "-DCMAKE_EXE_LINKER_FLAGS=-L@CUDA_STUBS@"} {
		if !strings.Contains(args, want) {
			t.Errorf("configure lacks %s", want)
		}
	}
	if p.Images.Devel.Digest == "" || p.Images.Runtime.Digest == "" || len(p.Patches) == 0 || p.Patches[0].SHA256 == "" {
		t.Errorf("unpinned inputs: %+v %+v", p.Images, p.Patches)
	}
	if len(p.CUDA.BuiltAs) != 1 || p.CUDA.BuiltAs[0] != "120a" || !strings.Contains(strings.Join(p.Notes, " "), "120a") {
		t.Errorf("120 not noted as 120a: %v %v", p.CUDA.BuiltAs, p.Notes)
	}
	if p.Runtime.Env["NVIDIA_REQUIRE_CUDA"] != "cuda>=13.1" {
		t.Errorf("NVIDIA_REQUIRE_CUDA = %q", p.Runtime.Env["NVIDIA_REQUIRE_CUDA"])
	}
	_, again, _ := runCLI(t, "plan", "--target", "olares-one", "--json")
	if again != out {
		t.Error("plan output differs between two runs")
	}
}

func TestExitCodes(t *testing.T) {
	emptySource := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"ok", []string{"targets"}, 0, ""},
		{"unknown flag is usage", []string{"plan", "--nope"}, 2, "flag provided but not defined"},
		{"a one-letter flag keeps one dash", []string{"plan", "-z"}, 2, "flag provided but not defined: -z"},
		{"no target is usage", []string{"plan"}, 2, "no target given"},
		{"unknown target is usage and suggests", []string{"plan", "-t", "olares"}, 2, `did you mean "olares-one"`},
		{"floating image without --allow-floating is usage", []string{"plan", "-t", "b70"}, 2, "--allow-floating"},
		{"floating image without --allow-floating is usage for build", []string{"build", "-t", "b70", "--executor", "host", "--source", emptySource, "--out", "/tmp/llbuild-exit-test"}, 2, "--allow-floating"},
		{"missing --source is usage (host)", []string{"build", "-t", "cpu-v3", "--executor", "host", "--source", "/nonexistent-src", "--out", "/tmp/llbuild-exit-test"}, 2, "/nonexistent-src"},
		{"missing --source is usage (dagger)", []string{"build", "-t", "cpu-v3", "--source", "/nonexistent-src", "--out", "/tmp/llbuild-exit-test"}, 2, "/nonexistent-src"},
		{"missing --model is usage", []string{"bundle", "-t", "cpu-v3", "--model", "/nonexistent.gguf", "--artifacts", "/nonexistent-artifacts", "-o", "/tmp/llbuild-exit-test-bundle"}, 2, "/nonexistent.gguf"},
		{"unknown flag is named as help names it", []string{"plan", "--targt", "x"}, 2, "flag provided but not defined: --targt"},
		{"flag without its value is named as help names it", []string{"plan", "--target"}, 2, "flag needs an argument: --target"},
		{"target show without a name says what it takes", []string{"target", "show"}, 2, "target show NAME"},
		{"floating allowed", []string{"plan", "-t", "b70", "--allow-floating"}, 0, ""},
		{"unknown recipe is usage", []string{"plan", "-t", "h200", "--recipe", "nope"}, 2, "unknown recipe"},
		{"missing target file is usage", []string{"plan", "--target-file", "/nonexistent.yaml"}, 2, "reading target file"},
		{"index of a missing directory is usage", []string{"index", "/nonexistent-artifacts", "-o", "/tmp/llbuild-exit-test-index"}, 2, "/nonexistent-artifacts"},
		{"--engine without --check-pins is usage", []string{"plan", "-t", "cpu-v3", "--engine", "tcp://x:1"}, 2, "apply to --check-pins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if strings.Contains(stderr, "--target,") && tt.args[0] == "target" {
				t.Errorf("llbuild %v suggests --target, which it does not take: %q", tt.args, stderr)
			}
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("llbuild %v = exit %d, stderr %q; want exit %d containing %q", tt.args, code, stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}

// A commit the source does not have is something named that is not there: exit 2.
func TestUnknownCommitIsUsage(t *testing.T) {
	r := gitfixture.New(t)
	recipe := filepath.Join(t.TempDir(), "server.yaml")
	if b, err := os.ReadFile("recipes/server.yaml"); err != nil || os.WriteFile(recipe, b, 0o644) != nil {
		t.Fatal("copying the recipe:", err)
	}
	for _, args := range [][]string{
		{"patches", "status", "--source", r.Dir, "--commit", "nosuch"},
		{"recipe", "bump", "--source", r.Dir, "--commit", "nosuch", "--recipe-file", recipe},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, `has no commit "nosuch"`) {
			t.Errorf("llbuild %v = exit %d, %q; want 2 naming the commit", args, code, stderr)
		}
	}
}

func TestPlanTextNamesNotReproducible(t *testing.T) {
	code, out, _ := runCLI(t, "plan", "-t", "b70", "--allow-floating")
	if code != 0 || !strings.Contains(out, "NOT REPRODUCIBLE") {
		t.Errorf("exit %d, output lacks NOT REPRODUCIBLE:\n%s", code, out)
	}
}

func TestTargetDetectWritesAUsableTargetFile(t *testing.T) {
	path := t.TempDir() + "/here.yaml"
	code, out, stderr := runCLI(t, "target", "detect", "--name", "here", "-o", path)
	if code != 0 {
		t.Fatalf("target detect: exit %d: %s", code, stderr)
	}
	if out != path+"\n" {
		t.Errorf("target detect -o printed %q, want the file's path", out)
	}
	// the file may have been edited by hand since: replaced only with --force; a bad name or a
	// directory for -o refused; each exit 2 with the file as it was
	written, _ := os.ReadFile(path)
	// nor a FIFO (a device likewise: --force as root replaced /dev/null), nor a file in a
	// directory that is not there (its error named a temporary file)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-o", path}, {"--name", "bad name/x", "-o", path + ".2"}, {"-o", t.TempDir()}, {"-o", fifo, "--force"}, {"-o", filepath.Join(t.TempDir(), "no", "t.yaml")}} {
		if code, _, stderr := runCLI(t, append([]string{"target", "detect"}, args...)...); code != 2 || stderr == "" {
			t.Errorf("target detect %v: exit %d %q, want 2", args, code, stderr)
		}
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, written) {
		t.Errorf("a refused target detect changed %s", path)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("target detect -o FIFO --force replaced the pipe: %v %v", fi, err)
	}
	if _, err := os.Stat(path + ".2"); err == nil {
		t.Errorf("target detect with a bad name wrote a file")
	}
	if code, _, stderr := runCLI(t, "target", "detect", "--name", "here", "-o", path, "--force"); code != 0 {
		t.Errorf("target detect --force: exit %d %s", code, stderr)
	}
	code, out, stderr = runCLI(t, "plan", "--target-file", path, "--json")
	if strings.Contains(stderr, "needs editing") {
		t.Skipf("this host's detected target needs hand edits (%s), so it cannot be planned as is", stderr)
	}
	if code != 0 {
		t.Fatalf("plan --target-file: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, `"target": "here"`) || !strings.Contains(out, "-DGGML_NATIVE=OFF") {
		t.Errorf("plan of detected target:\n%s", out)
	}
}

func TestPlanWheelShowsHowTheWheelIsBuilt(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "-t", "rtx3090", "--recipe", "wheel")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"CMAKE_ARGS:", "-DCMAKE_CUDA_ARCHITECTURES=86", "-DGGML_AVX512=OFF", "version label: +cu131.sm86.avx2", "python -m build --wheel"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan --recipe wheel lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cmake --build build --target wheel") {
		t.Error("plan --recipe wheel shows a cmake build of a 'wheel' target")
	}
	code, out, _ = runCLI(t, "plan", "-t", "cpu-v3", "--recipe", "wheel", "--json")
	if code != 0 || !strings.Contains(out, `"localVersion": "cpu.avx2"`) {
		t.Errorf("plan --recipe wheel --json: exit %d\n%s", code, out)
	}
}

// The readable plan shows what README says it shows: the runtime image's environment, with the
// NVIDIA_REQUIRE_CUDA a CUDA target's driver must meet.
func TestPlanTextShowsTheRuntimeEnv(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "-t", "olares-one")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"runtime env:   NVIDIA_REQUIRE_CUDA=cuda>=13.1", "runtime env:   NVIDIA_VISIBLE_DEVICES=all", "label:"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// --version says which build this is (Go's build information), not "dev"; a link-time
// version wins.
func TestVersionSaysWhichBuild(t *testing.T) {
	code, out, _ := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "llbuild version ") || strings.TrimSpace(out) == "llbuild version dev" || !strings.Contains(out, runtime.Version()) {
		t.Errorf("--version: exit %d, %q; want the module version and %s", code, out, runtime.Version())
	}
	rev, rerr := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if rerr != nil {
		return // not a git checkout: the binary carries no revision to check
	}
	bin := filepath.Join(t.TempDir(), "llbuild")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out2, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out2), strings.TrimSpace(string(rev))) {
		t.Errorf("--version of a build from the checkout: %q (%v); want the commit %s", out2, err, rev)
	}
}

// resolvePlan is the plan llbuild plan prints for target (or targetFile) and recipe with the
// built-in series.
func resolvePlan(target, targetFile, recipe string, allowFloating bool) (*pipeline.Plan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return pipeline.ResolveSpec(targets.Spec{Name: target, File: targetFile}, recipe, series, pipeline.Options{AllowFloating: allowFloating})
}

// An interrupt is said as one, exit 130, even where the work it cut off ended in an error
// marked as usage (a git fetch killed reads as "not a git repository"); bench and bisect keep
// their own 130 message.
func TestAnInterruptIsNeverReportedAsUsage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"llbuild", "plan", "-t", "cpu-v9"}, strings.NewReader(""), &stdout, &stderr)
	if code != 130 || !strings.HasSuffix(stderr.String(), "llbuild: interrupted\n") {
		t.Errorf("a usage error under an interrupt: exit %d %q, want 130 saying interrupted", code, stderr.String())
	}
	code = run(context.Background(), []string{"llbuild", "plan", "-t", "cpu-v9"}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 {
		t.Errorf("the same without an interrupt: exit %d, want 2", code)
	}
}
