// Package srctree names a source tree that is not a git checkout by its content, one way for
// every part of llbuild: the provenance of a build from it and patches status of it.
package srctree

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/llbuild/llbuild/internal/digest"
	"github.com/llbuild/llbuild/internal/walkroot"
)

// Hash is the content hash of a source tree that is not a git checkout, as provenance
// records an unverified source: "sha256:" and the sha256 of one record per file, in order of
// slash-separated relative path, each "<mode> <sha256> <path>\x00" where mode is 100644 or
// 100755 for a regular file (the executable bit only, as git keeps it: umasks differ) and
// 120000 for a symbolic link, whose sha256 is of its target. Directories count only through
// their files; .git entries are left out at any depth, as the executors leave them out of the
// build, and so are sockets, devices and pipes.
func Hash(dir string) (string, error) {
	type entry struct{ path, line string }
	var entries []entry
	err := filepath.WalkDir(walkroot.Dir(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		var mode, sum string
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			mode, sum = "120000", digest.SHA256Hex([]byte(target))
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode = "100644"
			if fi.Mode().Perm()&0o111 != 0 {
				mode = "100755"
			}
			if sum, err = fileSHA256(p); err != nil {
				return err
			}
		default:
			return nil
		}
		entries = append(entries, entry{rel, fmt.Sprintf("%s %s %s\x00", mode, sum, rel)})
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing the source tree %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	h := sha256.New()
	for _, e := range entries {
		io.WriteString(h, e.line)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
