package srctree

import (
	"os"
	"path/filepath"
	"testing"
)

// A plain source named through a link (src -> llama.cpp-b1234) hashes as the directory it
// names, never as an empty tree: the hash goes into every plan built from it.
func TestHashOfALinkedSourceIsItsDirectorys(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "llama.cpp-b1234")
	os.MkdirAll(filepath.Join(real, "src"), 0o755)
	os.WriteFile(filepath.Join(real, "src", "llama.cpp"), []byte("int main() {}\n"), 0o644)
	link := filepath.Join(dir, "src")
	os.Symlink("llama.cpp-b1234", link)
	want, err := Hash(real)
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := Hash(t.TempDir())
	if got, err := Hash(link); err != nil || got != want || got == empty {
		t.Errorf("Hash(link) = %s, %v; want the directory's %s (an empty tree is %s)", got, err, want, empty)
	}
}
