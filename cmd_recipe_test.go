package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// The next pin prepared in patches/next/3f545becc: its refreshed series applies at upstream's
// newest reachable commit, where the pinned series' 0002 does not; its recipe plans that commit
// with its build number; and each refreshed patch makes the changes the pinned one makes (the
// same lines added and removed), only at other places.
func TestNextPinSeriesAppliesAtTheNewestUpstream(t *testing.T) {
	repo := upstreamMirror(t)
	next := filepath.Join("patches", "next", "3f545becc")
	code, stdout, stderr := runCLI(t, "patches", "status", "--source", repo, "--commit", "3f545becc", "--series", filepath.Join(next, "series"))
	if code != exitOK || strings.Count(stdout, " applies") != 12 {
		t.Errorf("patches status of the next series at 3f545becc: exit %d, want 0 and 12 patches applying\n%s%s", code, stdout, stderr)
	}
	src, _, ps := planOf(t, "--recipe", filepath.Join(next, "server.yaml"), "--series", filepath.Join(next, "series"))
	if src.Commit != "3f545beccee69d9975f466ec7e45fd9aacd8ba90" || len(ps) != 12 {
		t.Errorf("plan of the next pin: source %+v, %d patches; want 3f545becc and the 12 patches", src, len(ps))
	}
	changes := func(file string) string {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
				lines = append(lines, l[:1]+strings.TrimSpace(l[1:]))
			}
		}
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	pinned, err := filepath.Glob(filepath.Join("patches", "00*.patch"))
	if err != nil || len(pinned) != 12 {
		t.Fatalf("pinned patches %v (%v)", pinned, err)
	}
	for _, p := range pinned {
		if changes(p) != changes(filepath.Join(next, filepath.Base(p))) {
			t.Errorf("%s: the refreshed patch adds or removes other lines than the pinned one", filepath.Base(p))
		}
	}
	// the candidates waiting for their measurement apply there after the series too, each the
	// same change as the pinned series' candidate of its name
	candidates, err := filepath.Glob(filepath.Join(next, "candidates", "*.patch"))
	if err != nil {
		t.Fatal(err)
	}
	withCandidates := t.TempDir()
	b, err := os.ReadFile(filepath.Join(next, "series"))
	if err != nil {
		t.Fatal(err)
	}
	series := string(b)
	for _, f := range append(pinned, candidates...) {
		src := f
		if !slices.Contains(candidates, f) {
			src = filepath.Join(next, filepath.Base(f))
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(withCandidates, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(candidates, f) {
			series += fmt.Sprintf("%s sha256:%x\n", filepath.Base(f), sha256.Sum256(data))
			if changes(f) != changes(filepath.Join("patches", "candidates", filepath.Base(f))) {
				t.Errorf("%s: the next pin's candidate adds or removes other lines than the pin's", filepath.Base(f))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(withCandidates, "series"), []byte(series), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "patches", "status", "--source", repo, "--commit", "3f545becc", "--series", filepath.Join(withCandidates, "series"))
	if want := len(pinned) + len(candidates); code != exitOK || strings.Count(stdout, " applies") != want {
		t.Errorf("patches status of the next series and its candidates at 3f545becc: exit %d, want 0 and %d patches applying\n%s%s", code, want, stdout, stderr)
	}
}
