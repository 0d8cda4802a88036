package hostexec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llbuild/llbuild/internal/walkroot"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
)

// command runs one subprocess in its own process group, its output going to a log file.
// Cancelling ctx kills the whole group (cmake, ninja and the compilers under them).
type command struct {
	dir  string
	env  []string
	log  string
	args []string
	// progress, if set, follows ninja's [n/N] lines in the output and reports them.
	progress *pipeline.NinjaProgress
	// hold, if set, is inherited by the command (as fd 3) and so by everything it starts: the
	// work directory's lock, held until the last of them exits (lock)
	hold *os.File
}

// tailLines is how much of a failed command's log an error shows.
const tailLines = 20

func (c command) run(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(c.log), 0o755); err != nil {
		return err
	}
	f, err := os.Create(c.log)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "$ %s\n", strings.Join(c.args, " "))
	cmd := exec.CommandContext(ctx, c.args[0], c.args[1:]...)
	var out io.Writer = f
	if c.progress != nil {
		out = io.MultiWriter(f, c.progress)
		c.progress.Start()
		defer c.progress.Stop()
	}
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = c.dir, c.env, out, out
	if c.hold != nil {
		cmd.ExtraFiles = []*os.File{c.hold}
	}
	// A session of its own: ninja puts each job in a process group of its own, but all stay
	// in the session, so an interrupt can find every process the build started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		if cmd.Process != nil {
			killSession(cmd.Process.Pid)
		}
		return fmt.Errorf("%s interrupted: %w", filepath.Base(c.args[0]), ctx.Err())
	}
	if err != nil {
		return &CommandError{Args: c.args, Log: c.log, Tail: tail(c.log, tailLines), Err: err}
	}
	return nil
}

// killSession kills every process left in session sid.
func killSession(sid int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 || f[3] != strconv.Itoa(sid) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// output runs the command and returns its combined output, for short git queries.
func (c command) output(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, c.args[0], c.args[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// CommandError is a subprocess that failed: the command, the last lines of its output and
// the path of its full log.
type CommandError struct {
	Args []string
	Log  string
	Tail string
	Err  error
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %v; last lines of the output:\n%s\nfull log: %s", filepath.Base(e.Args[0]), e.Err, e.Tail, e.Log)
}

func (e *CommandError) Unwrap() error { return e.Err }

func tail(name string, n int) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// PatchError is a patch of the series that does not apply to the source.
type PatchError struct {
	// Patch is the patch's name in the series and File where its copy was written.
	Patch, File string
	// Hunks are the places git apply could not apply, "FILE:LINE", or the files it could not find.
	Hunks  []string
	Output string
}

func (e *PatchError) Error() string {
	what := strings.TrimSpace(e.Output)
	if len(e.Hunks) > 0 {
		what = "hunk at " + strings.Join(e.Hunks, ", hunk at ") + " does not apply"
	}
	return fmt.Sprintf("patch %s does not apply: %s (git apply said: %s); no patch was applied; the patch is at %s", e.Patch, what, oneLine(e.Output), e.File)
}

// parseApplyError reads git apply's complaints into the places that failed; patches status
// reports conflicts the same way.
var parseApplyError = patches.FailedHunks

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// copyTree copies a plain source directory (no .git) preserving modes and links.
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.Walk(walkroot.Dir(src), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() && fi.Name() == ".git" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(target, fi.Mode().Perm()|0o700)
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case fi.Mode().IsRegular():
			return copyFile(p, target, fi.Mode().Perm())
		}
		return nil
	})
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

var errMissingTools = errors.New("missing build tools")
