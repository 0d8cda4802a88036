package publish

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DigestLines renders successful results as "target<TAB>repo@digest" lines, in result order.
func DigestLines(results []Result) []byte {
	var b strings.Builder
	for _, r := range results {
		if r.Err == nil {
			fmt.Fprintf(&b, "%s\t%s\n", r.Target, r.Ref)
		}
	}
	return []byte(b.String())
}

// WriteFileAtomic writes data to a temporary file beside path, syncs it and renames it into
// place: a reader sees the old file or the whole new one, never a part.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
