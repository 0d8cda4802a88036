package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/patches"
)

var commitFlag = &cli.StringFlag{Name: "commit", Usage: "llama.cpp `COMMIT` (any revision the repository knows; default its HEAD)"}

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
			Flags: []cli.Flag{sourceRepoFlag, commitFlag, rangeFlag, seriesFlag, jsonFlag},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return usagef("patches status takes no arguments, got %q", c.Args().Slice())
				}
				series, err := seriesOf(c)
				if err != nil {
					return err
				}
				if c.IsSet("range") {
					return rangeStatus(c, series)
				}
				rep, err := patches.Status(c.Context, c.String("source"), c.String("commit"), series)
				if err != nil {
					return usageError{err}
				}
				out := stdoutOf(c)
				if c.Bool("json") {
					if err := writeJSON(out, rep); err != nil {
						return noCommitIsUsage(err)
					}
				} else if err := writeStatus(out, rep); err != nil {
					return err
				}
				return seriesBlocked(rep)
			},
		}},
	}
}

var rangeFlag = &cli.StringFlag{Name: "range", Usage: "bisect first-parent history `A..B` (A the commit the series was made for): where each patch stopped applying or went upstream; not with --commit"}

// rangeStatus is patches status --range: the series' history over A..B.
func rangeStatus(c *cli.Context, series []patches.Patch) error {
	if c.IsSet("commit") {
		return usagef("give --commit or --range, not both")
	}
	from, to, ok := strings.Cut(c.String("range"), "..")
	if !ok || from == "" || to == "" || strings.HasPrefix(to, ".") {
		return usagef("--range wants A..B (two commits, oldest first, e.g. 1425386fd..34af94cd9), got %q", c.String("range"))
	}
	rep, err := patches.StatusRange(c.Context, c.String("source"), from, to, series)
	if err != nil {
		return usageError{err}
	}
	out := stdoutOf(c)
	if c.Bool("json") {
		err = writeJSON(out, rep)
	} else {
		err = writeRangeStatus(out, rep)
	}
	if err != nil {
		return err
	}
	for _, p := range rep.Patches {
		if !(patches.Result{State: p.AtTo}).OK() {
			return fmt.Errorf("the series does not apply at %s: %s %s; refresh it against that commit (git apply --3way, then git format-patch) and move the pin with llbuild recipe bump --new-series", short(rep.To), p.Name, changeText(p))
		}
	}
	return nil
}

func writeRangeStatus(w interface{ Write([]byte) (int, error) }, rep *patches.RangeReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PATCH\t%s..%s (%d first-parent commits, %d checked)\n", short(rep.From), short(rep.To), rep.Commits, rep.Probes)
	for _, p := range rep.Patches {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, changeText(p))
	}
	return tw.Flush()
}

// changeText says how a patch fared over the range.
func changeText(p patches.RangeResult) string {
	if p.Change == nil {
		if p.AtFrom == p.AtTo {
			return string(p.AtTo) + " throughout"
		}
		return string(p.AtFrom) + " at the start, " + string(p.AtTo) + " at the end"
	}
	ch := p.Change
	s := string(ch.Result.State)
	if ch.Result.State == patches.Depends {
		s = "depends on " + ch.Result.DependsOn
	}
	s += " from " + short(ch.Commit) + " (" + time.Unix(ch.Time, 0).UTC().Format("2006-01-02") +
		", commit " + strconv.Itoa(ch.Position) + " of the range) " + strconv.Quote(ch.Subject)
	switch {
	case len(ch.Result.Hunks) > 0:
		s += ": hunk at " + strings.Join(ch.Result.Hunks, ", hunk at ")
	case ch.Result.Detail != "":
		s += ": " + ch.Result.Detail
	}
	if ch.Result.State != p.AtTo {
		s += "; at the end: " + string(p.AtTo)
	}
	return s
}

func short(commit string) string { return commit[:min(12, len(commit))] }

func writeStatus(w interface{ Write([]byte) (int, error) }, rep *patches.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PATCH\tAT %s\n", where(rep))
	for _, p := range rep.Patches {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, describe(p))
	}
	return tw.Flush()
}

// where names what the series was applied to: a commit, or a plain tree by its tree hash.
func where(rep *patches.Report) string {
	if rep.Commit == "" {
		return "TREE " + rep.Tree[:min(len("sha256:")+12, len(rep.Tree))] + " (" + rep.Source + ", not a git repository)"
	}
	return rep.Commit[:min(12, len(rep.Commit))]
}

// describe says what a patch's state is, with the hunks or the patch it waits for.
func describe(p patches.Result) string {
	s := string(p.State)
	switch {
	case p.State == patches.Depends:
		s = "depends on " + p.DependsOn + ", which no longer applies (hunk at " + strings.Join(p.Hunks, ", ") + ")"
	case len(p.Hunks) > 0:
		s += ": hunk at " + strings.Join(p.Hunks, ", hunk at ")
	case p.Detail != "":
		s += ": " + p.Detail
	}
	return s
}

// seriesBlocked is nil when the series applies or is upstream at the report's commit, and
// otherwise an error naming the first patch to refresh.
func seriesBlocked(rep *patches.Report) error {
	for _, p := range rep.Patches {
		if !p.OK() {
			at, against := rep.Commit, "that commit"
			if at == "" {
				at, against = rep.Source, "that tree"
			}
			return errors.New("the series does not apply at " + at + ": " + p.Name + " " + describe(p) +
				"; refresh it against " + against + " (git apply --3way, then git format-patch) and update its sha256 in the series, or drop it")
		}
	}
	return nil
}
