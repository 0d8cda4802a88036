package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cliargs"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/pipeline"
)

// version is set at link time (-ldflags "-X main.version=..."); provenance and publish tags
// record it. Without it, --version prints the module version and VCS revision Go recorded in
// the binary (versionString).
var version = "dev"

// versionString is what --version prints: the link-time version, or the module's version
// ("(devel)" for a build from a checkout) with the commit, its time and whether the tree had
// changes, as debug.ReadBuildInfo has them.
func versionString() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information in the binary)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if when != "" {
			v += " " + when
		}
		if modified == "true" {
			v += " (with uncommitted changes)"
		}
	}
	return v + " " + info.GoVersion
}

// Exit codes, documented in README.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// usageError marks a mistake in how llbuild was called (exit 2): a wrong or missing flag, or
// something the user named that is not there (a target, a file, a directory) or that needs a
// flag (an unpinned image without --allow-floating, which pipeline.ErrFloating marks).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// ExitCode makes a usageError a cli.ExitCoder, so that run finds its code as it finds
// cli.Exit's.
func (e usageError) ExitCode() int { return exitUsage }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

type ctxKey int

const (
	keyLogger ctxKey = iota
	keyQuiet
	keyTerm
)

// plainProgressEvery is how often long work logs how far it got where stderr is not a
// terminal (tests shorten it).
var plainProgressEvery = progress.PlainEvery

// run is main without the process: tests call it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runTerm(ctx, args, stdin, stdout, stderr, progress.TermOf(stderr))
}

// runTerm is run with stderr's status line term, nil where stderr is not a terminal: then
// long work logs a line now and then instead. Everything written to stderr goes through
// term, so that no log line lands inside the status line.
func runTerm(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, term *progress.Term) int {
	if term != nil {
		stderr = term
	}
	level := new(slog.LevelVar) // --quiet: warnings and errors only; --verbose: debug too
	quiet := new(bool)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx = context.WithValue(ctx, keyQuiet, quiet)
	ctx = context.WithValue(ctx, keyTerm, term)
	ctx = context.WithValue(ctx, keyLogger, logger)
	app := &cli.App{
		Name:                 "llbuild",
		Usage:                "build, bundle, check and serve host-matched llama.cpp",
		Version:              versionString(),
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		Commands:             commands(),
		ExitErrHandler:       func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "quiet", Usage: "log only warnings and errors: no progress (neither the line on a terminal nor the lines every 30 s) and not the Dagger engine's log (results still go to stdout)"},
			&cli.BoolFlag{Name: "verbose", Usage: "log debug messages too (the Dagger build's definition steps among them)"},
		},
		Before: func(c *cli.Context) error {
			switch {
			case c.Bool("quiet") && c.Bool("verbose"):
				return usagef("give --quiet or --verbose, not both")
			case c.Bool("quiet"):
				level.Set(slog.LevelWarn)
				*quiet = true
			case c.Bool("verbose"):
				level.Set(slog.LevelDebug)
			}
			return nil
		},
		// flagsFirst reports every mistake in the flags; this is for whatever urfave finds
		// besides.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return usageError{err} },
	}
	for _, c := range app.Commands {
		setUsageHandler(c)
	}
	app.Setup()
	args, err := cliargs.FlagsFirst(app, args)
	var flagErr *cliargs.Error
	if errors.As(err, &flagErr) {
		err = usageError{err}
	}
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var ec cli.ExitCoder
	switch {
	case errors.As(err, &ec):
		code = ec.ExitCode()
	case errors.Is(err, pipeline.ErrFloating):
		code = exitUsage
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "llbuild: %s\n", msg)
	}
	return code
}

func setUsageHandler(c *cli.Command) {
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
	for _, s := range c.Subcommands {
		setUsageHandler(s)
	}
}

// streams is where a command's run writes: results to Stdout, everything else to Stderr, Log and
// Term (stderr's status line: nil off a terminal and with --quiet); EngineLog gets the Dagger
// engine's own output (nil with --quiet). A run takes it instead of the CLI's context.
type streams struct {
	Stdout, Stderr, EngineLog io.Writer
	Log                       *slog.Logger
	Term                      *progress.Term
}

// streamsOf is the command's streams.
func streamsOf(c *cli.Context) streams {
	return streams{Stdout: stdoutOf(c), Stderr: stderrOf(c), EngineLog: engineLogOf(c), Log: loggerOf(c), Term: termOf(c)}
}

// stdoutOf is where a command writes its results: the app's Writer.
func stdoutOf(c *cli.Context) io.Writer { return c.App.Writer }

// engineLogOf is where the Dagger engine's own log goes: stderr, uncoloured where stderr is
// not a terminal (a file or a CI log gets no escape sequences), nothing with --quiet.
func engineLogOf(c *cli.Context) io.Writer {
	if quietOf(c) {
		return nil
	}
	if t, _ := c.Context.Value(keyTerm).(*progress.Term); t == nil {
		return progress.Plain(stderrOf(c))
	}
	return stderrOf(c)
}

func quietOf(c *cli.Context) bool {
	q, _ := c.Context.Value(keyQuiet).(*bool)
	return q != nil && *q
}

// termOf is stderr's status line for long work's progress: nil where stderr is not a
// terminal, and with --quiet.
func termOf(c *cli.Context) *progress.Term {
	if quietOf(c) || c.Bool("quiet") {
		return nil
	}
	t, _ := c.Context.Value(keyTerm).(*progress.Term)
	return t
}

// stderrOf is where a command writes what is not a result: the app's ErrWriter.
func stderrOf(c *cli.Context) io.Writer { return c.App.ErrWriter }

func loggerOf(c *cli.Context) *slog.Logger {
	return c.Context.Value(keyLogger).(*slog.Logger)
}

// checkDirFlag refuses, as a usage error, a directory flag naming something that is not a
// directory.
func checkDirFlag(flag, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return usagef("--%s %s: %w", flag, dir, err)
	case !fi.IsDir():
		return usagef("--%s %s is not a directory", flag, dir)
	}
	return nil
}
