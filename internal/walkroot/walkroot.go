// Package walkroot makes a directory named through a symbolic link walkable: filepath.Walk
// and WalkDir do not follow links, the root's included, so `out/latest -> out/cpu-v3/HASH`
// read as one entry, a link, and the directory looked empty.
package walkroot

import (
	"os"
	"strings"
)

// Dir is root, with a path separator appended when root is a symbolic link to a directory, so
// that a walk of it follows that one link (and, as before, no link below it); entries are
// still named under root as the user wrote it.
func Dir(root string) string {
	if strings.HasSuffix(root, string(os.PathSeparator)) {
		return root
	}
	if fi, err := os.Lstat(root); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return root
	}
	if fi, err := os.Stat(root); err == nil && fi.IsDir() {
		return root + string(os.PathSeparator)
	}
	return root
}
