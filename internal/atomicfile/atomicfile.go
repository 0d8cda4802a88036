// Package atomicfile writes files and replaces directories so that a reader sees the old
// version or the whole new one, never a part.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to a temporary file beside path, syncs it, gives it mode and renames
// it into place, then syncs the directory.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// WriteThrough is WriteFile for a file the user keeps, which may be a symbolic link (a recipe
// or series linked in from a dotfiles or lab repository): a link is followed, dangling or not,
// and its target replaced, so the link stays a link. An existing target keeps its permission
// bits; a new one gets mode.
func WriteThrough(path string, data []byte, mode os.FileMode) error {
	target, err := Resolve(path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	return WriteFile(target, data, mode)
}

// Resolve follows path's symbolic links, the last element's first, to the file they name
// (WriteThrough's target), whether it exists or not: path itself where it is no link. The
// directories above are left as given.
func Resolve(path string) (string, error) {
	for range 40 {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			// relative to the directory the link is in, as the kernel finds it: through
			// the links above it (recipes -> lab/llbuild/recipes, then ../shared/...)
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return "", err
			}
			dest = filepath.Join(dir, dest)
		}
		path = dest
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// WriteNew creates path, which must not exist, writes data and syncs it: for files of a
// directory that is built aside and then renamed into place whole (ReplaceDir).
func WriteNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReplaceDir renames the complete directory tmp to dest. rename(2) does not replace a
// non-empty directory, so an existing dest is first moved aside (into a fresh directory
// beside it) and removed only once tmp is in place; if that rename fails, dest is put back.
func ReplaceDir(tmp, dest string) error {
	if _, err := os.Lstat(dest); err != nil {
		if err := os.Rename(tmp, dest); err != nil {
			return fmt.Errorf("moving %s into place: %w", dest, err)
		}
		return nil
	}
	old, err := os.MkdirTemp(filepath.Dir(dest), ".llbuild-old-")
	if err != nil {
		return fmt.Errorf("moving the previous %s aside: %w", dest, err)
	}
	aside := filepath.Join(old, filepath.Base(dest))
	if err := os.Rename(dest, aside); err != nil {
		os.Remove(old)
		return fmt.Errorf("moving the previous %s aside: %w", dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		_ = os.Rename(aside, dest)
		os.Remove(old)
		return fmt.Errorf("moving %s into place: %w", dest, err)
	}
	return os.RemoveAll(old)
}

// SyncTree fsyncs every directory under root (files are synced as they are written), so a
// rename that follows cannot expose entries that are not on disk.
func SyncTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return SyncDir(p)
	})
}

// SyncDir fsyncs one directory (or file).
func SyncDir(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
