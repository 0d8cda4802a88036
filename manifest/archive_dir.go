package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// OpenDir returns the directory of a bundle named on a command line: the directory itself, or
// an archive (.tar.zst, .tar.gz) checked and unpacked into a temporary directory that cleanup
// removes. Its errors are the caller's input's fault.
func OpenDir(ctx context.Context, name string) (dir string, cleanup func(), err error) {
	fi, err := os.Stat(name)
	if err != nil {
		return "", nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	if fi.IsDir() {
		return name, func() {}, nil
	}
	if _, err := ArchiveCompression(name); err != nil {
		return "", nil, fmt.Errorf("%s is neither a bundle directory nor a bundle archive (.tar.zst, .tar.gz)", name)
	}
	tmp, err := os.MkdirTemp("", "llbuild-bundle-")
	if err != nil {
		return "", nil, err
	}
	dir = filepath.Join(tmp, "bundle")
	if err := ExtractArchive(ctx, name, dir, false); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(tmp) }, nil
}
