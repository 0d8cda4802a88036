package pipeline

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTreeHash(t *testing.T) {
	write := func(dir, name, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	tree := func(change func(dir string)) string {
		t.Helper()
		dir := t.TempDir()
		write(dir, "CMakeLists.txt", "project(x)\n", 0o644)
		write(dir, "src/a.c", "int a;\n", 0o644)
		write(dir, "scripts/run.sh", "#!/bin/sh\n", 0o755)
		if err := os.Symlink("a.c", filepath.Join(dir, "src", "b.c")); err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(dir)
		}
		h, err := TreeHash(dir)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := tree(nil)
	if len(base) != len("sha256:")+64 {
		t.Fatalf("TreeHash() = %q, want sha256:<64 hex>", base)
	}
	same := []struct {
		name   string
		change func(dir string)
	}{
		{"a .git directory is left out", func(dir string) { write(dir, ".git/HEAD", "ref: refs/heads/main\n", 0o644) }},
		{"only the executable bit of a mode counts", func(dir string) { os.Chmod(filepath.Join(dir, "src", "a.c"), 0o664) }},
		{"an empty directory does not count", func(dir string) { os.Mkdir(filepath.Join(dir, "empty"), 0o755) }},
	}
	for _, tt := range same {
		if got := tree(tt.change); got != base {
			t.Errorf("%s: TreeHash() = %s, want %s", tt.name, got, base)
		}
	}
	differ := []struct {
		name   string
		change func(dir string)
	}{
		{"a file's contents", func(dir string) { write(dir, "src/a.c", "int b;\n", 0o644) }},
		{"a file's executable bit", func(dir string) { os.Chmod(filepath.Join(dir, "src", "a.c"), 0o755) }},
		{"a file's name", func(dir string) { os.Rename(filepath.Join(dir, "src", "a.c"), filepath.Join(dir, "src", "c.c")) }},
		{"a link's target", func(dir string) {
			os.Remove(filepath.Join(dir, "src", "b.c"))
			os.Symlink("CMakeLists.txt", filepath.Join(dir, "src", "b.c"))
		}},
		{"a new file", func(dir string) { write(dir, "new.h", "", 0o644) }},
	}
	for _, tt := range differ {
		if got := tree(tt.change); got == base {
			t.Errorf("changing %s leaves TreeHash() at %s", tt.name, got)
		}
	}
}
