package bisect

import (
	"fmt"
	"github.com/llbuild/llbuild/bench"
	"math"
	"slices"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
)

// Phases of a campaign, as State reports them.
const (
	PhaseEnds      = "ends"      // the ends are not measured yet
	PhaseNoStep    = "no-step"   // the ends do not differ: nothing to bisect
	PhaseProbing   = "probing"   // commits remain between the last good and the first bad
	PhaseConfirm   = "confirm"   // the culprit is named; its A/B against its parent is not measured yet
	PhaseDone      = "done"      // the culprit is named and confirmed
	PhaseAmbiguous = "ambiguous" // only skipped commits remain: the first bad is one of them or the bad after them
	PhaseEndsBad   = "ends-unusable"
)

// State is where a campaign stands: a pure function of its log.
type State struct {
	Phase string `json:"phase"`
	// Message says the phase in a sentence.
	Message string          `json:"message"`
	Path    []gitref.Commit `json:"-"`
	// Settings are the campaign's, from its start event.
	Settings *Settings `json:"-"`
	// Ends is the good end measured against the bad one.
	Ends *Probe `json:"ends,omitempty"`
	// Threshold is the probe/good ratio that divides good from bad.
	Threshold float64 `json:"threshold,omitempty"`
	// Direction is "slower" when the bad end is slower than the good one, "faster" otherwise.
	Direction string `json:"direction,omitempty"`
	// Good and Bad are the path indexes of the last good and the first bad commit known.
	Good int `json:"lastGood"`
	Bad  int `json:"firstBad"`
	// Next is the path index to probe next, -1 when none.
	Next int `json:"next"`
	// Culprit is the first bad commit once it is known; Candidates when only skipped commits
	// remain (the culprit is one of them).
	Culprit    *gitref.Commit  `json:"culprit,omitempty"`
	Candidates []gitref.Commit `json:"candidates,omitempty"`
	Confirm    *Probe          `json:"confirm,omitempty"`
	Probes     []Probe         `json:"probes"`
	// Inert is the latest word on which commits build as their parents do.
	Inert *Inert `json:"inert,omitempty"`
	// Left is about how many more probes the search needs (log2 of the commits between).
	Left int `json:"stepsLeft"`
}

// CanProbe says whether the commit at path index i may be probed: between the last good and the
// first bad commit and not probed yet. An inert one may be (it stands for the changing commit
// before it), so that a suspect's parent can be named as it is.
func (st *State) CanProbe(i int) bool {
	return i > st.Good && i < st.Bad && !slices.ContainsFunc(st.Probes, func(p Probe) bool { return p.Index == i })
}

// Replay computes the state of a campaign from its events.
func Replay(events []Event) (*State, error) {
	if len(events) == 0 || events[0].Kind != EventStart {
		return nil, fmt.Errorf("a log starts with its %q event", EventStart)
	}
	st := &State{Path: events[0].Path, Good: 0, Bad: len(events[0].Path) - 1, Next: -1, Probes: []Probe{}}
	st.Settings = events[0].Settings
	verdicts := map[int]string{}
	inert := map[int]bool{}
	for _, e := range events[1:] {
		if e.Kind == EventInert {
			inert = map[int]bool{}
			for _, i := range e.Inert.Commits {
				if i <= 0 || i >= len(st.Path) {
					return nil, fmt.Errorf("the inert event names commit %d; the path has %d", i, len(st.Path))
				}
				inert[i] = true
			}
			st.Inert = e.Inert
			continue
		}
		p := *e.Probe
		switch e.Kind {
		case EventEnds:
			st.Ends = &p
		case EventProbe:
			if p.Index <= 0 || p.Index >= len(st.Path) || st.Path[p.Index].Hash != p.Commit.Hash {
				return nil, fmt.Errorf("probe %s is not commit %d of the campaign's path", p.Commit.Short(), p.Index)
			}
			verdicts[p.Index] = p.Verdict
			st.Probes = append(st.Probes, p)
		case EventConfirm:
			st.Confirm = &p
		}
	}
	if st.Ends == nil {
		st.Phase, st.Message = PhaseEnds, "the ends are not measured yet"
		st.Next = st.Bad
		return st, nil
	}
	if st.Ends.Verdict != Bad {
		st.Phase = PhaseNoStep
		if st.Ends.Measurement == nil {
			st.Phase = PhaseEndsBad
		}
		st.Message = st.Ends.Reason
		return st, nil
	}
	st.Threshold = st.Ends.Threshold
	st.Direction = "slower"
	if st.Ends.Measurement.Median > 1 {
		st.Direction = "faster"
	}
	for i, v := range verdicts {
		switch {
		case v == Good && i > st.Good:
			st.Good = i
		case v == Bad && i < st.Bad:
			st.Bad = i
		}
	}
	if st.Good >= st.Bad {
		return nil, fmt.Errorf("the log says %s is good and %s, older, is bad: the verdicts contradict each other; edit the log (llbuild bisect replay) to drop the wrong one",
			st.Path[st.Good].Short(), st.Path[st.Bad].Short())
	}
	// An inert commit builds as its parent does: the first bad build is the latest commit at
	// or before the first bad one known that changed what the builds read.
	bad := st.Bad
	for st.Bad > st.Good && inert[st.Bad] {
		st.Bad--
	}
	if st.Bad > st.Good && verdicts[st.Bad] == Skip {
		// that build failed where the bad one built: it read something the builds read so far
		// did not, and the commits between may not be inert after all
		st.Bad = bad
	}
	if st.Bad == st.Good {
		return nil, fmt.Errorf("the log says %s is good and %s bad, but no commit from one to the other changes a file their builds read: the same build measured both ways, so one verdict is noise; edit the log (llbuild bisect replay) to drop the wrong one",
			st.Path[st.Good].Short(), st.Path[bad].Short())
	}
	var open []int
	changing := 0 // commits strictly between that change what the builds read
	for i := st.Good + 1; i < st.Bad; i++ {
		if inert[i] {
			continue
		}
		changing++
		if verdicts[i] != Skip {
			open = append(open, i)
		}
	}
	switch {
	case changing == 0:
		c := st.Path[st.Bad]
		st.Culprit = &c
		if st.Confirm == nil {
			st.Phase = PhaseConfirm
			st.Message = fmt.Sprintf("first %s commit: %s; its A/B against its parent %s is next", st.Direction, c, st.Path[st.Bad-1].Short())
		} else {
			st.Phase = PhaseDone
			st.Message = fmt.Sprintf("first %s commit: %s (%s against its parent: %s)", st.Direction, c, st.Confirm.Verdict, ratioText(st.Confirm.Measurement))
		}
	case len(open) == 0:
		st.Phase = PhaseAmbiguous
		for i := st.Good + 1; i <= st.Bad; i++ {
			if !inert[i] || i == st.Bad {
				st.Candidates = append(st.Candidates, st.Path[i])
			}
		}
		var names []string
		for _, c := range st.Candidates {
			names = append(names, c.Short())
		}
		st.Message = fmt.Sprintf("only skipped commits remain between good %s and bad %s: the first %s commit is one of %s", st.Path[st.Good].Short(), st.Path[st.Bad].Short(), st.Direction, strings.Join(names, " "))
	default:
		st.Phase = PhaseProbing
		st.Next = nearest(open, (st.Good+st.Bad)/2)
		st.Left = int(math.Ceil(math.Log2(float64(len(open) + 1))))
		st.Message = fmt.Sprintf("%d commits left between good %s and bad %s (about %d probes)", len(open), st.Path[st.Good].Short(), st.Path[st.Bad].Short(), st.Left)
		if n := st.Bad - st.Good - 1 - changing; n > 0 {
			st.Message += fmt.Sprintf(", %d more that change nothing the builds read", n)
		}
		st.Message += fmt.Sprintf("; next %s", st.Path[st.Next])
	}
	return st, nil
}

// nearest is the element of sorted xs closest to mid, the older one on a tie.
func nearest(xs []int, mid int) int {
	best := xs[0]
	for _, x := range xs {
		if abs(x-mid) < abs(best-mid) {
			best = x
		}
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func ratioText(m *Measurement) string {
	if m == nil || len(m.Ratios) == 0 {
		return "not measured"
	}
	return fmt.Sprintf("median %.3f (%.3f-%.3f, %d rounds)", m.Median, m.Min, m.Max, len(m.Ratios))
}

// judgeEnds decides whether the bad end differs from the good one enough to bisect, and the
// threshold probes are judged by. The verdict is Bad when it does (a step to find), else Skip;
// undecided means more rounds may tell.
func judgeEnds(m *Measurement, set *Settings) (verdict, reason string, threshold float64, undecided bool) {
	v := set.judge().Compare(m.Ratios)
	switch {
	case v.Kind == bench.NotEnoughRounds && len(m.Invalid) > 0:
		return Skip, fmt.Sprintf("the ends gave %d comparable rounds (%s): %s; check the bench records and run again", len(m.Ratios), strings.Join(m.Invalid, "; "), v.Text), 0, len(m.Ratios) > 0
	case v.Kind == bench.NotEnoughRounds:
		return Skip, "bad/good: " + v.Text, 0, true
	case v.Kind == bench.NoDifference && v.P > v.Alpha:
		return Skip, "no step between the ends, so there is nothing to bisect: bad/good " + v.Text, 0, true
	case v.Kind == bench.NoDifference:
		return Skip, fmt.Sprintf("no step worth bisecting between the ends: bad/good %s differs from 1 by less than --min-step %.3f", ratioText(m), set.MinStep), 0, false
	}
	slower := v.Kind == bench.Slower
	threshold = (1 + m.Median) / 2
	if set.Threshold != nil {
		threshold = *set.Threshold
		if (slower && !(threshold < 1 && threshold > m.Median)) || (!slower && !(threshold > 1 && threshold < m.Median)) {
			return Skip, fmt.Sprintf("--threshold %.3f does not lie between 1 and the ends' ratio %.3f: no probe could be judged by it", threshold, m.Median), 0, false
		}
	}
	return Bad, fmt.Sprintf("bad is %s; probes are judged against %.3f", v.Text, threshold), threshold, false
}

// judgeProbe says whether a probe's rounds lie on the good end's or the bad end's side of the
// threshold beyond chance (the judge's test at the campaign's alpha). Undecided means more
// rounds may tell.
func judgeProbe(m *Measurement, threshold float64, slower bool, set *Settings) (verdict, reason string, undecided bool) {
	if len(m.Ratios) == 0 {
		return Skip, "no round counted: " + strings.Join(m.Invalid, "; "), false
	}
	v := set.judge().Against(m.Ratios, threshold)
	below, above := bench.Sides(m.Ratios, threshold)
	counts := fmt.Sprintf("%d of %d rounds below %.3f, %d above", below, len(m.Ratios), threshold, above)
	switch {
	case !v.Decided():
		return Skip, fmt.Sprintf("probe/good %s; %s", v.Text, counts), true
	case (v.Kind == bench.Slower) == slower:
		return Bad, fmt.Sprintf("probe/good %s; %s: like the bad end", v.Text, counts), false
	}
	return Good, fmt.Sprintf("probe/good %s; %s: like the good end", v.Text, counts), false
}

func side(below bool) string {
	if below {
		return "below"
	}
	return "above"
}
