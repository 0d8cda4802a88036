package pipeline

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ReadsScript prints what a build in the ninja build directory given as $1 read, for
// ParseReads: every compiler's recorded dependencies (ninja's deps log), a separator line, then
// the explicit inputs of every edge and of build.ninja's own rule (ninja 1.11's -t inputs:
// embedded assets, the CMake files the configuration read).
const ReadsScript = `ninja -C "$1" -t deps && echo ` + readsSeparator + ` && ninja -C "$1" -t inputs all build.ninja`

const readsSeparator = "@@llbuild-inputs@@"

// ParseReads turns ReadsScript's output for the build directory build into the files of the
// source tree it names, relative to the source root (any of roots: a directory and its real
// path), sorted. Without -t inputs the explicit inputs are unknown, and a set without them would
// call a change to an embedded asset or a CMake file inert: such output is an error.
func ParseReads(out []byte, build string, roots ...string) ([]string, error) {
	deps, inputs, ok := bytes.Cut(out, []byte(readsSeparator+"\n"))
	if !ok {
		return nil, fmt.Errorf("reading what the build read: no explicit inputs (ninja -t inputs, ninja 1.11 or newer)")
	}
	seen := map[string]bool{}
	add := func(name string) {
		name = strings.TrimSpace(name)
		if name == "" {
			return
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(build, name)
		}
		name = filepath.Clean(name)
		for _, root := range roots {
			if rel, err := filepath.Rel(root, name); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				seen[filepath.ToSlash(rel)] = true
				return
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(deps))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		// "target: #deps N, deps mtime M (VALID)" heads each object's list of indented paths
		if line := sc.Text(); strings.HasPrefix(line, " ") {
			add(line)
		}
	}
	for _, line := range strings.Split(string(inputs), "\n") {
		add(line)
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("ninja in %s names no file of %s: not a build of that tree", build, roots[0])
	}
	files := make([]string, 0, len(seen))
	for f := range seen {
		files = append(files, f)
	}
	slices.Sort(files)
	return files, nil
}
