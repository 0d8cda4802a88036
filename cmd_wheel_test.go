package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
)

func TestWheelRefusesBadUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an architecture no built-in target builds", []string{"wheel", "--arch", "61"}, "no built-in target builds CUDA architectures 61"},
		{"an architecture the target's toolkit cannot build", []string{"wheel", "-t", "rtx3090", "--arch", "61"}, "sm_61 cannot be compiled by CUDA 13.1.1"},
		{"an architecture that does not run on the target's GPU", []string{"wheel", "-t", "rtx3090", "--arch", "120"}, "does not run on host.gpus[0]"},
		{"--arch for a CPU target", []string{"wheel", "-t", "cpu-v3", "--arch", "86"}, "CUDA targets only"},
		{"a malformed Python version", []string{"wheel", "--python", "3"}, "want a version such as 3.12"},
		{"a short commit", []string{"wheel", "--commit", "629bd1b"}, "short commit id"},
		{"an unknown executor", []string{"wheel", "--executor", "podman", "--out", "/tmp/x"}, "--executor must be dagger or host"},
		{"host without the sources", []string{"wheel", "--executor", "host", "--source", "/", "--out", "/tmp/x"}, "needs --source DIR (llama-cpp-python) and --llama-source DIR"},
		{"--engine with host", []string{"wheel", "--executor", "host", "--engine", "tcp://x:1", "--out", "/tmp/x"}, "--engine and --base are for --executor dagger"},
		{"a runtime base for a wheel", []string{"wheel", "--base", "runtime=x", "--out", "/tmp/x"}, "no use for a wheel"},
		{"the default --out inside the source", []string{"wheel", "--executor", "host", "--source", ".", "--llama-source", "/"}, "is inside --source"},
		{"arguments", []string{"wheel", "x"}, "takes no arguments"},
		{"an unknown target", []string{"wheel", "-t", "rtx3080"}, "unknown target"},
		{"index without artifacts", []string{"index", "-o", "x"}, "at least one ARTIFACTS"},
		{"index without -o", []string{"index", "out"}, "needs -o DIR"},
		{"index with -o twice", []string{"index", "-o", "a", "out", "-o", "b"}, "given twice"},
		{"an empty --target", []string{"wheel", "-t", "", "--print-plan"}, `-t is empty`},
		{"negative build jobs", []string{"wheel", "--build-jobs", "-5", "--print-plan"}, "--build-jobs -5"},
		{"index with an unknown flag after ARTIFACTS", []string{"index", "out", "--json"}, "unknown flag --json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr with %q", code, out, stderr, tt.want)
			}
		})
	}
}

func TestWheelFailsFastWithoutEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DAGGER_SESSION_PORT", "")
	t.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", "")
	code, out, stderr := runCLI(t, "wheel", "--arch", "86", "--out", t.TempDir())
	if code != exitFailed || out != "" || !strings.Contains(stderr, "no Dagger engine reachable") || !strings.Contains(stderr, "--executor host") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the missing engine and the host executor", code, out, stderr)
	}
}

func TestWheelArchChoosesTheTarget(t *testing.T) {
	tests := []struct {
		name              string
		args              []string
		target, label     string
		cmakeArchitecture string
	}{
		{"no target: the default", nil, "cpu-v3", "cpu.avx2", ""},
		{"--arch 86 alone: the built-in target building sm_86", []string{"--arch", "86"}, "rtx3090", "cu131.sm86.avx2", "86"},
		{"--arch 120 alone", []string{"--arch", "120"}, "olares-one", "cu131.sm120a.avx2.vnni", "120"},
		{"--target with --arch replaces the architectures", []string{"-t", "rtx3090", "--arch", "80,86"}, "rtx3090", "cu131.sm80.sm86.avx2", "80;86"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"wheel", "--print-plan"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var w struct {
				Plan         struct{ Target string }
				LocalVersion string
				CMakeArgs    []string
			}
			if err := json.Unmarshal([]byte(out), &w); err != nil {
				t.Fatalf("stdout is not JSON: %v", err)
			}
			if w.Plan.Target != tt.target || w.LocalVersion != tt.label {
				t.Errorf("target %s label %s, want %s %s", w.Plan.Target, w.LocalVersion, tt.target, tt.label)
			}
			args := strings.Join(w.CMakeArgs, " ")
			if tt.cmakeArchitecture != "" && !strings.Contains(args, "-DCMAKE_CUDA_ARCHITECTURES="+tt.cmakeArchitecture+" ") {
				t.Errorf("CMakeArgs = %s, want CMAKE_CUDA_ARCHITECTURES=%s", args, tt.cmakeArchitecture)
			}
		})
	}
}

// The built-in patch series against a tree it was not written for (fakellama): the wheel build
// stops at the patch and writes nothing. The fake package and fakellama are plain directories.
func TestWheelHostStopsAtAPatchThatDoesNotApply(t *testing.T) {
	for _, tool := range []string{"git", "cmake", "ninja", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	py := debianPython(t)
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "wheel", "-t", "cpu-v3", "--executor", "host", "--python", py,
		"--source", filepath.Join("pipeline", "testdata", "fakewheel"),
		"--llama-source", filepath.Join("pipeline", "testdata", "fakellama"),
		"--out", out, "--work-dir", t.TempDir())
	if code != exitFailed || stdout != "" {
		t.Fatalf("exit %d stdout %q, want exit 1 and no stdout; stderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"patch 0001-ggml-cuda-link-driver-interface.patch does not apply", "ggml/src/ggml-cuda/CMakeLists.txt"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*")); len(m) > 0 {
		t.Errorf("a failed build wrote %v", m)
	}
}

func TestWheelHostNamesAMissingPython(t *testing.T) {
	for _, tool := range []string{"git", "cmake", "ninja", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	code, _, stderr := runCLI(t, "wheel", "-t", "cpu-v3", "--executor", "host", "--python", "3.99",
		"--source", filepath.Join("pipeline", "testdata", "fakewheel"),
		"--llama-source", filepath.Join("pipeline", "testdata", "fakellama"),
		"--out", t.TempDir(), "--work-dir", t.TempDir())
	if code != exitFailed || !strings.Contains(stderr, "python3.99") || !strings.Contains(stderr, "not on PATH") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming python3.99", code, stderr)
	}
}

func debianPython(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Skipf("no /usr/bin/python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// indexArtifact writes an artifact directory holding a minimal wheel of version.
func indexArtifact(t *testing.T, out, target, version string) {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, _ := z.Create("llama_cpp_python-" + version + ".dist-info/METADATA")
	w.Write([]byte("Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: " + version + "\n"))
	z.Close()
	whl := filepath.Join(t.TempDir(), "llama_cpp_python-"+version+"-py3-none-linux_x86_64.whl")
	if err := os.WriteFile(whl, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(version))
	if _, err := artifacts.Write(out, artifacts.Input{Target: target, PlanHash: hex.EncodeToString(sum[:]),
		Files: []artifacts.InputFile{{Path: filepath.Base(whl), From: whl, Kind: artifacts.KindWheel}}}); err != nil {
		t.Fatal(err)
	}
}

func TestIndexCommand(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	indexArtifact(t, a, "rtx3090", "0.3.34+cu131.sm86.avx2")
	indexArtifact(t, a, "cpu-v3", "0.3.34+cpu.avx2")
	indexArtifact(t, b, "olares-one", "0.3.34+cu131.sm120a.avx2.vnni")
	idx := filepath.Join(t.TempDir(), "index")
	code, out, stderr := runCLI(t, "index", a, b, "-o", idx)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "cpu\t" + filepath.Join(idx, "cpu", "simple") + "\t1\ncu131\t" + filepath.Join(idx, "cu131", "simple") + "\t2\n"
	if out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	page, err := os.ReadFile(filepath.Join(idx, "cu131", "simple", "llama-cpp-python", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(page), "#sha256=") != 2 {
		t.Errorf("cu131 project page:\n%s\nwant two links with sha256 fragments", page)
	}
	if code, _, stderr := runCLI(t, "index", t.TempDir(), "-o", idx); code != exitFailed || !strings.Contains(stderr, "no wheels") {
		t.Errorf("index of an empty directory: exit %d, stderr %q; want exit 1", code, stderr)
	}
	// a root named twice is counted once, as it is indexed once
	if code, out, stderr := runCLI(t, "index", a, a, "-o", idx); code != 0 || !strings.Contains(out, "cu131\t"+filepath.Join(idx, "cu131", "simple")+"\t1\n") {
		t.Errorf("index A A: exit %d, stdout %q %s; want cu131 counted once", code, out, stderr)
	}
	// -o naming what is not an index of its own is usage, and stays as it was: a directory of
	// other things, a file, a link (replacing it put a directory in its place)
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "keep"), []byte("x"), 0o644)
	file := filepath.Join(t.TempDir(), "keep.yaml")
	os.WriteFile(file, []byte("x"), 0o644)
	link := filepath.Join(t.TempDir(), "current")
	os.Symlink(idx, link)
	for _, o := range []string{other, file, link} {
		if code, _, stderr := runCLI(t, "index", a, "-o", o); code != exitUsage || stderr == "" {
			t.Errorf("index -o %s: exit %d %q, want 2", o, code, stderr)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("index -o LINK replaced the link: %v %v", fi, err)
	}
}
