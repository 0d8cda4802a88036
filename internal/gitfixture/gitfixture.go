// Package gitfixture makes git repositories of the fake llama.cpp tree
// (pipeline/testdata/fakellama) for tests of commands that follow upstream's history.
package gitfixture

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Repo is a repository the test made, and the commits it holds.
type Repo struct {
	Dir string
	// Old is the fixture tree as it is; New is Old plus the change of UpstreamPatch, as if
	// upstream had merged it.
	Old, New string
	// OldTime and NewTime are the commits' committer times (Unix seconds).
	OldTime, NewTime int64
}

// UpstreamPatch is the fixture patch whose change New contains.
const UpstreamPatch = "0001-server-greeting.patch"

// Root is the llbuild repository's root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// PatchDir holds the fixture patches.
func PatchDir() string { return filepath.Join(Root(), "pipeline", "testdata", "patches") }

// New makes the repository: the fixture tree committed at OldTime, then UpstreamPatch
// applied and committed at NewTime. It fails the test when git is missing.
func New(t testing.TB) *Repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	r := &Repo{Dir: filepath.Join(t.TempDir(), "llama.cpp"), OldTime: 1700000000, NewTime: 1700086400}
	if err := os.CopyFS(r.Dir, os.DirFS(filepath.Join(Root(), "pipeline", "testdata", "fakellama"))); err != nil {
		t.Fatal(err)
	}
	Git(t, r.Dir, 0, "init", "--quiet", "--initial-branch=master")
	Git(t, r.Dir, 0, "add", "-A")
	Git(t, r.Dir, r.OldTime, "commit", "--quiet", "-m", "old")
	r.Old = Git(t, r.Dir, 0, "rev-parse", "HEAD")
	Git(t, r.Dir, 0, "apply", filepath.Join(PatchDir(), UpstreamPatch))
	Git(t, r.Dir, r.NewTime, "commit", "--quiet", "-am", "upstream merges the greeting")
	r.New = Git(t, r.Dir, 0, "rev-parse", "HEAD")
	return r
}

// Git runs git in dir with a fixed identity (and, when when > 0, fixed dates) and returns its
// trimmed output, failing the test on an error.
func Git(t testing.TB, dir string, when int64, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	if when > 0 {
		d := "@" + strconv.FormatInt(when, 10) + " +0000"
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_DATE="+d, "GIT_COMMITTER_DATE="+d)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
