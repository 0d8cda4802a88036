package patches

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as a table: one line per patch with its state, the hunks that
// failed or the patch it waits for.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PATCH\tAT %s\n", r.where())
	for _, p := range r.Patches {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Describe())
	}
	return tw.Flush()
}

// where names what the series was applied to: a commit, or a plain tree by its tree hash.
func (r *Report) where() string {
	if r.Commit == "" {
		return "TREE " + r.Tree[:min(len("sha256:")+12, len(r.Tree))] + " (" + r.Source + ", not a git repository)"
	}
	return short(r.Commit)
}

// Describe says what the patch's state is, with the hunks or the patch it waits for.
func (r Result) Describe() string {
	s := string(r.State)
	switch {
	case r.State == Depends:
		s = "depends on " + r.DependsOn + ", which no longer applies (hunk at " + strings.Join(r.Hunks, ", ") + ")"
	case len(r.Hunks) > 0:
		s += ": hunk at " + strings.Join(r.Hunks, ", hunk at ")
	case r.Detail != "":
		s += ": " + r.Detail
	}
	return s
}

// Blocked is nil when the series applies or is upstream where the report was made, and
// otherwise an error naming the first patch to refresh and how.
func (r *Report) Blocked() error {
	for _, p := range r.Patches {
		if !p.OK() {
			at, against := r.Commit, "that commit"
			if at == "" {
				at, against = r.Source, "that tree"
			}
			return errors.New("the series does not apply at " + at + ": " + p.Name + " " + p.Describe() +
				"; refresh it against " + against + " (git apply --3way, then git format-patch) and update its sha256 in the series, or drop it")
		}
	}
	return nil
}

// ParseRange splits a range A..B into its two commits; ok is false unless both are given.
func ParseRange(s string) (from, to string, ok bool) {
	from, to, ok = strings.Cut(s, "..")
	if !ok || from == "" || to == "" || strings.HasPrefix(to, ".") {
		return "", "", false
	}
	return from, to, true
}

// WriteText writes the range report as a table: one line per patch saying how it fared over
// the range.
func (r *RangeReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PATCH\t%s..%s (%d first-parent commits, %d checked)\n", short(r.From), short(r.To), r.Commits, r.Probes)
	for _, p := range r.Patches {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Describe())
	}
	return tw.Flush()
}

// Blocked is nil when every patch applies or is upstream at the range's end, and otherwise an
// error naming the first patch to refresh and how.
func (r *RangeReport) Blocked() error {
	for _, p := range r.Patches {
		if !(Result{State: p.AtTo}).OK() {
			return fmt.Errorf("the series does not apply at %s: %s %s; refresh it against that commit (git apply --3way, then git format-patch) and move the pin with llbuild recipe bump --new-series", short(r.To), p.Name, p.Describe())
		}
	}
	return nil
}

// Describe says how the patch fared over the range: its state throughout, or the commit where
// it changed, with that commit's date, position and subject.
func (r RangeResult) Describe() string {
	if r.Change == nil {
		if r.AtFrom == r.AtTo {
			return string(r.AtTo) + " throughout"
		}
		return string(r.AtFrom) + " at the start, " + string(r.AtTo) + " at the end"
	}
	ch := r.Change
	s := string(ch.Result.State)
	if ch.Result.State == Depends {
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
	if ch.Result.State != r.AtTo {
		s += "; at the end: " + string(r.AtTo)
	}
	return s
}

func short(commit string) string { return commit[:min(12, len(commit))] }
