package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
)

// The tree written is the commit's, less a file whose blob the repository lacks and the files
// -exclude matches; the rest byte for byte.
func TestTreeLeavesOutMissingBlobsAndExcludedFiles(t *testing.T) {
	r := gitfixture.New(t)
	for name, data := range map[string]string{"models/a.gguf": "vocab a\n", "models/a.gguf.inp": "inputs\n", "models/b.gguf": "vocab b\n", "models/README.md": "models\n"} {
		p := filepath.Join(r.Dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitfixture.Git(t, r.Dir, 0, "add", "-A")
	gitfixture.Git(t, r.Dir, r.NewTime+60, "commit", "--quiet", "-m", "vocabularies")
	// b.gguf's blob goes, as the history in ../shared lacks its vocabulary files' blobs
	blob := gitfixture.Git(t, r.Dir, 0, "rev-parse", "HEAD:models/b.gguf")
	if err := os.Remove(filepath.Join(r.Dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatalf("removing a blob (the fixture's objects should be loose): %v", err)
	}

	out := filepath.Join(t.TempDir(), "src")
	if err := run(context.Background(), r.Dir, "HEAD", "models/*.gguf*", out); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"models/a.gguf", "models/a.gguf.inp", "models/b.gguf"} {
		if _, err := os.Stat(filepath.Join(out, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is in the tree (%v), want it left out", gone, err)
		}
	}
	for _, kept := range []string{"models/README.md", "CMakeLists.txt"} {
		want, err := os.ReadFile(filepath.Join(r.Dir, kept))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(out, kept)); err != nil || string(got) != string(want) {
			t.Errorf("%s: %q (%v), want the commit's %q", kept, got, err, want)
		}
	}

	// without -exclude, only the missing blob is left out
	all := filepath.Join(t.TempDir(), "src")
	if err := run(context.Background(), r.Dir, "HEAD", "", all); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(all, "models", "a.gguf")); err != nil {
		t.Errorf("without -exclude, models/a.gguf: %v", err)
	}
	if _, err := os.Stat(filepath.Join(all, "models", "b.gguf")); !os.IsNotExist(err) {
		t.Errorf("models/b.gguf, whose blob is missing: %v, want it left out", err)
	}
}
