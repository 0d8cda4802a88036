package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/gitfixture"
)

// upstreamMirror unpacks ../shared/llama.cpp/llama.cpp-history.git.tar: upstream's shallow
// history from 1425386fd to 3f545becc (its README says how it was made).
func upstreamMirror(t *testing.T) string {
	t.Helper()
	tarball := filepath.Join(gitfixture.Root(), "..", "shared", "llama.cpp", "llama.cpp-history.git.tar")
	if _, err := os.Stat(tarball); err != nil {
		enginetest.SkipUnlessCI(t, "upstream's history is not beside the repository: "+err.Error())
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xf", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", tarball, err, out)
	}
	return filepath.Join(dir, "llrange.git")
}

// recipe bump --out moves a copy of the built-in recipe and series, outside llbuild's tree:
// the pin's build number counted in a shallow mirror from the built-in pin, the copy usable by
// plan --recipe --series; a series that does not apply writes nothing, not even the directory.
func TestRecipeBumpOutMovesACopy(t *testing.T) {
	repo := upstreamMirror(t)
	// ed1c3a20f is the fifth first-parent commit after the pin 34af94cd9 (b10470)
	out := filepath.Join(t.TempDir(), "pin")
	code, stdout, stderr := runCLI(t, "recipe", "bump", "--out", out, "--source", repo, "--commit", "ed1c3a20f")
	if code != exitOK {
		t.Fatalf("recipe bump --out: exit %d\n%s", code, stderr)
	}
	recipe, err := os.ReadFile(filepath.Join(out, "server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"commit: ed1c3a20f5e3f0892ac7135d43542815bd7c4aba", "buildNumber: 10475", "epoch: 1786994412"} {
		if !strings.Contains(string(recipe), want) {
			t.Errorf("the bumped recipe lacks %q:\n%s", want, recipe)
		}
	}
	if !strings.Contains(stdout, filepath.Join(out, "server.yaml")) {
		t.Errorf("stdout %q does not name the recipe written", stdout)
	}
	src, _, ps := planOf(t, "--recipe", filepath.Join(out, "server.yaml"), "--series", filepath.Join(out, "series"))
	if src.Commit != "ed1c3a20f5e3f0892ac7135d43542815bd7c4aba" || len(ps) < 2 {
		t.Errorf("plan of the copy: %+v with %d patches", src, len(ps))
	}
	if code, _, stderr := runCLI(t, "recipe", "bump", "--out", out, "--source", repo, "--commit", "ed1c3a20f"); code != exitUsage || !strings.Contains(stderr, "exists") {
		t.Errorf("bump --out into an existing directory: exit %d %s", code, stderr)
	}
	// At 3f545becc, upstream's newest reachable commit, the series' 0002 no longer applies.
	gone := filepath.Join(t.TempDir(), "newest")
	code, _, stderr = runCLI(t, "recipe", "bump", "--out", gone, "--source", repo, "--commit", "3f545becc")
	if code != exitFailed || !strings.Contains(stderr, "0002-server-prompt-logprobs.patch does not apply") {
		t.Errorf("bump to 3f545becc: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("a refused bump left %s behind (%v)", gone, err)
	}
}
