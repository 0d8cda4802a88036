package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestRoundsNeededIsWhereAllOnOneSideReachesAlpha(t *testing.T) {
	for _, tc := range []struct {
		alpha float64
		want  int
	}{{0.05, 6}, {0.01, 8}, {0.1, 5}, {0.5, 2}} {
		if got := RoundsNeeded(tc.alpha); got != tc.want {
			t.Errorf("RoundsNeeded(%v) = %d, want %d", tc.alpha, got, tc.want)
		}
		// one round fewer, all on one side, must not reach alpha; that many must
		n := RoundsNeeded(tc.alpha)
		up := func(k int) []float64 {
			r := make([]float64, k)
			for i := range r {
				r[i] = 1.5 + float64(i)/10
			}
			return r
		}
		j := Judge{Alpha: tc.alpha}
		if v := j.Compare(up(n - 1)); v.Kind != NotEnoughRounds || !strings.Contains(v.Text, "not enough rounds to decide (") {
			t.Errorf("alpha %v, %d rounds all faster: %s, want not enough rounds", tc.alpha, n-1, v.Text)
		}
		if v := j.Compare(up(n)); v.Kind != Faster || v.P > tc.alpha {
			t.Errorf("alpha %v, %d rounds all faster: %s, want faster", tc.alpha, n, v.Text)
		}
	}
}

// bruteP is the two-sided signed-rank p-value by enumerating every sign pattern: an
// independent check of the exact distribution signedRankP computes by convolution.
func bruteP(ratios []float64, x float64) float64 {
	var d []float64
	for _, r := range ratios {
		if v := math.Log(r / x); v != 0 {
			d = append(d, v)
		}
	}
	n := len(d)
	if n == 0 {
		return 1
	}
	rank := make([]float64, n) // midranks of |d|
	for i := range d {
		less, equal := 0, 0
		for k := range d {
			switch {
			case math.Abs(d[k]) < math.Abs(d[i]):
				less++
			case math.Abs(d[k]) == math.Abs(d[i]):
				equal++
			}
		}
		rank[i] = float64(less) + float64(equal+1)/2
	}
	obs := 0.0
	for i := range d {
		if d[i] > 0 {
			obs += rank[i]
		}
	}
	lo, hi := 0, 0
	for mask := 0; mask < 1<<n; mask++ {
		w := 0.0
		for i := range d {
			if mask&(1<<i) != 0 {
				w += rank[i]
			}
		}
		if w <= obs+1e-9 {
			lo++
		}
		if w >= obs-1e-9 {
			hi++
		}
	}
	all := float64(int(1) << n)
	return math.Min(1, 2*math.Min(float64(lo)/all, float64(hi)/all))
}

func TestJudgePValueIsWilcoxonsExactTwoSided(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]float64{
		{1.1, 1.2, 1.3, 1.4, 1.5, 1.6},
		{0.9, 0.9, 1.1},
		{1.051, 1.019, 0.998, 1.138, 0.882, 0.866, 1.044, 0.921, 1.025},
		{1, 1, 1.02, 0.98, 1.03, 1.01, 0.99},
	}
	for k := 0; k < 40; k++ {
		n := 2 + rng.IntN(11)
		var rs []float64
		for range n {
			rs = append(rs, math.Exp(0.02*rng.NormFloat64()+0.005))
		}
		if k%5 == 0 { // ties
			rs[0] = rs[len(rs)-1]
		}
		cases = append(cases, rs)
	}
	for _, rs := range cases {
		got, want := DefaultJudge().Compare(rs).P, bruteP(rs, 1)
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("p(%v) = %v, want %v by enumeration", rs, got, want)
		}
	}
	// Wilcoxon's table: n = 9, W- = 5 gives a one-sided 10/512
	if _, pa := OneSided(TestSignedRank, []float64{1.051, 1.019, 0.998, 1.138, 0.882, 0.866, 1.044, 0.921, 1.025}, 0.914); math.Abs(pa-10.0/512) > 1e-12 {
		t.Errorf("one-sided p = %v, want 10/512", pa)
	}
	if p := signP(6, 6); math.Abs(p-1.0/64) > 1e-12 {
		t.Errorf("signP(6, 6) = %v, want 1/64", p)
	}
}

func TestJudgeVerdicts(t *testing.T) {
	six := func(base float64, jitter ...float64) []float64 {
		r := make([]float64, 6)
		for i := range r {
			r[i] = base + jitter[i%len(jitter)]
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		j      Judge
		ratios []float64
		want   string
		text   string
	}{
		{"two rounds never give a direction", DefaultJudge(), []float64{0.6, 0.61}, NotEnoughRounds, "not enough rounds to decide (6 needed, 2 measured)"},
		{"five identical-side rounds neither", DefaultJudge(), []float64{1.5, 1.5, 1.6, 1.5, 1.7}, NotEnoughRounds, "(6 needed, 5 measured)"},
		{"none measured", DefaultJudge(), nil, NotEnoughRounds, "no round measured both sides"},
		{"six above", DefaultJudge(), six(1.05, 0, 0.01, -0.01, 0.02), Faster, "faster: median 1.05"},
		{"six below", DefaultJudge(), six(0.95, 0, 0.01, -0.01, 0.02), Slower, "slower: median 0.95"},
		{"both sides", DefaultJudge(), six(1, 0.03, -0.02, 0.01, -0.04), NoDifference, "no difference"},
		{"significant but within the step", DefaultJudge(), six(1.004, 0, 0.001, -0.001, 0.002), NoDifference, "within the minimum step 0.01"},
		{"a step of zero takes any significant one", Judge{Alpha: 0.05}, six(1.004, 0, 0.001, -0.001, 0.002), Faster, "faster"},
		{"all at exactly 1", DefaultJudge(), six(1, 0), NoDifference, "p = 1.000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.j.Compare(tc.ratios)
			if v.Kind != tc.want || !strings.Contains(v.Text, tc.text) {
				t.Errorf("Compare(%v) = %q (%s), want %q with %q", tc.ratios, v.Kind, v.Text, tc.want, tc.text)
			}
			if v.Test != TestSignedRank || v.Rounds != len(tc.ratios) || v.Needed != 6 {
				t.Errorf("Compare(%v) = %+v, want the test, rounds and rounds needed", tc.ratios, v)
			}
		})
	}
}

// Under the null (A and B the same build: log ratios symmetric around 0) the judge gives a
// direction in at most alpha of the trials, at every round count; and a real 4% step in 2%
// noise is found most of the time with 8 rounds. Noise shapes: normal, heavy-tailed (a
// Student t with 3 degrees of freedom, the occasional slow round) and rounded figures (ties).
func TestJudgeFalseDirectionRateAtMostAlpha(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const trials = 4000
	noises := map[string]func() float64{
		"normal": func() float64 { return 0.03 * rng.NormFloat64() },
		"heavy-tailed": func() float64 {
			z := rng.NormFloat64()
			c := 0.0
			for range 3 {
				x := rng.NormFloat64()
				c += x * x
			}
			return 0.02 * z / math.Sqrt(c/3)
		},
		"rounded": func() float64 { return math.Round(0.03*rng.NormFloat64()*100) / 100 },
	}
	for name, noise := range noises {
		for _, n := range []int{2, 3, 6, 8, 12, 20} {
			directed := 0
			for range trials {
				rs := make([]float64, n)
				for i := range rs {
					rs[i] = math.Exp(noise())
				}
				if DefaultJudge().Compare(rs).Decided() {
					directed++
				}
			}
			rate := float64(directed) / trials
			// alpha plus three binomial standard errors of the estimate
			if limit := DefaultAlpha + 3*math.Sqrt(DefaultAlpha*(1-DefaultAlpha)/trials); rate > limit {
				t.Errorf("%s noise, %d rounds: a direction in %.2f%% of identical A/Bs, want at most %.0f%%", name, n, 100*rate, 100*DefaultAlpha)
			}
			if n < RoundsNeeded(DefaultAlpha) && directed > 0 {
				t.Errorf("%s noise, %d rounds: %d directions from fewer rounds than the test needs", name, n, directed)
			}
		}
	}
	found := 0
	for range trials {
		rs := make([]float64, 8)
		for i := range rs {
			rs[i] = 1.04 * math.Exp(0.02*rng.NormFloat64())
		}
		if DefaultJudge().Compare(rs).Kind == Faster {
			found++
		}
	}
	if rate := float64(found) / trials; rate < 0.8 {
		t.Errorf("a 4%% step in 2%% noise over 8 rounds found %.0f%% of the time, want most", 100*rate)
	}
}

func TestJudgeAgainstAThresholdHasNoMinimumStep(t *testing.T) {
	rs := []float64{0.93, 0.931, 0.932, 0.929, 0.933, 0.934}
	if v := DefaultJudge().Against(rs, 0.925); v.Kind != Faster || v.Against != 0.925 || !strings.Contains(v.Text, "against 0.925") {
		t.Errorf("Against(0.925) = %s, want above it", v.Text)
	}
}

func TestJudgeValidate(t *testing.T) {
	if err := (Judge{Alpha: 0.7, MinStep: -1, Test: "t"}).Validate(); err == nil || !strings.Contains(err.Error(), "--alpha 0.7") || !strings.Contains(err.Error(), "--min-step -1") || !strings.Contains(err.Error(), `test "t"`) {
		t.Errorf("Validate() = %v, want every problem named", err)
	}
	if err := DefaultJudge().Validate(); err != nil {
		t.Errorf("DefaultJudge().Validate() = %v", err)
	}
}

func TestOldComparisonVerdictsStillRead(t *testing.T) {
	var c Comparison
	if err := json.Unmarshal([]byte(`{"verdict":"B faster in every round"}`), &c); err != nil || c.Verdict.Kind != "" || !strings.Contains(c.Verdict.Text, "B faster in every round (an old verdict") {
		t.Errorf("old verdict read as %+v (%v)", c.Verdict, err)
	}
}

// A verdict without a direction says what its rounds could have found: the spread, the step
// they find with 80 % power, and the rounds a 2 % step takes. A verdict with a direction, and
// rounds without spread, say nothing of it.
func TestJudgeSaysWhatItsRoundsCanResolve(t *testing.T) {
	j := DefaultJudge()
	noisy := []float64{0.90, 1.12, 0.97, 1.08, 0.85, 1.15, 1.01, 0.95}
	v := j.Compare(noisy)
	if v.Kind != NoDifference {
		t.Fatalf("Compare(%v) = %s, want no difference", noisy, v.Text)
	}
	want := sdLog(noisy, 1)
	if math.Abs(v.SDLog-want) > 1e-12 || v.SDLog < 0.08 || v.SDLog > 0.12 {
		t.Errorf("SDLog = %v, want the log ratios' sample sd %v (about 0.1)", v.SDLog, want)
	}
	// 8 rounds reach a two-sided 0.039 (rank sums 0-3 of 36: 10 of 256 outcomes): t(0.98047, 7) +
	// t(0.8, 7) = 2.5330 + 0.8960 (Student's t, by numerical integration), over sqrt(3/pi * 8):
	// a shift of 1.2406 sd
	if got := reachableAlpha(8, 0.05); math.Abs(got-10.0/256) > 1e-12 {
		t.Errorf("reachableAlpha(8, 0.05) = %v, want 10/256", got)
	}
	if r := math.Exp(1.2406*v.SDLog) - 1; math.Abs(v.Resolves-r) > 0.001 {
		t.Errorf("Resolves = %v, want about %v", v.Resolves, r)
	}
	// for 2 %: ((1.959964 + 0.841621) sd / log 1.02)^2 / (3/pi), the large-sample figure (over
	// 60 rounds; the minimum step's part, pi/2 (0.8416 sd / log(1.02/1.01))^2, is smaller here)
	if n := math.Ceil(math.Pow(2.801585*v.SDLog/math.Log(1.02), 2) / (3 / math.Pi)); math.Abs(float64(v.RoundsForStep)-n) > 1 {
		t.Errorf("RoundsForStep = %d, want %.0f", v.RoundsForStep, n)
	}
	for _, part := range []string{"no difference: median", fmt.Sprintf("at this spread (%.1f %% a round) 8 rounds find a step of about %.1f %% four times in five", 100*v.SDLog, 100*v.Resolves), fmt.Sprintf("a 2 %% step takes about %d rounds", v.RoundsForStep)} {
		if !strings.Contains(v.Text, part) {
			t.Errorf("text %q lacks %q", v.Text, part)
		}
	}
	if few := j.Compare(noisy[:6]); few.Kind != NoDifference || few.Resolves <= v.Resolves || !strings.Contains(few.Text, "6 rounds find a step of about") {
		t.Errorf("6 rounds: %s (resolves %v), want no difference, a larger step than 8 rounds' %v", few.Text, few.Resolves, v.Resolves)
	}
	// fewer rounds than the test needs find nothing: only what a 2 % step takes is said
	if few := j.Compare(noisy[:4]); few.Kind != NotEnoughRounds || few.Resolves != 0 || few.RoundsForStep < 50 || !strings.Contains(few.Text, "a 2 % step takes about") || strings.Contains(few.Text, "find steps") {
		t.Errorf("4 rounds: %s (resolves %v, rounds for 2 %% %d), want not enough rounds and only the rounds a 2 %% step takes", few.Text, few.Resolves, few.RoundsForStep)
	}
	// 3 rounds' spread says too little: nothing is estimated
	if three := j.Compare(noisy[:3]); three.Resolves != 0 || three.RoundsForStep != 0 || strings.Contains(three.Text, "spread") {
		t.Errorf("3 rounds: %s, want no estimate", three.Text)
	}
	// 6 rounds reach alpha only all on one side: the chance of that, Phi(d/sd)^6 = 0.8
	six := []float64{1.01, 0.99, 1.02, 0.98, 1.03, 0.97}
	if v6 := j.Compare(six); math.Abs(math.Log1p(v6.Resolves)-v6.SDLog*normalQuantile(math.Pow(0.8, 1.0/6))) > 1e-12 {
		t.Errorf("6 rounds: resolves %v, want exp(sd * Phi^-1(0.8^(1/6))) - 1 with sd %v", v6.Resolves, v6.SDLog)
	}
	// rounds spread less than the minimum step: what they find is bounded by the step called
	tight := []float64{1.004, 0.996, 1.002, 0.998, 1.006, 0.994, 1.001, 0.999}
	if vt := j.Compare(tight); vt.Kind != NoDifference || vt.Resolves <= j.MinStep {
		t.Errorf("rounds spread %.2f %%: resolves %v, want above the minimum step %v (%s)", 100*vt.SDLog, vt.Resolves, j.MinStep, vt.Text)
	}
	// a sign-test verdict (old bisect logs) gets no figure: it is the signed-rank test's
	if sign := (Judge{Alpha: 0.05, MinStep: 0.01, Test: TestSign}).Compare(noisy); sign.Resolves != 0 || strings.Contains(sign.Text, "spread") {
		t.Errorf("sign test: %s, want no estimate", sign.Text)
	}
	for _, r := range [][]float64{noisy[:3], {1e300, 1e-300, 1e300, 1e-300, 1e300, 1e-300}} {
		if _, err := json.Marshal(j.Compare(r)); err != nil {
			t.Errorf("the verdict of %v does not marshal: %v", r, err)
		}
	}
	if up := j.Compare([]float64{1.05, 1.06, 1.04, 1.05, 1.07, 1.05}); up.Kind != Faster || up.Resolves != 0 || strings.Contains(up.Text, "spread") {
		t.Errorf("a direction: %s (resolves %v), want faster and nothing of what it could resolve", up.Text, up.Resolves)
	}
	if same := j.Compare([]float64{1, 1, 1, 1, 1, 1}); same.Kind != NoDifference || same.Resolves != 0 || strings.Contains(same.Text, "spread") {
		t.Errorf("no spread: %s (resolves %v), want no difference and no estimate", same.Text, same.Resolves)
	}
}

// The stated figures hold for the judge's own test: a true step of what 8 rounds are said to
// find is found by 8 rounds in about 80 % of A/Bs, and a true 2 % step by the rounds it is said
// to take, with normal noise, at spreads from below the minimum step (where the step called
// bounds what is found) to 5 %, and at the test's least rounds (6, where only rounds all on one
// side decide); 65-95 % is what the approximation is held to.
func TestJudgeResolvableStepIsFoundAtItsStatedPower(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	j := DefaultJudge()
	const trials = 1500
	for _, c := range []struct {
		sd     float64
		rounds int
	}{{0.02, 8}, {0.05, 8}, {0.05, 6}, {0.005, 8}, {0.015, 24}} {
		sd := c.sd
		// the figures a verdict states for rounds with exactly this spread
		v := Verdict{Rounds: c.rounds, SDLog: sd, Alpha: j.Alpha, Needed: RoundsNeeded(j.Alpha), Test: TestSignedRank}
		v.power(j.MinStep)
		for _, tc := range []struct {
			what   string
			rounds int
			step   float64
		}{
			{fmt.Sprintf("the step %d rounds find", c.rounds), c.rounds, v.Resolves},
			{"a 2 % step in the rounds it takes", v.RoundsForStep, 0.02},
		} {
			found := 0
			for range trials {
				r := make([]float64, tc.rounds)
				for i := range r {
					r[i] = (1 + tc.step) * math.Exp(sd*rng.NormFloat64())
				}
				if j.Compare(r).Kind == Faster {
					found++
				}
			}
			// the rounds stated never go below the test's least (6): there a step may be found
			// more often than four times in five
			floor := tc.rounds == v.Needed && tc.step == 0.02
			if p := float64(found) / trials; p < 0.65 || (p > 0.95 && !floor) {
				t.Errorf("sd %.3f, %s (%.1f %%, %d rounds): found in %.0f %% of A/Bs, want about 80 %%", sd, tc.what, 100*tc.step, tc.rounds, 100*p)
			} else {
				t.Logf("sd %.3f, %s (%.1f %%, %d rounds): found in %.0f %% of A/Bs", sd, tc.what, 100*tc.step, tc.rounds, 100*p)
			}
		}
	}
}

// tQuantile against Student's t quantiles (numerical integration of the density).
func TestTQuantile(t *testing.T) {
	for _, tc := range []struct{ p, df, want float64 }{
		{0.975, 5, 2.5706}, {0.975, 7, 2.3646}, {1 - 10.0/256/2, 7, 2.5330}, {0.8, 7, 0.8960}, {0.975, 1000, 1.9623},
	} {
		if got := tQuantile(tc.p, tc.df); math.Abs(got-tc.want) > 0.002*tc.want {
			t.Errorf("tQuantile(%v, %v) = %v, want %v", tc.p, tc.df, got, tc.want)
		}
	}
}
