package daggerexec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"dagger.io/dagger"
)

// tailLines is how many of a failed command's last lines an error carries.
const tailLines = 20

// ErrNoEngine is returned (wrapped) when no Dagger engine is reachable.
var ErrNoEngine = errors.New("no Dagger engine reachable")

// PatchError is a patch that did not apply in the engine.
type PatchError struct {
	Patch string
	Hunks []string
	Tail  string
}

func (e *PatchError) Error() string {
	what := "it does not apply"
	if len(e.Hunks) > 0 {
		what = "hunk at " + strings.Join(e.Hunks, ", hunk at ") + " does not apply"
	}
	return fmt.Sprintf("patch %s does not apply: %s; git apply said:\n%s", e.Patch, what, e.Tail)
}

// ExecError is a command that failed in the engine, with the tail of its output.
type ExecError struct {
	Cmd      []string
	ExitCode int
	Tail     string
	// Engine is the engine's own message when the command did not run (exit code -1: the
	// container could not start).
	Engine string
}

func (e *ExecError) Error() string {
	if e.ExitCode < 0 && strings.TrimSpace(e.Tail) == "" {
		return fmt.Sprintf("%s did not start in the engine (its container could not run): %s; the engine's log says more", strings.Join(e.Cmd, " "), e.Engine)
	}
	return fmt.Sprintf("%s exited with %d in the engine; last lines of its output:\n%s\n(its full output is in the engine's progress log, which llbuild build writes to stderr; under `dagger run`, in dagger's own view)", strings.Join(e.Cmd, " "), e.ExitCode, e.Tail)
}

var hunkFailed = regexp.MustCompile(`(?m)^error: patch failed: (.+):(\d+)$`)

// engineError turns the engine's exec errors into llbuild's: the failed command, its exit
// code and the last lines of its output; a patch exec becomes a PatchError.
func (s *state) engineError(err error) error {
	var ee *dagger.ExecError
	if !errors.As(err, &ee) {
		return s.fetchError(err)
	}
	out := strings.TrimRight(ee.Stdout, "\n")
	if ee.Stderr != "" {
		if out != "" {
			out += "\n"
		}
		out += strings.TrimRight(ee.Stderr, "\n")
	}
	tail := lastLines(out, tailLines)
	if name, ok := s.patchExecs[strings.Join(ee.Cmd, "\x00")]; ok {
		var hunks []string
		for _, m := range hunkFailed.FindAllStringSubmatch(ee.Stderr, -1) {
			hunks = append(hunks, m[1]+":"+m[2])
		}
		return &PatchError{Patch: name, Hunks: hunks, Tail: tail}
	}
	return &ExecError{Cmd: ee.Cmd, ExitCode: ee.ExitCode, Tail: tail, Engine: ee.Message()}
}

// fetchError says what to do when the engine could not fetch an input: the llama.cpp source
// from upstream, or a base image from its registry.
func (s *state) fetchError(err error) error {
	msg := err.Error()
	src := s.plan.Source.URL
	if s.plan.Vendor != nil && strings.Contains(msg, s.plan.Vendor.URL) {
		src = s.plan.Vendor.URL
	}
	devel := s.plan.Images.Devel
	switch {
	case s.opts.Source == "" && src != "" && (strings.Contains(msg, src) || strings.Contains(msg, "git-upload-pack")):
		return fmt.Errorf("engine: fetching the source %s at %s: %w; the engine fetches the plan's commit from upstream unless --source DIR names a local llama.cpp checkout, mirror or plain tree: give one on a machine without network", src, s.plan.Source.Commit, err)
	case s.opts.Devel == "" && devel.Repository != "" && strings.Contains(msg, devel.Repository):
		return fmt.Errorf("engine: pulling the devel image %s: %w; on a machine without the registry give the image yourself: --base devel=oci-archive:FILE (skopeo copy docker://%s oci-archive:FILE), --base devel=oci-layout:DIR, or a mirror --base devel=MIRROR/REPO", devel.Ref, err, devel.Ref)
	}
	return fmt.Errorf("engine: %w", err)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
