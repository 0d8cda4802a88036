package hostexec

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/pipeline"
)

// Reads lists the files of the source tree that the build of p in this executor's work
// directory read, relative to the source root, sorted (pipeline.ParseReads says which). The
// build tree must still be there: a build made on another machine, or one that failed before
// ninja ran, has none.
func (e *Executor) Reads(ctx context.Context, p *pipeline.Plan) ([]string, error) {
	root := e.root(p)
	return readSet(ctx, filepath.Join(root, "build"), filepath.Join(root, "src"))
}

func readSet(ctx context.Context, build, src string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(build, "build.ninja")); err != nil {
		return nil, fmt.Errorf("no build tree in %s: %w", build, err)
	}
	if _, err := exec.LookPath("ninja"); err != nil {
		return nil, fmt.Errorf("reading what the build read: %w", err)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", pipeline.ReadsScript, "reads", build)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing what the build in %s read: %v: %s", build, err, strings.TrimSpace(errb.String()))
	}
	srcReal, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nil, err
	}
	return pipeline.ParseReads(out, build, src, srcReal)
}
