package cmdutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/progress"
)

// Exit statuses, documented in README.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
	// ExitInterrupted is bench's status when it was stopped (Ctrl-C, SIGTERM) before every run
	// was done: 128 + SIGINT, as shells report it.
	ExitInterrupted = 130
)

// UsageError marks a mistake in how llbuild was called (exit 2): a wrong or missing flag, or
// something the user named that is not there (a target, a file, a directory) or that needs a
// flag (an unpinned image without --allow-floating).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode makes a UsageError a cli.ExitCoder, so that the app finds its status as it finds
// cli.Exit's.
func (e UsageError) ExitCode() int { return ExitUsage }

// Usage marks err as the caller's mistake (exit 2).
func Usage(err error) error { return UsageError{err} }

// Usagef is Usage of fmt.Errorf(format, args...).
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// IsUsage says whether err is, or wraps, a usage error.
func IsUsage(err error) bool { return errors.As(err, new(UsageError)) }

// UsageOf makes an error that a library marked as the caller's mistake (inputerr) a usage
// error; any other error is returned as it is.
func UsageOf(err error) error {
	if inputerr.Is(err) {
		return UsageError{err}
	}
	return err
}

// NotThere makes the error of an input the user named but that does not exist a usage error.
func NotThere(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return UsageError{err}
	}
	return err
}

// CheckDir refuses, as a usage error, a directory flag naming something that is not a
// directory.
func CheckDir(flag, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return Usagef("--%s %s: %w", flag, dir, err)
	case !fi.IsDir():
		return Usagef("--%s %s is not a directory", flag, dir)
	}
	return nil
}

// WriteJSON writes v indented, with a trailing newline.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Streams is where a command's run writes: results to Stdout, everything else to Stderr, Log and
// Term (stderr's status line: nil off a terminal and with --quiet); EngineLog gets the Dagger
// engine's own output (nil with --quiet). A run takes it instead of the CLI's context.
type Streams struct {
	Stdout, Stderr, EngineLog io.Writer
	Log                       *slog.Logger
	Term                      *progress.Term
}

type ctxKey int

const (
	keyLogger ctxKey = iota
	keyQuiet
	keyTerm
)

// WithOutput keeps in ctx what StreamsOf gives the commands: the logger, whether --quiet was
// given (quiet is read when a command runs, after the app's flags are parsed), and stderr's
// status line (nil off a terminal).
func WithOutput(ctx context.Context, log *slog.Logger, quiet *bool, term *progress.Term) context.Context {
	ctx = context.WithValue(ctx, keyQuiet, quiet)
	ctx = context.WithValue(ctx, keyTerm, term)
	return context.WithValue(ctx, keyLogger, log)
}

// StreamsOf is the command's streams: the app's Writer and ErrWriter, and what WithOutput kept.
func StreamsOf(c *cli.Context) Streams {
	s := Streams{Stdout: c.App.Writer, Stderr: c.App.ErrWriter, Log: Logger(c)}
	quiet := quietOf(c)
	term, _ := c.Context.Value(keyTerm).(*progress.Term)
	if !quiet {
		s.Term = term
		s.EngineLog = s.Stderr
		if term == nil { // a file or a CI log gets no escape sequences
			s.EngineLog = progress.Plain(s.Stderr)
		}
	}
	return s
}

// Logger is the command's logger.
func Logger(c *cli.Context) *slog.Logger {
	if l, ok := c.Context.Value(keyLogger).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
}

func quietOf(c *cli.Context) bool {
	q, _ := c.Context.Value(keyQuiet).(*bool)
	return (q != nil && *q) || c.Bool("quiet")
}
