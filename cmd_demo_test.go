package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
)

// demoArgs is the newcomer's demonstration in README: the fixture project (a small CMake
// project shaped like llama.cpp, not llama.cpp) built on the host with its own two-patch series.
var demoArgs = []string{"build", "--executor", "host", "--source", "pipeline/testdata/fakellama", "--series", "pipeline/testdata/patches/demo.series", "--out", "/tmp/llbuild-demo"}

// TestDemoRunsEndToEnd runs README's demonstration as written (but into a temporary --out and
// --work-dir): it builds without a llama.cpp checkout, an engine or a network, in well under a
// minute, and the server it leaves says it is the fixture, patched.
func TestDemoRunsEndToEnd(t *testing.T) {
	needDemoTools(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := "llbuild " + strings.Join(demoArgs, " ")
	if !strings.Contains(string(readme), cmd) {
		t.Fatalf("README does not show the demonstration %q", cmd)
	}
	args := append(append([]string(nil), demoArgs[:len(demoArgs)-1]...), t.TempDir(), "--work-dir", t.TempDir())
	start := time.Now()
	code, stdout, stderr := runCLI(t, args...)
	// no timing assertion: README's "a minute" is a figure, logged here, not a test condition
	t.Logf("the demonstration took %s", time.Since(start).Round(time.Millisecond))
	if code != exitOK {
		t.Fatalf("llbuild %v: exit %d; stderr:\n%s", args, code, stderr)
	}
	dir := strings.TrimSpace(stdout)
	got, err := exec.Command(filepath.Join(dir, "llama-server")).CombinedOutput()
	if err != nil || !strings.Contains(string(got), "fake llama-server (patched by llbuild)") {
		t.Errorf("the demonstration's llama-server printed %q (%v), want the patched fixture's greeting", got, err)
	}
	// --json: the same build (cached in the work directory's artifacts) as one array entry
	code, js, stderr := runCLI(t, append(args, "--json")...)
	var rows []struct{ Target, PlanHash, Dir, Image, Error string }
	if err := json.Unmarshal([]byte(js), &rows); code != exitOK || err != nil || len(rows) != 1 || rows[0].Dir != dir || rows[0].Target != "cpu-v3" || len(rows[0].PlanHash) != 64 || rows[0].Error != "" {
		t.Errorf("build --json: exit %d, %v, %+v; want one row for cpu-v3 with the directory %s and its plan hash\n%s", code, err, rows, dir, stderr)
	}
}

func needDemoTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"git", "cmake", "ninja", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI", tool)
			}
			t.Skipf("%s not found: the demonstration needs it", tool)
		}
	}
}

// The demonstration's build on a terminal (runTerm with a status line over a buffer standing
// in for it): ninja's steps are drawn in place as one line, the log lines are each a line of
// their own, and the build's last step stays as a log line; no periodic build log lines.
func TestDemoOnATerminalDrawsTheBuildInPlace(t *testing.T) {
	needDemoTools(t)
	args := append(append([]string{"llbuild"}, demoArgs[:len(demoArgs)-1]...), t.TempDir(), "--work-dir", t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := runTerm(context.Background(), args, strings.NewReader(""), &stdout, &stderr, progress.NewTerm(&stderr, 200)); code != exitOK {
		t.Fatalf("llbuild %v: exit %d; stderr:\n%s", args, code, stderr.String())
	}
	if !regexp.MustCompile(`\rbuilding cpu-v3 \[\d+/\d+\] +\d+% \d+s \S`).MatchString(stderr.String()) {
		t.Errorf("no build line drawn in place: %q", stderr.String())
	}
	lines := progresstest.Screen(stderr.String())
	var last []string
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "time=") || strings.Contains(l, "building cpu-v3 [") {
			t.Errorf("screen line %q is not a log line of its own", l)
		}
		if strings.Contains(l, "msg=building") && strings.Contains(l, " step=") {
			last = append(last, l)
		}
	}
	if len(last) != 1 || lines[len(lines)-1] != "" {
		t.Errorf("build log lines with a step %q and %q left at the bottom; want one, the last, and nothing left\n%s", last, lines[len(lines)-1], strings.Join(lines, "\n"))
	}
}
