package cmdutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CheckOutputFile checks, before any work, that FILE given to flag can take what a command will
// write there at the end (an image archive, a digest list): its directory exists, it is not a
// directory, it is not one of inputs (flag name → path: what the command reads), and it is
// replaced only with force. Each refusal is a usage error saying what to do, so that a build of
// half an hour does not end in "no such directory", or write over its own base image.
func CheckOutputFile(flag, file string, force bool, inputs map[string]string) error {
	if file == "" {
		return nil
	}
	dir := filepath.Dir(file)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Usagef("%s %s: the directory %s does not exist; make it first", flag, file, dir)
	}
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return Usagef("%s %s: %v", flag, file, err)
	}
	for in, path := range inputs {
		if ii, err := os.Stat(path); err == nil && os.SameFile(fi, ii) {
			return Usagef("%s %s is %s, which this command reads: write it elsewhere", flag, file, in)
		}
	}
	switch {
	case fi.IsDir():
		return Usagef("%s %s is a directory; give a file", flag, file)
	case !fi.Mode().IsRegular():
		// a rename over it would replace the device (/dev/null as root) or pipe itself
		return Usagef("%s %s is not a regular file (a device, pipe or socket); --force replaces only a file: write to a file", flag, file)
	case !force:
		return Usagef("%s %s exists; give --force to replace it", flag, file)
	}
	return nil
}

// CheckOutputLayout checks, as CheckOutputFile does, a directory a command will fill with an OCI
// layout: its parent exists, it is not a file, and a directory that already holds anything is
// replaced only with force, and only when it is an OCI layout (an oci-layout file), never a
// directory of the user's own files.
func CheckOutputLayout(flag, dir string, force bool) error {
	clean := filepath.Clean(strings.TrimSuffix(dir, "/"))
	if fi, err := os.Stat(filepath.Dir(clean)); err != nil || !fi.IsDir() {
		return Usagef("%s %s: the directory %s does not exist; make it first", flag, dir, filepath.Dir(clean))
	}
	fi, err := os.Stat(clean)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return Usagef("%s %s: %v", flag, dir, err)
	}
	if !fi.IsDir() {
		return Usagef("%s %s is a file; a path ending in / names a directory for an OCI layout", flag, dir)
	}
	entries, err := os.ReadDir(clean)
	if err != nil {
		return Usagef("%s %s: %v", flag, dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(clean, "oci-layout")); err != nil {
		return Usagef("%s %s holds files and is no OCI layout: give an empty or new directory", flag, dir)
	}
	if !force {
		return Usagef("%s %s holds an OCI layout; give --force to replace it", flag, dir)
	}
	return nil
}
