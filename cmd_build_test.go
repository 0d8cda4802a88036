package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
	"github.com/llbuild/llbuild/publish/publishtest"
	"github.com/llbuild/llbuild/targets"
)

func TestServerRefusesBadUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown executor", []string{"build", "-t", "cpu-v3", "--executor", "podman"}, "--executor must be dagger or host"},
		{"host without a source", []string{"build", "-t", "cpu-v3", "--executor", "host"}, "needs --source"},
		{"an image for two targets", []string{"build", "-t", "cpu-v3,h200", "--image-out", "x.tar"}, "take one target"},
		{"a malformed --base", []string{"build", "-t", "cpu-v3", "--base", "builder=x"}, "want devel=REF or runtime=REF"},
		{"--engine with host", []string{"build", "-t", "cpu-v3", "--executor", "host", "--source", "/nonexistent-src", "--out", "/tmp/x", "--engine", "tcp://x:1"}, "--engine is for --executor dagger"},
		{"the default --out inside the source", []string{"build", "-t", "cpu-v3", "--executor", "host", "--source", "."}, "is inside the source"},
		{"an unknown target", []string{"build", "-t", "cpu-v9"}, "unknown target"},
		{"no jobs", []string{"build", "-t", "cpu-v3", "--jobs", "0"}, "--jobs must be at least 1"},
		{"a recipe that is not a file", []string{"build", "-t", "cpu-v3", "--recipe", "wheel"}, "takes a server recipe FILE.yaml"},
		{"another kind of recipe file", []string{"build", "-t", "cpu-v3", "--recipe", "recipes/wheel.yaml"}, `is the "wheel" recipe`},
		{"a recipe file that is not there", []string{"build", "-t", "cpu-v3", "--recipe", "nosuch.yaml"}, "reading recipe file"},
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

func TestServerWithoutTargetBuildsTheDefault(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := runCLI(t, "build", "--executor", "host", "--source", t.TempDir(), "--out", t.TempDir())
	if code != exitFailed || !strings.Contains(stderr, "target="+targets.Default) || !strings.Contains(stderr, "cmake") {
		t.Errorf("exit %d, stderr %q; want the default target %s attempted and refused for the missing cmake", code, stderr, targets.Default)
	}
}

func TestServerFailsFastWithoutEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DAGGER_SESSION_PORT", "")
	t.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", "")
	code, out, stderr := runCLI(t, "build", "-t", "cpu-v3", "--out", t.TempDir())
	if code != exitFailed || out != "" || !strings.Contains(stderr, "no Dagger engine reachable") || !strings.Contains(stderr, "--executor host") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the missing engine and the host executor", code, out, stderr)
	}
}

// The built-in patch series against a tree it was not written for (the test fixture): the
// build stops at the first patch, names it and the file, and writes nothing.
func TestServerHostReportsAPatchThatDoesNotApply(t *testing.T) {
	for _, tool := range []string{"git", "cmake", "ninja", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "build", "-t", "cpu-v3", "--executor", "host",
		"--source", filepath.Join("pipeline", "testdata", "fakellama"), "--out", out, "--work-dir", t.TempDir())
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
	// --json still says which target failed and why, on stdout, and exits 1
	code, js, _ := runCLI(t, "build", "-t", "cpu-v3", "--executor", "host",
		"--source", filepath.Join("pipeline", "testdata", "fakellama"), "--out", out, "--work-dir", t.TempDir(), "--json")
	var rows []struct{ Target, Dir, Error string }
	if err := json.Unmarshal([]byte(js), &rows); code != exitFailed || err != nil || len(rows) != 1 || rows[0].Target != "cpu-v3" || rows[0].Dir != "" ||
		!strings.Contains(rows[0].Error, "0001-ggml-cuda-link-driver-interface.patch does not apply") {
		t.Errorf("build --json of a failing build: exit %d, %v, %+v; want 1 and the target's error", code, err, rows)
	}
}

// A runtime base of another digest than the plan's is refused before anything builds: the
// fixture source here would otherwise fail at the series' first patch.
func TestServerChecksTheRuntimeBaseBeforeBuilding(t *testing.T) {
	layout := imagetest.WriteLayout(t, imagetest.BaseImage(t))
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "build", "-t", "cpu-v3", "--executor", "host",
		"--source", filepath.Join("pipeline", "testdata", "fakellama"), "--out", out, "--work-dir", t.TempDir(),
		"--base", "runtime=oci-layout:"+layout, "--image-out", filepath.Join(t.TempDir(), "img.tar"))
	if code != exitFailed || stdout != "" {
		t.Fatalf("exit %d stdout %q, want exit 1 and no stdout; stderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "checked before building") || strings.Contains(stderr, "does not apply") || strings.Contains(stderr, "msg=building") {
		t.Errorf("want the runtime base refused before any build step; stderr:\n%s", stderr)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*")); len(m) > 0 {
		t.Errorf("a refused build wrote %v", m)
	}
}

// build --image-out, with the demonstration's fixture build (a target like cpu-v3 whose
// runtime base is the test base), reports the export: on a terminal drawn in place, else as
// log lines, both starting with the destination and ending with the archive's size and time.
func TestServerReportsTheImageExport(t *testing.T) {
	needDemoTools(t)
	base := imagetest.BaseImage(t)
	file := publishtest.TargetFile(t, t.TempDir(), publishtest.Target(t, "cpu-v3", base, nil))
	layout := imagetest.WriteLayout(t, base)
	for _, terminal := range []bool{true, false} {
		img := filepath.Join(t.TempDir(), "img.tar")
		args := []string{"llbuild", "build", "--target-file", file, "--executor", "host", "--source", filepath.Join("pipeline", "testdata", "fakellama"),
			"--series", filepath.Join("pipeline", "testdata", "patches", "demo.series"), "--out", t.TempDir(), "--work-dir", t.TempDir(),
			"--base", "runtime=oci-layout:" + layout, "--image-out", img}
		var stdout, stderr bytes.Buffer
		var term *progress.Term
		if terminal {
			term = progress.NewTerm(&stderr, 200)
		}
		if code := runTerm(context.Background(), args, strings.NewReader(""), &stdout, &stderr, term); code != exitOK {
			t.Fatalf("terminal %v: exit %d\n%s", terminal, code, stderr.String())
		}
		fi, err := os.Stat(img)
		if err != nil {
			t.Fatal(err)
		}
		log := stderr.String()
		for _, want := range []string{`msg="exporting image" target=cpu-v3 to=` + img + "\n",
			`msg="exported image" target=cpu-v3 to=` + img + ` size="` + progress.Bytes(fi.Size()) + `" took=`} {
			if !strings.Contains(log, want) {
				t.Errorf("terminal %v: stderr has no %q:\n%s", terminal, want, log)
			}
		}
		if drawn := strings.Contains(log, "\rexporting image: "); drawn != terminal {
			t.Errorf("terminal %v: export line drawn in place: %v", terminal, drawn)
		}
		if terminal {
			lines := progresstest.Screen(log)
			for _, l := range lines[:len(lines)-1] {
				if !strings.HasPrefix(l, "time=") {
					t.Errorf("screen line %q is not a log line of its own", l)
				}
			}
		}
	}
}

// What a build writes at its end is checked before it starts: a half-hour build must not end in
// "no such directory", nor write its image over the base archive it reads or a file of the
// user's. Nothing is written by a refused build.
func TestBuildChecksItsOutputsBeforeBuilding(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte("project(x)\n"), 0o644)
	base := filepath.Join(dir, "rt.tar")
	notes := filepath.Join(dir, "notes.txt")
	userDir := filepath.Join(dir, "mine")
	layoutDir := filepath.Join(dir, "layout")
	for _, f := range []string{base, notes} {
		os.WriteFile(f, []byte("keep"), 0o644)
	}
	os.MkdirAll(userDir, 0o755)
	os.WriteFile(filepath.Join(userDir, "a.txt"), []byte("keep"), 0o644)
	os.MkdirAll(layoutDir, 0o755)
	os.WriteFile(filepath.Join(layoutDir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	host := []string{"build", "-t", "cpu-v3", "--executor", "host", "--source", src}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the image over its base", []string{"--out", out, "--base", "runtime=oci-archive:" + base, "--image-out", base, "--force"}, "is the --base runtime archive, which this command reads"},
		{"the image over a file", []string{"--out", out, "--image-out", notes}, "exists; give --force to replace it"},
		{"the image under a missing directory", []string{"--out", out, "--image-out", filepath.Join(dir, "nosuch", "x.tar")}, "does not exist; make it first"},
		{"the image into a directory of the user's", []string{"--out", out, "--image-out", userDir}, "holds files and is no OCI layout"},
		{"the image into a layout", []string{"--out", out, "--image-out", layoutDir + "/"}, "holds an OCI layout; give --force"},
		{"a push that is no reference", []string{"--out", out, "--push", "not-a-ref!!"}, `--push "not-a-ref!!"`},
		{"--out a file", []string{"--out", notes}, "is a file; give a directory"},
		{"--out inside a plain source", []string{"--out", filepath.Join(src, "out")}, "is inside the source"},
		{"an empty --target", []string{"--out", out, "-t", ""}, `-t is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string(nil), host...), tc.args...)
			if strings.Contains(tc.name, "--target") {
				args = append([]string{"build", "--executor", "host", "--source", src}, tc.args...)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 saying %q", code, stdout, stderr, tc.want)
			}
		})
	}
	for _, f := range []string{base, notes, filepath.Join(userDir, "a.txt")} {
		if b, err := os.ReadFile(f); err != nil || string(b) != "keep" {
			t.Errorf("%s after the refused builds: %q %v", f, b, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused build made %s", out)
	}
}

// A series file of the user's that does not read (a bad line, a patch outside its directory) is
// theirs to mend: exit 2 in plan and build alike, as patches status has it.
func TestABadSeriesFileIsUsage(t *testing.T) {
	series := filepath.Join(t.TempDir(), "bad.series")
	os.WriteFile(series, []byte("../x.patch\n"), 0o644)
	for _, args := range [][]string{
		{"plan", "-t", "cpu-v3", "--series", series},
		{"build", "-t", "cpu-v3", "--series", series, "--out", t.TempDir()},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "bad.series:1") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 naming the line", args, code, stdout, stderr)
		}
	}
}
