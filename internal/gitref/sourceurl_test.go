package gitref

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A lab builds a branch of its fork from a checkout that also tracks upstream: the plan must
// name the fork for the fork's commit and upstream for upstream's, a mirror of the fork the
// fork, and a commit no remote holds upstream (nothing better is known).
func TestSourceURLNamesTheRemoteThatHoldsTheCommit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	up := filepath.Join(root, "upstream")
	os.Mkdir(up, 0o755)
	git(t, up, 0, "init", "--quiet", "--initial-branch=master")
	os.WriteFile(filepath.Join(up, "f"), []byte("1\n"), 0o644)
	git(t, up, 0, "add", "f")
	git(t, up, 1700000000, "commit", "--quiet", "-m", "upstream")
	a := git(t, up, 0, "rev-parse", "HEAD")
	fork := filepath.Join(root, "fork.git")
	git(t, root, 0, "clone", "--quiet", "--bare", up, fork)
	work := filepath.Join(root, "work")
	git(t, root, 0, "clone", "--quiet", fork, work)
	git(t, work, 0, "remote", "add", "upstream", "https://user:secret@example.invalid/upstream.git/")
	git(t, work, 0, "update-ref", "refs/remotes/upstream/master", a)
	os.WriteFile(filepath.Join(work, "f"), []byte("2\n"), 0o644)
	git(t, work, 1700000100, "commit", "--quiet", "-am", "the fork's change")
	git(t, work, 0, "push", "--quiet", "origin", "master:feature")
	git(t, work, 0, "fetch", "--quiet", "origin")
	b := git(t, work, 0, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(work, "f"), []byte("3\n"), 0o644)
	git(t, work, 1700000200, "commit", "--quiet", "-am", "not pushed")
	c := git(t, work, 0, "rev-parse", "HEAD")
	mirror := filepath.Join(root, "mirror.git")
	git(t, root, 0, "clone", "--quiet", "--mirror", fork, mirror)

	recipe := "https://example.invalid/upstream"
	for _, tc := range []struct {
		name, repo, commit, want string
	}{
		{"upstream's commit, held by both remotes", work, a, recipe},
		{"the fork's commit", work, b, fork},
		{"a commit no remote holds", work, c, recipe},
		{"the fork's commit in a mirror of the fork", mirror, b, fork},
		{"a repository without remotes", up, a, recipe},
	} {
		if got := SourceURL(ctx, tc.repo, tc.commit, recipe); got != tc.want {
			t.Errorf("%s: SourceURL() = %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, tc := range [][2]string{
		{"git@github.com:ggml-org/llama.cpp.git", "https://github.com/ggml-org/llama.cpp"},
		{"https://tok@GitHub.com/ggml-org/llama.cpp/", "https://github.com/ggml-org/llama.cpp.git"},
	} {
		if !sameRepoURL(tc[0], tc[1]) {
			t.Errorf("sameRepoURL(%s, %s) = false", tc[0], tc[1])
		}
	}
	if sameRepoURL("https://github.com/me/llama.cpp", "https://github.com/ggml-org/llama.cpp") {
		t.Error("a fork and upstream compare as one repository")
	}
	if got := redactURL("https://user:secret@example.invalid/x"); got != "https://***@example.invalid/x" {
		t.Errorf("redactURL() = %q", got)
	}
}
