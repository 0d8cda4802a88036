package bisect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/llbuild/llbuild/bench"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/gitref"
)

// fakeBuilder stands for building llama.cpp at a commit: it fails where the commit is listed
// in broken, and counts builds so that reuse can be checked.
type fakeBuilder struct {
	broken map[string]bool
	builds map[string]int
}

func (b *fakeBuilder) Build(_ context.Context, c gitref.Commit) (*Build, error) {
	if b.builds == nil {
		b.builds = map[string]int{}
	}
	b.builds[c.Hash]++
	if b.broken[c.Hash] {
		return nil, errors.New("ninja: build stopped: subcommand failed")
	}
	return &Build{Dir: "/artifacts/" + c.Hash, PlanHash: "plan-" + c.Hash, Seconds: 1}, nil
}

// fakeBencher stands for the GPU bench: each commit has a true speed, and each run reads it
// with multiplicative noise of up to ±noise, from a seeded source.
type fakeBencher struct {
	speed   func(c gitref.Commit) float64
	noise   float64
	rng     *rand.Rand
	invalid map[string]bool // commits whose canaries fail
	calls   int
}

func (f *fakeBencher) Measure(_ context.Context, a, b Side, rounds int) (*Measurement, error) {
	f.calls++
	m := &Measurement{A: a.Commit.Hash, B: b.Commit.Hash}
	read := func(c gitref.Commit) float64 {
		return f.speed(c) * (1 + f.noise*(2*f.rng.Float64()-1))
	}
	for r := 0; r < rounds; r++ {
		av, bv := read(a.Commit), read(b.Commit)
		m.AValue, m.BValue = append(m.AValue, av), append(m.BValue, bv)
		if f.invalid[b.Commit.Hash] {
			m.Invalid = append(m.Invalid, fmt.Sprintf("%s round %d: rejected: canary mismatch", b.Commit.Short(), r))
			continue
		}
		m.Ratios = append(m.Ratios, bv/av)
		m.Records = append(m.Records, fmt.Sprintf("runs/%s-r%d/record.json", b.Commit.Short(), r))
	}
	m.summarize()
	return m, nil
}

func path(n int) []gitref.Commit {
	var p []gitref.Commit
	for i := 0; i <= n; i++ {
		h := fmt.Sprintf("%09x%031x", i+1, 0)
		p = append(p, gitref.Commit{Hash: h, Subject: fmt.Sprintf("commit %d (#%d)", i, 1000+i), PR: 1000 + i, Time: int64(1700000000 + i)})
	}
	return p
}

func settings(p []gitref.Commit) *Settings {
	return &Settings{Good: p[0], Bad: p[len(p)-1], Target: "h200", Series: "plain", Mode: "screen", Rounds: 3, MaxRounds: 9, Metric: "row0", MinStep: 0.02, TemplateIdentity: "t"}
}

// step is a speed that drops by drop at commit k and stays there.
func step(k int, drop float64) func(gitref.Commit) float64 {
	return func(c gitref.Commit) float64 {
		var i int
		fmt.Sscanf(c.Hash[:9], "%x", &i)
		if i-1 >= k {
			return 1000 * (1 - drop)
		}
		return 1000
	}
}

func run(t *testing.T, o Options) *State {
	t.Helper()
	st, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return st
}

func TestFindsTheStepThroughNoise(t *testing.T) {
	for _, tc := range []struct {
		name        string
		n, k        int
		drop, noise float64
	}{
		{"a 14% loss among 364 commits", 364, 201, 0.14, 0.02},
		{"a 4% loss among 100 commits", 100, 37, 0.04, 0.004},
		{"a 60% gain at the last commit", 20, 20, -0.6, 0.03},
		{"a loss at the first commit", 50, 1, 0.2, 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := path(tc.n)
			b := &fakeBuilder{}
			st := run(t, Options{Dir: t.TempDir(), Settings: settings(p), Path: p, Builder: b,
				Bencher: &fakeBencher{speed: step(tc.k, tc.drop), noise: tc.noise, rng: rand.New(rand.NewSource(1))}})
			if st.Phase != PhaseDone || st.Culprit == nil || st.Culprit.Hash != p[tc.k].Hash {
				t.Fatalf("phase %s culprit %v (%s), want done at %s", st.Phase, st.Culprit, st.Message, p[tc.k])
			}
			if st.Confirm.Verdict != Bad {
				t.Errorf("confirmation %s: %s, want bad (confirmed)", st.Confirm.Verdict, st.Confirm.Reason)
			}
			wantDir := "slower"
			if tc.drop < 0 {
				wantDir = "faster"
			}
			if st.Direction != wantDir {
				t.Errorf("direction %s, want %s", st.Direction, wantDir)
			}
			if max := 2 * bitsFor(tc.n); len(st.Probes) > max {
				t.Errorf("%d probes for %d commits, want at most %d", len(st.Probes), tc.n, max)
			}
		})
	}
}

func bitsFor(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

func TestARangeWithNoStepSaysSo(t *testing.T) {
	p := path(40)
	for _, tc := range []struct {
		name  string
		speed func(gitref.Commit) float64
		noise float64
		want  string
	}{
		{"flat within noise", step(0, 0), 0.03, "no step"},
		{"a step smaller than --min-step", step(10, 0.01), 0.001, "less than --min-step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := &fakeBuilder{}
			st := run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: b, Bencher: &fakeBencher{speed: tc.speed, noise: tc.noise, rng: rand.New(rand.NewSource(3))}})
			if st.Phase != PhaseNoStep || !strings.Contains(st.Message, tc.want) {
				t.Fatalf("phase %s: %q, want %s saying %q", st.Phase, st.Message, PhaseNoStep, tc.want)
			}
			if len(b.builds) != 2 || len(st.Probes) != 0 {
				t.Errorf("built %d commits and probed %d, want the two ends and no probe", len(b.builds), len(st.Probes))
			}
			// running again does nothing more: the log already says there is no step
			st2 := run(t, Options{Dir: dir, Builder: b, Bencher: &fakeBencher{speed: tc.speed, rng: rand.New(rand.NewSource(3))}})
			if st2.Phase != PhaseNoStep || len(b.builds) != 2 || b.builds[p[0].Hash] != 1 {
				t.Errorf("resumed: phase %s, builds %v; want no-step and no new build", st2.Phase, b.builds)
			}
		})
	}
}

func TestSkipsBrokenBuildsAndFailedCanaries(t *testing.T) {
	p := path(64)
	k := 34
	broken := map[string]bool{p[32].Hash: true}
	invalid := map[string]bool{p[39].Hash: true}
	st := run(t, Options{Dir: t.TempDir(), Settings: settings(p), Path: p, Builder: &fakeBuilder{broken: broken},
		Bencher: &fakeBencher{speed: step(k, 0.15), noise: 0.02, rng: rand.New(rand.NewSource(5)), invalid: invalid}})
	if st.Phase != PhaseDone || st.Culprit.Hash != p[k].Hash {
		t.Fatalf("phase %s culprit %v: %s; want %s", st.Phase, st.Culprit, st.Message, p[k])
	}
	var skipped []string
	for _, pr := range st.Probes {
		if pr.Verdict == Skip {
			skipped = append(skipped, pr.Commit.Short()+": "+pr.Reason)
			if broken[pr.Commit.Hash] && (!strings.Contains(pr.Reason, "the build failed") || pr.Measurement != nil) {
				t.Errorf("broken %s: %q, measured %v; want a build failure, unmeasured", pr.Commit.Short(), pr.Reason, pr.Measurement != nil)
			}
			if invalid[pr.Commit.Hash] && !strings.Contains(pr.Reason, "canary mismatch") {
				t.Errorf("invalid %s: %q, want the canaries named", pr.Commit.Short(), pr.Reason)
			}
		}
	}
	if len(skipped) < 2 {
		t.Errorf("skipped %v; want the broken 32 and the canary failure at 39 among them", skipped)
	}
}

// When the only commits left are skipped, the campaign names them all instead of guessing.
func TestOnlySkippedLeftNamesTheCandidates(t *testing.T) {
	p := path(8)
	broken := map[string]bool{p[4].Hash: true, p[5].Hash: true, p[6].Hash: true}
	st := run(t, Options{Dir: t.TempDir(), Settings: settings(p), Path: p, Builder: &fakeBuilder{broken: broken},
		Bencher: &fakeBencher{speed: step(5, 0.2), noise: 0.01, rng: rand.New(rand.NewSource(2))}})
	if st.Phase != PhaseAmbiguous {
		t.Fatalf("phase %s: %s; want ambiguous", st.Phase, st.Message)
	}
	var got []string
	for _, c := range st.Candidates {
		got = append(got, c.Short())
	}
	if want := []string{p[4].Short(), p[5].Short(), p[6].Short(), p[7].Short()}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("candidates %v, want %v (the skipped and the first bad after them)", got, want)
	}
}

// A probe whose rounds straddle the threshold gets more rounds, and is skipped if they do not
// settle it.
func TestNotSignificantTakesMoreRoundsThenSkips(t *testing.T) {
	p := path(4)
	mid := func(c gitref.Commit) float64 {
		if c.Hash == p[2].Hash {
			return 900 // exactly at the threshold between 1000 and 800
		}
		return step(3, 0.2)(c)
	}
	bench := &fakeBencher{speed: mid, noise: 0.01, rng: rand.New(rand.NewSource(9))}
	st := run(t, Options{Dir: t.TempDir(), Settings: settings(p), Path: p, Builder: &fakeBuilder{}, Bencher: bench})
	var pr *Probe
	for i := range st.Probes {
		if st.Probes[i].Index == 2 {
			pr = &st.Probes[i]
		}
	}
	if pr == nil || pr.Verdict != Skip || len(pr.Measurement.AValue) != 9 || !strings.Contains(pr.Reason, "after 9 rounds") {
		t.Fatalf("probe at the threshold: %+v; want skipped after 9 rounds", pr)
	}
}

// A campaign stopped after each probe and resumed (on "another machine": a new builder, so
// every build is redone) ends where one uninterrupted run ends, and the log replays to the
// same state.
func TestResumedLogEndsLikeOneRun(t *testing.T) {
	p := path(200)
	speed := step(77, 0.1)
	whole := run(t, Options{Dir: t.TempDir(), Settings: settings(p), Path: p, Builder: &fakeBuilder{},
		Bencher: &fakeBencher{speed: speed, noise: 0.02, rng: rand.New(rand.NewSource(4))}})
	dir := t.TempDir()
	bench := &fakeBencher{speed: speed, noise: 0.02, rng: rand.New(rand.NewSource(4))}
	var st *State
	for part := 0; ; part++ {
		if part > 40 {
			t.Fatal("the campaign did not end in 40 parts")
		}
		o := Options{Dir: dir, Builder: &fakeBuilder{}, Bencher: bench, MaxProbes: 1, Machine: fmt.Sprintf("machine-%d", part)}
		if part == 0 {
			o.Settings, o.Path = settings(p), p
		}
		st = run(t, o)
		if st.Phase == PhaseDone {
			break
		}
	}
	if st.Culprit.Hash != whole.Culprit.Hash || len(st.Probes) != len(whole.Probes) {
		t.Errorf("resumed: culprit %s after %d probes; one run: %s after %d", st.Culprit.Short(), len(st.Probes), whole.Culprit.Short(), len(whole.Probes))
	}
	l, err := ReadLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Replay(l.Events)
	if err != nil || again.Culprit.Hash != st.Culprit.Hash || again.Phase != PhaseDone {
		t.Errorf("replayed log: %v %+v", err, again)
	}
	machines := map[string]bool{}
	for _, e := range l.Events {
		machines[e.Machine] = true
	}
	if len(machines) < 5 {
		t.Errorf("the log names %d machines, want one per part", len(machines))
	}
}

func TestResumeRefusesOtherSettings(t *testing.T) {
	p := path(10)
	dir := t.TempDir()
	bench := &fakeBencher{speed: step(4, 0.2), noise: 0.01, rng: rand.New(rand.NewSource(1))}
	run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: &fakeBuilder{}, Bencher: bench, MaxProbes: 1})
	other := settings(p)
	other.Rounds = 5
	_, err := Run(context.Background(), Options{Dir: dir, Settings: other, Path: p, Builder: &fakeBuilder{}, Bencher: bench})
	if !errors.Is(err, ErrSettingsDiffer) || !strings.Contains(err.Error(), "--rounds 3") {
		t.Errorf("Run with other rounds: %v, want ErrSettingsDiffer naming the log's", err)
	}
	_, err = Run(context.Background(), Options{Dir: t.TempDir(), Builder: &fakeBuilder{}, Bencher: bench})
	if err == nil || !strings.Contains(err.Error(), "no campaign to resume") {
		t.Errorf("Run on an empty dir without settings: %v", err)
	}
}

func TestLogIsStrict(t *testing.T) {
	p := path(3)
	dir := t.TempDir()
	run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: &fakeBuilder{}, Bencher: &fakeBencher{speed: step(2, 0.3), rng: rand.New(rand.NewSource(1))}, MaxProbes: 1})
	b, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, log, want string }{
		{"unknown field", strings.Replace(string(b), `"event":"start"`, `"event":"start","colour":"red"`, 1), "unknown field"},
		{"no start", strings.SplitN(string(b), "\n", 2)[1], "a log starts with"},
		{"a bad verdict", string(b) + strings.Replace(strings.SplitN(string(b), "\n", 3)[1], `"event":"ends"`, `"event":"probe"`, 1)[:0] + `{"schemaVersion":1,"event":"probe","time":"2026-01-01T00:00:00Z","probe":{"commit":{"hash":"x","subject":"","time":0},"index":1,"against":"","verdict":"maybe","reason":""}}` + "\n", "want good, bad or skip"},
		{"another schema", strings.Replace(string(b), `"schemaVersion":1`, `"schemaVersion":7`, 1), "schemaVersion 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEvents(strings.NewReader(tc.log), "bisect.log")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeEvents: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestContradictingVerdictsAreAnError(t *testing.T) {
	p := path(10)
	events := []Event{
		{Kind: EventStart, Settings: settings(p), Path: p},
		{Kind: EventEnds, Probe: &Probe{Commit: p[10], Index: 10, Verdict: Bad, Threshold: 0.9, Measurement: &Measurement{Median: 0.8, Ratios: []float64{0.8, 0.8}}}},
		{Kind: EventProbe, Probe: &Probe{Commit: p[3], Index: 3, Verdict: Bad}},
		{Kind: EventProbe, Probe: &Probe{Commit: p[6], Index: 6, Verdict: Good}},
	}
	if _, err := Replay(events); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("Replay: %v, want the contradiction named", err)
	}
	_ = time.Now
}

// The rounds the H200 gave in screen mode (one 512-token response per run, 2026-12-03,
// 1425386fd..34af94cd9 with the llama bigram pair, draft-simple): a per-run spread of about
// ±8%, too wide for the ends' 8% step, so probes stay not significant; rounds a third as noisy
// around the same medians decide.
func TestSignTestOnTheH200Rounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ratios    []float64
		threshold float64
		want      string
	}{
		{"360e1349f as measured", []float64{0.903, 0.945, 1.018, 0.944, 0.896, 0.999}, 0.960, Skip},
		{"b06aa774c as measured", []float64{0.94, 1.137, 1.083, 0.927, 1.022, 1.131}, 0.960, Skip},
		{"one third the spread, below", []float64{0.94, 0.953, 0.976, 0.952, 0.937, 0.970}, 0.985, Bad},
		{"one third the spread, above", []float64{1.0, 1.06, 1.043, 0.995, 1.024, 1.062}, 0.960, Good},
		{"three rounds alone never decide", []float64{0.5, 0.5, 0.5}, 0.960, Skip},
		{"eight of nine", []float64{0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 1.1}, 0.960, Bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Measurement{Ratios: tc.ratios}
			m.summarize()
			got, reason, _ := judgeProbe(m, tc.threshold, true, &Settings{Test: TestSign})
			if got != tc.want {
				t.Errorf("judgeProbe(%v, %.3f) = %s (%s), want %s", tc.ratios, tc.threshold, got, reason, tc.want)
			}
		})
	}
}

// The second part's rounds (2026-12-03, full mode, mean of 7 repeated rows; threshold 0.914 from
// the ends' 0.828): 7b13a8404's two slow rounds of nine left the sign test undecided (p = 0.090)
// after nine rounds of building and benching; the signed-rank test, which weighs how far each
// round lies, calls it good. Both agree where the rounds are one-sided, and three rounds decide
// neither.
func TestSignedRankOnTheH200Rounds(t *testing.T) {
	b7 := []float64{1.051, 1.019, 0.998, 1.138, 0.882, 0.866, 1.044, 0.921, 1.025}
	s360 := []float64{0.967, 0.983, 0.99, 0.912, 0.999, 0.977, 0.923, 1.009, 0.988}
	ends := []float64{0.836, 0.824, 0.831, 0.821, 0.815, 0.84}
	for _, tc := range []struct {
		name      string
		ratios    []float64
		threshold float64
		test      string
		want      string
	}{
		{"7b13a8404, sign", b7, 0.914, TestSign, Skip},
		{"7b13a8404, signed-rank", b7, 0.914, TestSignedRank, Good},
		{"360e1349f, sign", s360, 0.914, TestSign, Good},
		{"360e1349f, signed-rank", s360, 0.914, TestSignedRank, Good},
		{"the bad end against the threshold, signed-rank", ends, 0.914, TestSignedRank, Bad},
		{"three rounds, signed-rank", []float64{0.5, 0.5, 0.5}, 0.960, TestSignedRank, Skip},
		{"noise around the threshold, signed-rank", []float64{0.90, 0.93, 0.91, 0.92, 0.905, 0.925}, 0.914, TestSignedRank, Skip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Measurement{Ratios: tc.ratios}
			m.summarize()
			got, reason, _ := judgeProbe(m, tc.threshold, true, &Settings{Test: tc.test})
			if got != tc.want {
				t.Errorf("judgeProbe(%v, %.3f, %s) = %s (%s), want %s", tc.ratios, tc.threshold, tc.test, got, reason, tc.want)
			}
		})
	}
	// the judge's exact one-sided tail on a probe's rounds (bench's tests hold the rest)
	if _, pa := bench.OneSided(TestSignedRank, b7, 0.914); math.Abs(pa-10.0/512) > 1e-12 {
		t.Errorf("7b13a8404: pa = %v, want 10/512 (W- = 5 of 45)", pa)
	}
}

// A run stopped while Append wrote a line (the machine taken away mid-write) leaves a last line
// without its newline. The events before it stand, the next run writes over it, and the log is
// whole again; a broken line anywhere else is still an error.
func TestATornLastLineIsLeftOutAndWrittenOver(t *testing.T) {
	p := path(10)
	dir := t.TempDir()
	bench := &fakeBencher{speed: step(4, 0.2), noise: 0.01, rng: rand.New(rand.NewSource(1))}
	run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: &fakeBuilder{}, Bencher: bench, MaxProbes: 2})
	name := filepath.Join(dir, LogFile)
	whole, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(whole), "\n"), "\n")
	last := lines[len(lines)-1]
	if err := os.WriteFile(name, append(whole, last[:len(last)/2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ReadLog(dir)
	if err != nil {
		t.Fatalf("ReadLog with a torn last line: %v", err)
	}
	if len(l.Events) != len(lines) || !strings.Contains(l.Torn, fmt.Sprintf("%s:%d: the last line", name, len(lines)+1)) {
		t.Errorf("read %d events (want %d), Torn %q", len(l.Events), len(lines), l.Torn)
	}
	var warned bytes.Buffer
	run(t, Options{Dir: dir, Builder: &fakeBuilder{}, Bencher: bench, MaxProbes: 1, Log: slog.New(slog.NewTextHandler(&warned, nil))})
	if !strings.Contains(warned.String(), "cut short mid-write") {
		t.Errorf("the resumed run did not say the line was left out: %q", warned.String())
	}
	after, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, whole) || bytes.Count(after, []byte("\n")) <= len(lines) {
		t.Errorf("the resumed run did not write its event over the torn line:\n%s", after)
	}
	if _, err := DecodeEvents(bytes.NewReader(after), name); err != nil {
		t.Errorf("the log after the resumed run: %v", err)
	}

	// a whole last line without its newline (a write cut just before it, an editor that drops
	// it) keeps its event, and the next one goes on a line of its own
	cut := filepath.Join(t.TempDir(), "cut")
	os.MkdirAll(cut, 0o755)
	if err := os.WriteFile(filepath.Join(cut, LogFile), bytes.TrimSuffix(whole, []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, Options{Dir: cut, Builder: &fakeBuilder{}, Bencher: bench, MaxProbes: 1})
	if l, err := ReadLog(cut); err != nil {
		t.Errorf("after resuming a log without its last newline: %v", err)
	} else if len(l.Events) <= len(lines) || l.Torn != "" {
		t.Errorf("after resuming a log without its last newline: %d events (had %d), torn %q", len(l.Events), len(lines), l.Torn)
	}

	// a torn start line is no campaign: a run with settings starts one in its place
	fresh := t.TempDir()
	if err := os.WriteFile(filepath.Join(fresh, LogFile), []byte(lines[0][:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLog(fresh); !errors.Is(err, ErrNoLog) {
		t.Errorf("ReadLog of a torn start line: %v, want ErrNoLog", err)
	}
	run(t, Options{Dir: fresh, Settings: settings(p), Path: p, Builder: &fakeBuilder{}, Bencher: bench, MaxProbes: 1})
	if _, err := ReadLog(fresh); err != nil {
		t.Errorf("the campaign started over a torn start line: %v", err)
	}

	// a broken line before the last, a last line that is whole JSON but no event, or two events
	// on one line, is an error
	for _, broken := range []string{
		lines[0] + strings.TrimSuffix(lines[1], "\n") + lines[1],
		lines[0] + lines[1][:30] + "\n" + strings.Join(lines[2:], ""),
		string(whole) + `{"schemaVersion":1,"event":"probe"}`,
	} {
		if err := os.WriteFile(name, []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLog(dir); err == nil {
			t.Errorf("ReadLog read a log with a broken line:\n%s", broken)
		}
	}
}
