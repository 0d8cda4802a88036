package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

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

// IsUsage says whether err is, or wraps, a usage error or an error a library marked as the
// caller's mistake (inputerr): both exit 2.
func IsUsage(err error) bool { return errors.As(err, new(UsageError)) || inputerr.Is(err) }

// UsageOf makes an error that a library marked as the caller's mistake (inputerr) a usage
// error; any other error is returned as it is.
func UsageOf(err error) error {
	if inputerr.Is(err) {
		return UsageError{err}
	}
	return err
}

// Streams is where a command's run writes: results to Stdout, everything else to Stderr, Log and
// Term (stderr's status line: nil off a terminal and with --quiet); EngineLog gets the Dagger
// engine's own output (nil with --quiet). A run takes it instead of the CLI's context.
type Streams struct {
	Stdout, Stderr, EngineLog io.Writer
	Log                       *slog.Logger
	Term                      *progress.Term
	// Version is llbuild's own version, as what it makes records it.
	Version string
	// Every is how often long work logs a line off a terminal (0: progress.PlainEvery).
	Every time.Duration
}

type ctxKey struct{}

// Output is what the app keeps in the context for its commands' Streams.
type Output struct {
	Log *slog.Logger
	// Quiet is set once --quiet is parsed (after the context is made), so it is read when a
	// command runs.
	Quiet *bool
	// Term is stderr's status line, nil off a terminal.
	Term    *progress.Term
	Version string
	// Every is how often long work logs a line where stderr is not a terminal (0:
	// progress.PlainEvery).
	Every time.Duration
}

// WithOutput keeps o in ctx for StreamsOf.
func WithOutput(ctx context.Context, o Output) context.Context {
	return context.WithValue(ctx, ctxKey{}, o)
}

// StreamsOf is the command's streams: the app's Writer and ErrWriter, and what WithOutput kept.
func StreamsOf(c *cli.Context) Streams {
	o, _ := c.Context.Value(ctxKey{}).(Output)
	s := Streams{Stdout: c.App.Writer, Stderr: c.App.ErrWriter, Log: Logger(c), Version: o.Version, Every: o.Every}
	if quiet := (o.Quiet != nil && *o.Quiet) || c.Bool("quiet"); !quiet {
		s.Term = o.Term
		s.EngineLog = s.Stderr
		if o.Term == nil { // a file or a CI log gets no escape sequences
			s.EngineLog = progress.Plain(s.Stderr)
		}
	}
	return s
}

// Logger is the command's logger.
func Logger(c *cli.Context) *slog.Logger {
	if o, ok := c.Context.Value(ctxKey{}).(Output); ok && o.Log != nil {
		return o.Log
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
}

// Stdout is where a command writes its results: the app's Writer.
func Stdout(c *cli.Context) io.Writer { return c.App.Writer }

// Stderr is where a command writes what is not a result: the app's ErrWriter.
func Stderr(c *cli.Context) io.Writer { return c.App.ErrWriter }
