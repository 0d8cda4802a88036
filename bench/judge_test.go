package bench

import (
	"encoding/json"
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
