package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// upstreamChild makes a commit after the pin in repo (upstreamMirror's), as upstream's next
// commit would be: the history here ends at the pin, 3f545becc, so a test that moves the pin
// forward needs one. It has the pin's tree (so the pinned series applies there) and fixed
// names and times, so its hash is the same in every run; committed at childEpoch.
func upstreamChild(t *testing.T, repo string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", repo, "commit-tree", "-p", "3f545becc", "-m", "upstream's next commit (made by llbuild's tests)", "3f545becc^{tree}")
	stamp := fmt.Sprintf("@%d +0000", childEpoch)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=llbuild", "GIT_AUTHOR_EMAIL=tests@llbuild.invalid", "GIT_AUTHOR_DATE="+stamp,
		"GIT_COMMITTER_NAME=llbuild", "GIT_COMMITTER_EMAIL=tests@llbuild.invalid", "GIT_COMMITTER_DATE="+stamp)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("a commit after 3f545becc in %s: %v", repo, err)
	}
	return strings.TrimSpace(string(out))
}

// childEpoch is upstreamChild's committer time: a day after the pin's (1787427740).
const childEpoch = 1787514140

// recipe bump --out moves a copy of the built-in recipe and series, outside llbuild's tree:
// the pin's build number counted in a shallow mirror from the built-in pin, the copy usable by
// plan --recipe --series; a series that does not apply writes nothing, not even the directory.
func TestRecipeBumpOutMovesACopy(t *testing.T) {
	repo := upstreamMirror(t)
	// the first commit after the pin 3f545becc (b10587)
	child := upstreamChild(t, repo)
	out := filepath.Join(t.TempDir(), "pin")
	code, stdout, stderr := runCLI(t, "recipe", "bump", "--out", out, "--source", repo, "--commit", child[:9])
	if code != exitOK {
		t.Fatalf("recipe bump --out: exit %d\n%s", code, stderr)
	}
	recipe, err := os.ReadFile(filepath.Join(out, "server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"commit: " + child, "buildNumber: 10588", fmt.Sprintf("epoch: %d", childEpoch)} {
		if !strings.Contains(string(recipe), want) {
			t.Errorf("the bumped recipe lacks %q:\n%s", want, recipe)
		}
	}
	if !strings.Contains(stdout, filepath.Join(out, "server.yaml")) {
		t.Errorf("stdout %q does not name the recipe written", stdout)
	}
	src, _, ps := planOf(t, "--recipe", filepath.Join(out, "server.yaml"), "--series", filepath.Join(out, "series"))
	if src.Commit != child || len(ps) < 2 {
		t.Errorf("plan of the copy: %+v with %d patches", src, len(ps))
	}
	if code, _, stderr := runCLI(t, "recipe", "bump", "--out", out, "--source", repo, "--commit", child[:9]); code != exitUsage || !strings.Contains(stderr, "exists") {
		t.Errorf("bump --out into an existing directory: exit %d %s", code, stderr)
	}
	// At 34af94cd9, the pin before, the series' 0002 does not apply: it was refreshed for
	// upstream's move of /props into get_res_props.
	gone := filepath.Join(t.TempDir(), "older")
	code, _, stderr = runCLI(t, "recipe", "bump", "--out", gone, "--source", repo, "--commit", "34af94cd9")
	if code != exitFailed || !strings.Contains(stderr, "0002-server-prompt-logprobs.patch does not apply") {
		t.Errorf("bump to 34af94cd9: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("a refused bump left %s behind (%v)", gone, err)
	}
	// what the user named that is not there, or not what it must be, is usage (exit 2), and
	// nothing is made
	file := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	emptySeries := filepath.Join(t.TempDir(), "series")
	os.WriteFile(emptySeries, nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", file}, "is not a directory"},
		{[]string{"--source", repo, "--new-series", filepath.Join(t.TempDir(), "none")}, "--new-series"},
		{[]string{"--source", repo, "--new-series", t.TempDir()}, "give a series file"},
		{[]string{"--source", repo, "--new-series", emptySeries}, "names no patches: the bump would drop all"},
	} {
		args := append([]string{"recipe", "bump", "--out", gone, "--commit", child[:9]}, tc.args...)
		if code, _, stderr := runCLI(t, args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("llbuild %v: exit %d %s, want 2 saying %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("a refused bump %v left %s behind (%v)", tc.args, gone, err)
		}
	}
}

// The pin's series and the series recorded for the pin before it (patches/34af94cd9/, by
// recipe bump --new-series): each applies at its own commit in upstream's history, the
// recorded recipe plans its commit with its build number, and each pinned patch makes the
// changes its recorded predecessor made (the same lines added and removed), only at other
// places: refreshing moved the patches, it did not change them.
func TestPinnedSeriesIsTheRecordedOneRefreshed(t *testing.T) {
	repo := upstreamMirror(t)
	prev := filepath.Join("patches", "34af94cd9")
	// the built-in series' length is its file's (a candidate joining adds a line, not a number here)
	series, err := os.ReadFile(filepath.Join("patches", "series"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(regexp.MustCompile(`(?m)^[0-9]{4}-\S+\.patch `).FindAll(series, -1))
	if n < 13 {
		t.Fatalf("patches/series lists %d patches, want at least the 13 of 2026-12-07", n)
	}
	for _, at := range []struct {
		commit, series string
		n              int
	}{{"3f545becc", filepath.Join("patches", "series"), n}, {"34af94cd9", filepath.Join(prev, "series"), 12}} {
		code, stdout, stderr := runCLI(t, "patches", "status", "--source", repo, "--commit", at.commit, "--series", at.series)
		if code != exitOK || strings.Count(stdout, " applies") != at.n {
			t.Errorf("patches status of %s at %s: exit %d, want 0 and %d patches applying\n%s%s", at.series, at.commit, code, at.n, stdout, stderr)
		}
	}
	src, configure, ps := planOf(t, "--recipe", filepath.Join(prev, "server.yaml"), "--series", filepath.Join(prev, "series"))
	if src.Commit != "34af94cd9ab277632e27caeec2d41de2fd091b31" || buildNumberArg(configure) != "10470" || len(ps) != 12 {
		t.Errorf("plan of the recorded pin: source %+v, %d patches; want 34af94cd9 (b10470) and the 12 patches", src, len(ps))
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
	if err != nil || len(pinned) != n {
		t.Fatalf("pinned patches %v (%v), want the series' %d", pinned, err, n)
	}
	// a patch written at 3f545becc, after the move (0013 on), has no predecessor at 34af94cd9;
	// each of the recorded pin's 12 has its refreshed self
	compared := 0
	for _, p := range pinned {
		before := filepath.Join(prev, filepath.Base(p))
		if _, err := os.Stat(before); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		compared++
		if changes(p) != changes(before) {
			t.Errorf("%s: the pinned patch adds or removes other lines than 34af94cd9's", filepath.Base(p))
		}
	}
	if compared != 12 {
		t.Errorf("%d of the recorded pin's 12 patches have a refreshed self in patches/", compared)
	}
}
