package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesWholeAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	entries, _ := os.ReadDir(dir)
	if string(got) != "new" || st.Mode().Perm() != 0o644 || len(entries) != 1 {
		t.Errorf("WriteFile() left %q mode %v and %d entries, want \"new\", 0644, 1", got, st.Mode().Perm(), len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("WriteFile() into a missing directory succeeded")
	}
}

func TestReplaceDir(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "out")
	mk := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "file"), []byte(content), 0o644)
		return p
	}
	if err := ReplaceDir(mk("tmp1", "one"), dest); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceDir(mk("tmp2", "two"), dest); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dest, "file"))
	entries, _ := os.ReadDir(dir)
	if string(got) != "two" || len(entries) != 1 {
		t.Errorf("after two replacements: %q and %d entries in the parent, want \"two\" and 1", got, len(entries))
	}
	if err := ReplaceDir(filepath.Join(dir, "nope"), dest); err == nil {
		t.Error("ReplaceDir() of a missing tmp succeeded")
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "file")); string(got) != "two" {
		t.Errorf("a failed replacement lost the previous dest: %q", got)
	}
	if err := SyncTree(dest); err != nil {
		t.Error(err)
	}
}

// A file kept as a link (a recipe linked in from a lab's repository) stays a link: its target
// is replaced, keeping its permission bits, through a chain of links and a dangling one.
func TestWriteThroughKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "lab"), 0o755)
	target := filepath.Join(dir, "lab", "server.yaml")
	os.WriteFile(target, []byte("old"), 0o600)
	os.Symlink("lab/server.yaml", filepath.Join(dir, "mid"))
	link := filepath.Join(dir, "recipe.yaml")
	os.Symlink(filepath.Join(dir, "mid"), link)
	if err := WriteThrough(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(target)
	st, _ := os.Stat(target)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 || string(got) != "new" || st.Mode().Perm() != 0o600 {
		t.Errorf("WriteThrough() left the link %v (%v) and its target %q mode %v, want a link and \"new\" mode 0600", fi, err, got, st.Mode().Perm())
	}
	dangling := filepath.Join(dir, "series")
	os.Symlink("lab/series", dangling)
	if err := WriteThrough(dangling, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "lab", "series")); string(got) != "s" {
		t.Errorf("WriteThrough() of a dangling link wrote %q at its target, want \"s\"", got)
	}
	loop := filepath.Join(dir, "loop")
	os.Symlink("loop", loop)
	if err := WriteThrough(loop, []byte("x"), 0o644); err == nil {
		t.Error("WriteThrough() of a link to itself succeeded")
	}
	plain := filepath.Join(dir, "plain")
	if err := WriteThrough(plain, []byte("p"), 0o640); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(plain); st == nil || st.Mode().Perm() != 0o640 {
		t.Errorf("WriteThrough() of a new file gave it %v, want 0640", st)
	}
}

// A relative link is followed from the directory it is in as the kernel finds that directory:
// through a link above it (work/recipes -> lab/llbuild/recipes, its server.yaml ->
// ../shared/server.yaml names lab/llbuild/shared/server.yaml, not work/shared/server.yaml).
func TestWriteThroughFollowsDotDotAsTheKernelDoes(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "lab", "llbuild", "recipes"), 0o755)
	os.MkdirAll(filepath.Join(dir, "lab", "llbuild", "shared"), 0o755)
	os.MkdirAll(filepath.Join(dir, "work"), 0o755)
	real := filepath.Join(dir, "lab", "llbuild", "shared", "server.yaml")
	os.WriteFile(real, []byte("old"), 0o644)
	os.Symlink("../shared/server.yaml", filepath.Join(dir, "lab", "llbuild", "recipes", "server.yaml"))
	os.Symlink(filepath.Join(dir, "lab", "llbuild", "recipes"), filepath.Join(dir, "work", "recipes"))
	link := filepath.Join(dir, "work", "recipes", "server.yaml")
	if b, err := os.ReadFile(link); err != nil || string(b) != "old" {
		t.Fatalf("the fixture does not read through: %q %v", b, err)
	}
	if err := WriteThrough(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(real); string(b) != "new" {
		t.Errorf("the file the link names holds %q, want \"new\"", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "work", "shared")); err == nil {
		t.Error("WriteThrough wrote beside the link's textual path")
	}
}
