package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/jsonout"
	"github.com/llbuild/llbuild/patches"
)

var commitFlag = &cli.StringFlag{Name: "commit", Usage: "llama.cpp `COMMIT` (any revision the repository knows; default its HEAD)"}

var rangeFlag = &cli.StringFlag{Name: "range", Usage: "bisect first-parent history `A..B` (A the commit the series was made for): where each patch stopped applying or went upstream; not with --commit"}

func patchesCommand() *cli.Command {
	return &cli.Command{
		Name:  "patches",
		Usage: "follow upstream with the patch series",
		Subcommands: []*cli.Command{{
			Name:  "status",
			Usage: "say for each patch whether it applies, is already upstream, conflicts, or depends on one that no longer applies",
			Description: "Applies the series in order to a commit of a llama.cpp repository, in a temporary index: the\n" +
				"repository is not changed. A plain source tree (no git; without --commit) is indexed into a\n" +
				"temporary repository and checked as it is, never written. With --range A..B it bisects\n" +
				"first-parent history instead: for each patch, the first commit after A where it stops applying or\n" +
				"is upstream, with that commit's subject. Exit 0 when every patch applies or is upstream (at B with\n" +
				"--range), 1 otherwise.",
			Flags: []cli.Flag{cmdutil.SourceRepoFlag, commitFlag, rangeFlag, cmdutil.SeriesFlag, cmdutil.JSONFlag},
			Action: func(c *cli.Context) error {
				o, err := patchesStatusOptionsOf(c)
				if err != nil {
					return err
				}
				return runPatchesStatus(c.Context, o, cmdutil.StreamsOf(c))
			},
		}},
	}
}

// patchesStatusOptions is the series to check, in which repository, and at one commit or over
// a range From..To (IsRange).
type patchesStatusOptions struct {
	Source, Commit string
	IsRange        bool
	From, To       string
	Series         []patches.Patch
	JSON           bool
}

func patchesStatusOptionsOf(c *cli.Context) (patchesStatusOptions, error) {
	o := patchesStatusOptions{Source: c.String("source"), Commit: c.String("commit"), IsRange: c.IsSet("range"), JSON: c.Bool("json")}
	if c.NArg() > 0 {
		return o, cmdutil.Usagef("patches status takes no arguments, got %q", c.Args().Slice())
	}
	var err error
	if o.Series, err = patches.ByName(c.String("series")); err != nil {
		// the series named is the caller's to mend: exit 2, never 1 (a patch that does not apply)
		return o, cmdutil.Usage(err)
	}
	if !o.IsRange {
		return o, nil
	}
	if c.IsSet("commit") {
		return o, cmdutil.Usagef("give --commit or --range, not both")
	}
	var ok bool
	if o.From, o.To, ok = patches.ParseRange(c.String("range")); !ok {
		return o, cmdutil.Usagef("--range wants A..B (two commits, oldest first, e.g. 1425386fd..34af94cd9), got %q", c.String("range"))
	}
	return o, nil
}

// runPatchesStatus applies the series at the commit (or bisects the range) and writes the
// report; it fails when a patch is left that does not apply.
func runPatchesStatus(ctx context.Context, o patchesStatusOptions, s cmdutil.Streams) error {
	out := s.Stdout
	var rep interface {
		WriteText(io.Writer) error
		Blocked() error
	}
	var err error
	if o.IsRange {
		rep, err = patches.StatusRange(ctx, o.Source, o.From, o.To, o.Series)
	} else {
		rep, err = patches.Status(ctx, o.Source, o.Commit, o.Series)
	}
	if err != nil {
		return cmdutil.Usage(err)
	}
	if o.JSON {
		err = jsonout.Write(out, rep)
	} else {
		err = rep.WriteText(out)
	}
	if err != nil {
		return err
	}
	return rep.Blocked()
}
