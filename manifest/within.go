package manifest

import (
	"path/filepath"
	"strings"
)

// Within says whether p is root or lies under it, each taken absolute and with its links
// resolved as far as they exist: the one test of "would replacing root touch p" that bundle's
// -o, verify's --extract and bench's --dir make.
func Within(p, root string) bool {
	p, root = resolved(p), resolved(root)
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// resolved is p made absolute, its links resolved where it exists.
func resolved(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}
