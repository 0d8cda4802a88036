package bisect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// Restart starts a campaign in dir from the log file from (one edited to drop a wrong verdict,
// say), its measurements judged again by test (Rejudge; at alpha, or the log's level when alpha
// is 0) where test is not "", and writes it to w as f says; a run resumes it. A log that cannot
// be read or judged, and a dir that holds a campaign already, are inputerr.Errors.
func Restart(w io.Writer, from, dir, test string, alpha float64, f Format, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l, err := ReadLogFile(from)
	if err != nil {
		return &inputerr.Error{Err: err}
	}
	if l.Torn != "" {
		log.Warn("bisect replay: " + l.Torn)
	}
	events := l.Events
	if test != "" {
		var changes []string
		if events, changes, err = Rejudge(events, test, alpha); err != nil {
			return &inputerr.Error{Err: err}
		}
		for _, ch := range changes {
			log.Info("bisect replay: judged again", "change", ch)
		}
		if len(changes) == 0 {
			log.Info("bisect replay: every verdict stands under the " + test + " test")
		}
	}
	st, err := Replay(events)
	if err != nil {
		return &inputerr.Error{Err: err}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if _, err := ReadLog(dir); !errors.Is(err, ErrNoLog) {
		return inputerr.Errorf("%s already holds a campaign: replay into a new --dir", dir)
	}
	l = &Log{Dir: dir}
	for _, e := range events {
		if err := l.Append(e); err != nil {
			return err
		}
	}
	return st.Write(w, dir, f)
}

// Rejudge judges every measurement a log holds again under another test (and, when alpha > 0,
// another level): the start event records them, the ends give the threshold again, and each
// probe and the confirmation get the verdict their recorded rounds give now; a probe whose
// build failed keeps its verdict. It returns the new events and a line for each verdict that
// changed. A campaign's rounds cost GPU time; how they are judged does not, so a lab can judge
// a finished campaign again without measuring anything.
func Rejudge(events []Event, test string, alpha float64) ([]Event, []string, error) {
	if len(events) == 0 || events[0].Kind != EventStart {
		return nil, nil, fmt.Errorf("a log starts with its %q event", EventStart)
	}
	switch test {
	case TestSign, TestSignedRank:
	default:
		return nil, nil, fmt.Errorf("test %q: use %s or %s", test, TestSignedRank, TestSign)
	}
	// a deep copy: the caller's events stay as they were
	b, err := json.Marshal(events)
	if err != nil {
		return nil, nil, err
	}
	var out []Event
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, nil, err
	}
	set := out[0].Settings
	if set == nil {
		return nil, nil, fmt.Errorf("the %q event has no settings", EventStart)
	}
	was := fmt.Sprintf("%s test at %.3g", set.test(), set.alpha())
	set.Test = test
	if alpha > 0 {
		set.Alpha = alpha
	}
	var changes []string
	var threshold float64
	direction := ""
	note := func(p *Probe, verdict, reason string) {
		if verdict != p.Verdict {
			changes = append(changes, fmt.Sprintf("%s: %s, now %s (%s)", p.Commit.Short(), p.Verdict, verdict, reason))
			reason += fmt.Sprintf(" [judged again by bisect replay --test %s; the %s said %s]", test, was, p.Verdict)
		}
		p.Verdict, p.Reason = verdict, reason
	}
	for i := range out[1:] {
		e := &out[i+1]
		p := e.Probe
		if p == nil || p.Measurement == nil {
			continue
		}
		m := p.Measurement
		m.summarize()
		switch e.Kind {
		case EventEnds:
			v, r, th := judgeEndsOf(m, set)
			note(p, v, r)
			p.Threshold, threshold = th, th
			direction = "slower"
			if m.Median > 1 {
				direction = "faster"
			}
		case EventProbe:
			if direction == "" {
				return nil, nil, fmt.Errorf("probe %s comes before the ends in the log", p.Commit.Short())
			}
			v, r, undecided := judgeProbe(m, threshold, direction == "slower", set)
			if undecided {
				r += fmt.Sprintf(" after %d rounds", len(m.AValue))
			}
			note(p, v, r)
			if p.Threshold != 0 {
				p.Threshold = threshold
			}
		case EventConfirm:
			v, r, undecided := judgeConfirm(m, direction, set)
			if undecided {
				r += fmt.Sprintf(" after %d rounds", len(m.AValue))
			}
			note(p, v, r)
		}
	}
	if _, err := Replay(out); err != nil {
		return nil, nil, fmt.Errorf("judged by the %s test the log no longer holds together: %w", test, err)
	}
	return out, changes, nil
}
