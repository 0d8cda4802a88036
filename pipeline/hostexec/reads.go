package hostexec

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/llbuild/llbuild/pipeline"
)

// Reads lists the files of the source tree that the build of p in this executor's work
// directory read, relative to the source root, sorted: every compiler's recorded dependencies
// (sources and headers, from ninja's deps log), the explicit inputs of every edge (embedded
// assets among them) and the CMake files the configuration read (the inputs of build.ninja's
// own rule). The build tree must still be there: a build made on another machine, or one that
// failed before ninja ran, has none.
func (e *Executor) Reads(ctx context.Context, p *pipeline.Plan) ([]string, error) {
	root := e.root(p)
	return readSet(ctx, filepath.Join(root, "build"), filepath.Join(root, "src"))
}

func readSet(ctx context.Context, build, src string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(build, "build.ninja")); err != nil {
		return nil, fmt.Errorf("no build tree in %s: %w", build, err)
	}
	ninja, err := exec.LookPath("ninja")
	if err != nil {
		return nil, fmt.Errorf("reading what the build read: %w", err)
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, ninja, append([]string{"-C", build}, args...)...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("ninja %s in %s: %v: %s", strings.Join(args, " "), build, err, strings.TrimSpace(errb.String()))
		}
		return out, nil
	}
	deps, err := run("-t", "deps")
	if err != nil {
		return nil, err
	}
	// -t inputs (ninja 1.11): without it the explicit inputs are unknown, and a set without
	// them would call a change to an embedded asset or a CMake file inert
	inputs, err := run("-t", "inputs", "all", "build.ninja")
	if err != nil {
		return nil, err
	}
	srcReal, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nil, err
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
		for _, root := range []string{src, srcReal} {
			if name != root && within(name, root) {
				rel, _ := filepath.Rel(root, name)
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
		return nil, fmt.Errorf("ninja in %s names no file of %s: not a build of that tree", build, src)
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	slices.Sort(out)
	return out, nil
}
