package gitref

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A lab builds a branch of its fork from a checkout that also tracks upstream: the plan names
// the fork (as https) for the fork's commit and upstream for upstream's. Where nothing says
// upstream lacks the commit (no remote of upstream's repository; a local path; a commit no
// remote holds), the recipe's URL stays, so that the plan's hash does not depend on where the
// commit was resolved.
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
	os.WriteFile(filepath.Join(work, "f"), []byte("2\n"), 0o644)
	git(t, work, 1700000100, "commit", "--quiet", "-am", "the fork's change")
	git(t, work, 0, "push", "--quiet", "origin", "master:feature")
	git(t, work, 0, "fetch", "--quiet", "origin")
	b := git(t, work, 0, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(work, "f"), []byte("3\n"), 0o644)
	git(t, work, 1700000200, "commit", "--quiet", "-am", "not pushed")
	c := git(t, work, 0, "rev-parse", "HEAD")
	// the fork as the forge serves it (fetched from the local copy above), and no upstream yet
	git(t, work, 0, "remote", "set-url", "origin", "git@github.com:me/llama.cpp.git")
	recipe := "https://github.com/ggml-org/llama.cpp"
	if got := SourceURL(ctx, work, b, recipe); got != recipe {
		t.Errorf("no remote of upstream's: SourceURL() = %q, want the recipe's", got)
	}
	git(t, work, 0, "remote", "add", "upstream", "https://user:secret@GitHub.com/ggml-org/llama.cpp.git/")
	git(t, work, 0, "update-ref", "refs/remotes/upstream/master", a)
	pathFork := filepath.Join(root, "pathfork")
	git(t, root, 0, "clone", "--quiet", fork, pathFork)
	git(t, pathFork, 0, "remote", "add", "upstream", recipe)
	git(t, pathFork, 0, "update-ref", "refs/remotes/upstream/master", a)
	for _, tc := range []struct {
		name, repo, commit, want string
	}{
		{"upstream's commit, held by both remotes", work, a, recipe},
		{"the fork's commit", work, b, "https://github.com/me/llama.cpp.git"},
		{"a commit no remote holds", work, c, recipe},
		{"the fork's commit, the fork a local path", pathFork, b, recipe},
		{"a repository without remotes", up, a, recipe},
	} {
		if got := SourceURL(ctx, tc.repo, tc.commit, recipe); got != tc.want {
			t.Errorf("%s: SourceURL() = %q, want %q", tc.name, got, tc.want)
		}
	}
	for in, want := range map[string]string{
		"https://tok@example.org/x/y":          "https://tok@example.org/x/y",
		"git@github.com:me/llama.cpp.git":      "https://github.com/me/llama.cpp.git",
		"ssh://git@github.com:22/me/llama.cpp": "https://github.com/me/llama.cpp",
		"/srv/mirror.git":                      "",
		"file:///srv/mirror.git":               "",
		"http://example.org/x":                 "",
	} {
		if got := httpsURL(in); got != want {
			t.Errorf("httpsURL(%q) = %q, want %q", in, got, want)
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
