package bisect

import (
	"strings"
	"testing"
)

// A campaign judged by the sign test, judged again by the signed-rank test from its recorded
// rounds: the probe the sign test skipped (the H200's 7b13a8404) is good, the search moves past
// it, a failed build stays skipped, and the caller's events are left as they were.
func TestRejudgeMovesTheSearch(t *testing.T) {
	p := path(10)
	set := settings(p)
	set.Test = TestSign
	ends := []float64{0.836, 0.824, 0.831, 0.821, 0.815, 0.84}
	b7 := []float64{1.051, 1.019, 0.998, 1.138, 0.882, 0.866, 1.044, 0.921, 1.025}
	m := func(r []float64) *Measurement {
		x := &Measurement{Ratios: r, AValue: make([]float64, len(r)), BValue: make([]float64, len(r))}
		x.summarize()
		return x
	}
	events := []Event{
		{Kind: EventStart, Settings: set, Path: p},
		{Kind: EventEnds, Probe: &Probe{Commit: p[10], Index: 10, Verdict: Bad, Threshold: 0.914, Measurement: m(ends)}},
		{Kind: EventProbe, Probe: &Probe{Commit: p[5], Index: 5, Verdict: Skip, Reason: "not significant", Measurement: m(b7)}},
		{Kind: EventProbe, Probe: &Probe{Commit: p[4], Index: 4, Verdict: Skip, Reason: "the build failed: cmake"}},
	}
	before, err := Replay(events)
	if err != nil {
		t.Fatal(err)
	}
	out, changes, err := Rejudge(events, TestSignedRank, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || !strings.HasPrefix(changes[0], p[5].Short()+": skip, now good") {
		t.Errorf("changes %q, want the one skipped probe now good", changes)
	}
	after, err := Replay(out)
	if err != nil {
		t.Fatal(err)
	}
	if before.Good != 0 || after.Good != 5 || out[3].Probe.Verdict != Skip || out[0].Settings.Test != TestSignedRank {
		t.Errorf("last good %d then %d, failed build %s, test %q: want 0 then 5, the failed build skipped, signed-rank recorded",
			before.Good, after.Good, out[3].Probe.Verdict, out[0].Settings.Test)
	}
	if !strings.Contains(out[2].Probe.Reason, "judged again by bisect replay --test signed-rank; the sign test at 0.05 said skip") {
		t.Errorf("reason %q does not say it was judged again, and what it was", out[2].Probe.Reason)
	}
	if events[2].Probe.Verdict != Skip || events[0].Settings.Test != TestSign {
		t.Error("Rejudge changed the caller's events")
	}
	if _, _, err := Rejudge(events, "t-test", 0); err == nil || !strings.Contains(err.Error(), "signed-rank") {
		t.Errorf("an unknown test: %v", err)
	}
}
