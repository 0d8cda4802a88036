package walkroot

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestDirFollowsALinkedRootOnly(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.MkdirAll(filepath.Join(real, "sub"), 0o755)
	os.WriteFile(filepath.Join(real, "sub", "f"), []byte("x"), 0o644)
	os.Symlink(dir, filepath.Join(real, "up")) // a link below the root stays a link
	link := filepath.Join(dir, "latest")
	os.Symlink("real", link)
	var got []string
	filepath.WalkDir(Dir(link), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(link, p)
			got = append(got, rel)
		}
		return nil
	})
	if len(got) != 2 || got[0] != filepath.Join("sub", "f") || got[1] != "up" {
		t.Errorf("a walk of a linked root found %q, want sub/f and the link up (not followed)", got)
	}
	for _, p := range []string{real, filepath.Join(real, "sub", "f"), filepath.Join(dir, "none"), link + "/"} {
		if Dir(p) != p {
			t.Errorf("Dir(%s) = %s, want it as given", p, Dir(p))
		}
	}
}
