package bisect

import (
	"encoding/json"
	"fmt"
)

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
