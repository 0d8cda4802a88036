package bisect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// Format is how a campaign is written: as a person reads it (WriteText), as JSON (Summary), or
// its verdict lines alone (Lines).
type Format struct {
	JSON, Verdicts bool
}

// Write writes st, the campaign in dir, to w as f says; JSON wins over Verdicts.
func (st *State) Write(w io.Writer, dir string, f Format) error {
	switch {
	case f.JSON:
		b, err := json.MarshalIndent(Summary{Dir: dir, Settings: st.Settings, State: st, Commits: len(st.Path) - 1}, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case f.Verdicts:
		_, err := fmt.Fprint(w, st.Lines())
		return err
	}
	return st.WriteText(w, st.Settings)
}

// Show writes the campaign that name holds to w as f says: a campaign directory, or a log file
// kept apart from its campaign (a copy carried back from a GPU machine). A name that holds no
// log is an inputerr.Error wrapping ErrNoLog.
func Show(w io.Writer, name string, f Format, log *slog.Logger) error {
	var l *Log
	var err error
	if fi, serr := os.Stat(name); serr == nil && fi.Mode().IsRegular() {
		l, err = ReadLogFile(name)
	} else {
		l, err = ReadLog(name)
	}
	if errors.Is(err, ErrNoLog) {
		return &inputerr.Error{Err: err}
	}
	if err != nil {
		return err
	}
	if l.Torn != "" && log != nil {
		log.Warn("bisect log: " + l.Torn)
	}
	st, err := Replay(l.Events)
	if err != nil {
		return err
	}
	return st.Write(w, name, f)
}

// WriteText writes the campaign as a person reads it: the ends, every probe in path order
// with its ratios, and where the search stands or what it found.
func (st *State) WriteText(w io.Writer, set *Settings) error {
	fmt.Fprintf(w, "range:     %s (good) .. %s (bad), %d commits, target %s, series %s, metric %s, %s x%d rounds\n",
		set.Good.Short(), set.Bad.Short(), len(st.Path)-1, set.Target, set.Series, set.Metric, set.Mode, set.Rounds)
	if st.Ends != nil {
		fmt.Fprintf(w, "ends:      bad/good %s\n", ratioText(st.Ends.Measurement))
		if st.Threshold > 0 {
			fmt.Fprintf(w, "threshold: %.3f (a probe is bad when its probe/good ratios fall %s it beyond chance, by the %s test at %.3g)\n", st.Threshold, map[bool]string{true: "below", false: "above"}[st.Direction == "slower"], set.test(), set.alpha())
		}
	}
	if in := st.Inert; in != nil {
		fmt.Fprintf(w, "inert:     %d of %d commits change no file that the builds of %d commits read (%d files): never built, each builds as its parent\n",
			len(in.Commits), len(st.Path)-1, len(in.From), in.Reads)
	}
	if len(st.Probes) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tcommit\tverdict\tprobe/good\trounds\tbuild\tsubject")
		for _, p := range sortedByIndex(st.Probes) {
			build := "-"
			if p.Build != nil {
				build = "built " + fmt.Sprint(p.Build.Seconds) + " s"
				if p.Build.Reused {
					build = "reused"
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Index, p.Commit.Short(), p.Verdict, ratioCell(p.Measurement), roundsCell(p.Measurement), build, p.Commit.Subject)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s: %s\n", st.Phase, st.Message)
	if c := st.Culprit; c != nil {
		fmt.Fprintf(w, "culprit:   %s %s\n", c.Hash, c.Subject)
		if c.PR > 0 {
			fmt.Fprintf(w, "           https://github.com/ggml-org/llama.cpp/pull/%d\n", c.PR)
		}
		if st.Confirm != nil {
			fmt.Fprintf(w, "confirm:   %s\n", st.Confirm.Reason)
		}
	}
	return nil
}

func sortedByIndex(ps []Probe) []Probe {
	out := append([]Probe(nil), ps...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Index < out[j-1].Index; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func ratioCell(m *Measurement) string {
	if m == nil || len(m.Ratios) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f (%.3f-%.3f)", m.Median, m.Min, m.Max)
}

func roundsCell(m *Measurement) string {
	if m == nil {
		return "0"
	}
	s := fmt.Sprint(len(m.AValue))
	if bad := len(m.AValue) - len(m.Ratios); bad > 0 {
		s += fmt.Sprintf(" (%d invalid)", bad)
	}
	return s
}

// Summary is the campaign as --json prints it.
type Summary struct {
	Dir      string    `json:"dir"`
	Settings *Settings `json:"settings"`
	*State
	Commits int `json:"commits"`
}

// Lines is the log as git bisect log writes it: one line per verdict.
func (st *State) Lines() string {
	var b strings.Builder
	for _, p := range st.Probes {
		fmt.Fprintf(&b, "# %s: [%s] %s\n", p.Verdict, p.Commit.Hash, p.Commit.Subject)
	}
	return b.String()
}
