package bisect

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitref"
)

// inertBuilder stands for a builder that can read what its builds read: inert lists the path
// indexes whose changes touch none of it; each call sees the builds made so far. readable
// says which built commits still have a build tree here (nil: all).
type inertBuilder struct {
	fakeBuilder
	path     []gitref.Commit
	inert    func(built []gitref.Commit) []int
	readable map[string]bool
	calls    int
}

func (b *inertBuilder) Inert(_ context.Context, path []gitref.Commit, built []gitref.Commit) (*Inert, error) {
	b.calls++
	out := &Inert{Reads: 100, Commits: []int{}}
	var here []gitref.Commit
	for _, c := range built {
		if b.readable == nil || b.readable[c.Hash] {
			here = append(here, c)
			out.From = append(out.From, c.Hash)
		}
	}
	if len(here) == 0 {
		return nil, nil
	}
	out.Commits = b.inert(here)
	return out, nil
}

func indexOf(p []gitref.Commit, c gitref.Commit) int {
	return slices.IndexFunc(p, func(x gitref.Commit) bool { return x.Hash == c.Hash })
}

// Of 60 commits only every fourth changes what the build reads; the step is at 41, and the bad
// end (60) is one of the inert ones. The search probes changing commits only and names 41.
func TestInertCommitsAreNeverProbed(t *testing.T) {
	p := path(60)
	inert := func([]gitref.Commit) []int {
		var out []int
		for i := 1; i < len(p); i++ {
			if i%4 != 1 {
				out = append(out, i)
			}
		}
		return out
	}
	b := &inertBuilder{path: p, inert: inert}
	st := run(t, Options{Dir: t.TempDir(), Settings: settings(p), Path: p, Builder: b,
		Bencher: &fakeBencher{speed: step(41, 0.15), noise: 0.01, rng: rand.New(rand.NewSource(3))}})
	if st.Phase != PhaseDone || st.Culprit == nil || st.Culprit.Hash != p[41].Hash {
		t.Fatalf("phase %s culprit %v (%s), want done at commit 41", st.Phase, st.Culprit, st.Message)
	}
	if st.Confirm == nil || st.Confirm.Against != p[40].Hash {
		t.Errorf("confirmed against %v, want the culprit's parent %s", st.Confirm, p[40].Short())
	}
	for _, pr := range st.Probes {
		if pr.Index%4 != 1 {
			t.Errorf("probed inert commit %d", pr.Index)
		}
	}
	// 15 changing commits between the ends: 4 probes, where 60 commits take 6
	if len(st.Probes) > 4 {
		t.Errorf("%d probes, want at most 4 over 15 changing commits", len(st.Probes))
	}
	if st.Inert == nil || len(st.Inert.Commits) != 45 {
		t.Errorf("inert %+v, want 45 commits", st.Inert)
	}
}

// The inert set only shrinks: a later build that reads more makes commits changing again, and
// a build tree that is gone (another machine) does not give back what it ruled out.
func TestInertSetOnlyShrinks(t *testing.T) {
	p := path(20)
	all := func() []int {
		var out []int
		for i := 1; i < 20; i++ {
			out = append(out, i)
		}
		return out
	}
	dir := t.TempDir()
	// the first run's builds read little: 1-19 inert but 5 and 15
	b := &inertBuilder{path: p, inert: func(built []gitref.Commit) []int {
		return slices.DeleteFunc(all(), func(i int) bool { return i == 5 || i == 15 })
	}}
	st := run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: b, MaxProbes: 1,
		Bencher: &fakeBencher{speed: step(15, 0.2), noise: 0.01, rng: rand.New(rand.NewSource(1))}})
	if st.Inert == nil || len(st.Inert.Commits) != 17 {
		t.Fatalf("after the ends: inert %+v, want 17 commits", st.Inert)
	}
	// on another machine the first builds' trees are gone; its builds rule out 10 as well and
	// would let 5 be inert: 5 stays changing
	b2 := &inertBuilder{path: p, readable: map[string]bool{}, inert: func([]gitref.Commit) []int {
		return slices.DeleteFunc(all(), func(i int) bool { return i == 10 || i == 15 })
	}}
	for _, c := range p[1:] {
		b2.readable[c.Hash] = true
	}
	st = run(t, Options{Dir: dir, Path: p, Builder: b2, MaxProbes: 1,
		Bencher: &fakeBencher{speed: step(15, 0.2), noise: 0.01, rng: rand.New(rand.NewSource(1))}})
	got := fmt.Sprint(st.Inert.Commits)
	if strings.Contains(got, " 5 ") || strings.Contains(got, " 10 ") || strings.Contains(got, " 15 ") || len(st.Inert.Commits) != 16 {
		t.Errorf("inert %s, want every commit but 5, 10 and 15", got)
	}
	if len(st.Inert.From) < 2 {
		t.Errorf("from %v, want the builds of both machines", st.Inert.From)
	}
}

// Replay's rules for inert commits, on hand-written logs.
func TestReplayWithInertCommits(t *testing.T) {
	p := path(10)
	set := settings(p)
	ends := &Probe{Commit: p[10], Index: 10, Against: p[0].Hash, Verdict: Bad, Threshold: 0.9,
		Measurement: &Measurement{Ratios: []float64{0.8, 0.8, 0.8}, Median: 0.8}}
	probe := func(i int, v string) Event {
		return Event{Kind: EventProbe, Probe: &Probe{Commit: p[i], Index: i, Against: p[0].Hash, Verdict: v}}
	}
	inert := func(is ...int) Event {
		return Event{Kind: EventInert, Inert: &Inert{From: []string{p[0].Hash}, Commits: is}}
	}
	start := Event{Kind: EventStart, Settings: set, Path: p}
	for _, tc := range []struct {
		name   string
		events []Event
		phase  string
		want   string // the culprit, the next probe or the candidates
	}{
		{"inert commits are not probed", []Event{inert(4, 5, 6)}, PhaseProbing, "next 3"},
		{"the latest inert event counts", []Event{inert(4, 5, 6), inert(5)}, PhaseProbing, "next 4"},
		{"an inert bad end: its build is the latest changing commit's", []Event{inert(8, 9, 10), probe(5, Good), probe(6, Good)}, PhaseConfirm, "culprit 7"},
		{"only inert commits between: the bad one is the culprit", []Event{inert(2, 3, 4, 6, 7), probe(1, Good), probe(5, Bad)}, PhaseConfirm, "culprit 5"},
		{"a bad inert probe names the changing commit before it", []Event{inert(3, 4, 5), probe(1, Good), probe(4, Bad)}, PhaseConfirm, "culprit 2"},
		{"... unless that commit did not build: one of the two", []Event{inert(3, 4, 5), probe(1, Good), probe(2, Skip), probe(5, Bad)}, PhaseAmbiguous, "candidates 2 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := append([]Event{start, {Kind: EventEnds, Probe: ends}}, tc.events...)
			st, err := Replay(evs)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch {
			case st.Culprit != nil:
				got = fmt.Sprint("culprit ", indexOf(p, *st.Culprit))
			case st.Next >= 0:
				got = fmt.Sprint("next ", st.Next)
			default:
				got = "candidates"
				for _, c := range st.Candidates {
					got += fmt.Sprint(" ", indexOf(p, c))
				}
			}
			if st.Phase != tc.phase || got != tc.want {
				t.Errorf("phase %s, %s (%s); want %s, %s", st.Phase, got, st.Message, tc.phase, tc.want)
			}
		})
	}
	// good and bad with nothing but inert commits between them: the same build judged both ways
	_, err := Replay([]Event{start, {Kind: EventEnds, Probe: ends}, inert(3, 4, 5), probe(2, Good), probe(5, Bad)})
	if err == nil || !strings.Contains(err.Error(), "noise") {
		t.Errorf("a good and a bad verdict on the same build: %v, want an error saying one is noise", err)
	}
}

// --next: a suspect is probed before the middle; one already judged is refused; an inert
// parent may be named as it is.
func TestFirstProbeIsTheSuspect(t *testing.T) {
	p := path(100)
	dir := t.TempDir()
	b := &fakeBuilder{}
	bench := &fakeBencher{speed: step(71, 0.15), noise: 0.01, rng: rand.New(rand.NewSource(5))}
	st := run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: b, Bencher: bench, MaxProbes: 2, First: p[71].Hash})
	if len(st.Probes) != 1 || st.Probes[0].Index != 71 || st.Probes[0].Verdict != Bad {
		t.Fatalf("probes %+v, want the suspect 71 first, bad", st.Probes)
	}
	// a commit already judged is not left to probe
	_, err := Run(context.Background(), Options{Dir: dir, Builder: b, Bencher: bench, MaxProbes: 1, First: p[71].Hash})
	if err == nil || !strings.Contains(err.Error(), "not left to probe") {
		t.Errorf("--next on a commit already probed: %v, want refused", err)
	}
	// the suspect's parent next, as a user who names a suspect then checks it: two probes name it
	st = run(t, Options{Dir: dir, Builder: b, Bencher: bench, MaxProbes: 1, First: p[70].Hash})
	if st.Good != 70 || st.Bad != 71 || st.Phase != PhaseConfirm || len(st.Probes) != 2 {
		t.Errorf("after the suspect and its parent: good %d bad %d phase %s, %d probes; want 70, 71, confirm, 2", st.Good, st.Bad, st.Phase, len(st.Probes))
	}
}

// A suspect whose parent changes nothing the builds read: the parent is probed as named and
// stands for the changing commit before it.
func TestSuspectsInertParent(t *testing.T) {
	p := path(60)
	b := &inertBuilder{path: p, inert: func([]gitref.Commit) []int { return []int{38, 39, 40} }}
	bench := &fakeBencher{speed: step(41, 0.15), noise: 0.01, rng: rand.New(rand.NewSource(9))}
	dir := t.TempDir()
	run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: b, Bencher: bench, MaxProbes: 2, First: p[41].Hash})
	st := run(t, Options{Dir: dir, Builder: b, Bencher: bench, MaxProbes: 1, First: p[40].Hash})
	if st.Phase != PhaseConfirm || st.Good != 40 || st.Bad != 41 || st.Culprit == nil || st.Culprit.Hash != p[41].Hash {
		t.Fatalf("phase %s good %d bad %d (%s), want commit 41 named after two probes", st.Phase, st.Good, st.Bad, st.Message)
	}
}
