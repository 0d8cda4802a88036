// Command llbuild builds host-matched llama.cpp servers and wheels, bundles and serves them, and
// checks before anything runs that they will work on the host.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cliargs"
	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/pipeline"
)

// version is set at link time (-ldflags "-X main.version=..."); provenance and publish tags
// record it. Without it, --version prints the module version and VCS revision Go recorded in
// the binary.
var version = "dev"

// Exit codes, documented in README.
const (
	exitOK     = cmdutil.ExitOK
	exitFailed = cmdutil.ExitFailed
	exitUsage  = cmdutil.ExitUsage
)

// plainProgressEvery is how often long work logs how far it got where stderr is not a
// terminal (tests shorten it).
var plainProgressEvery = progress.PlainEvery

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// commands lists llbuild's subcommands in the order help shows them.
func commands() []*cli.Command {
	return []*cli.Command{
		targetsCommand(),
		targetCommand(),
		recipesCommand(),
		planCommand(),
		patchesCommand(),
		recipeCommand(),
		preflightCommand(),
		bundleCommand(),
		verifyCommand(),
		serveCommand(),
		benchCommand(),
		bisectCommand(),
		buildCommand(),
		renamed(buildCommand(), "server"),
		wheelCommand(),
		indexCommand(),
		publishCommand(),
	}
}

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
	ctx = cmdutil.WithOutput(ctx, cmdutil.Output{Log: logger, Quiet: quiet, Term: term, Version: version, Every: plainProgressEvery})
	app := &cli.App{
		Name:                 "llbuild",
		Usage:                "build, bundle, check and serve host-matched llama.cpp",
		Version:              cmdutil.VersionString(version),
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
				return cmdutil.Usagef("give --quiet or --verbose, not both")
			case c.Bool("quiet"):
				level.Set(slog.LevelWarn)
				*quiet = true
			case c.Bool("verbose"):
				level.Set(slog.LevelDebug)
			}
			return nil
		},
		// FlagsFirst reports every mistake in the flags; this is for whatever urfave finds
		// besides.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return cmdutil.Usage(err) },
	}
	for _, c := range app.Commands {
		setUsageHandler(c)
	}
	app.Setup()
	args, err := cliargs.FlagsFirst(app, args)
	var flagErr *cliargs.Error
	if errors.As(err, &flagErr) {
		err = cmdutil.Usage(err)
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
	case errors.As(err, &ec) && ec.ExitCode() == 3 && strings.HasPrefix(err.Error(), "No help topic for"):
		// urfave's help of a word that names no command (wheel index --help) is usage
		code = exitUsage
	case errors.As(err, &ec) && (ctx.Err() == nil || ec.ExitCode() == cmdutil.ExitInterrupted):
		// bench and bisect say what an interrupt kept, with 130 themselves
		code = ec.ExitCode()
	case ctx.Err() != nil:
		// stopped by Ctrl-C or SIGTERM: whatever the work in progress said as it was cut off
		// (a git command killed, a connection closed) is no diagnosis, and the status is the
		// one an interrupt has everywhere (bench, bisect)
		logger.Debug("the error the interrupt caused", "err", err)
		fmt.Fprintln(stderr, "llbuild: interrupted")
		return cmdutil.ExitInterrupted
	case cmdutil.IsUsage(err) || errors.Is(err, pipeline.ErrFloating):
		code = exitUsage
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "llbuild: %s\n", msg)
	}
	return code
}

func setUsageHandler(c *cli.Command) {
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return cmdutil.Usage(err) }
	for _, s := range c.Subcommands {
		setUsageHandler(s)
	}
}

// renamed is cmd under the name it had before, hidden from help: it does what cmd does, after a
// one-line note on stderr that the name changed.
func renamed(cmd *cli.Command, old string) *cli.Command {
	name, before := cmd.Name, cmd.Before
	cmd.Name, cmd.Aliases, cmd.Hidden = old, nil, true
	cmd.Usage += fmt.Sprintf(" (deprecated: use llbuild %s)", name)
	cmd.Before = func(c *cli.Context) error {
		fmt.Fprintf(cmdutil.Stderr(c), "llbuild: %q is deprecated: use %q (the same flags)\n", "llbuild "+old, "llbuild "+name)
		if before != nil {
			return before(c)
		}
		return nil
	}
	return cmd
}
