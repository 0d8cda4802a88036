package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// Verdict kinds: the only words llbuild uses for one side against another.
const (
	Faster          = "faster"
	Slower          = "slower"
	NoDifference    = "no difference"
	NotEnoughRounds = "not enough rounds"
)

// Tests the judge knows. TestSignedRank is the one every decision uses; TestSign is kept only to
// judge again the bisect logs written before the signed-rank test was the rule.
const (
	TestSignedRank = "signed-rank"
	TestSign       = "sign"
)

// Defaults every command shares (bench, --sweep, promotion, bisect, the publish gate).
const (
	// DefaultAlpha is the judge's level: a direction is said when the two-sided p-value is at or
	// below it, so two identical builds get one in at most this share of A/Bs.
	DefaultAlpha = 0.05
	// DefaultMinStep is the least |median ratio - 1| the judge calls a difference: a significant
	// step smaller than it is "no difference" (no build is worth shipping for it).
	DefaultMinStep = 0.01
)

// Judge decides from interleaved rounds whether B differs from A, by Wilcoxon's signed-rank
// test of the rounds' log ratios (exact distribution, ties by midranks), two-sided at Alpha,
// and calls a difference only when the median ratio is at least MinStep from 1.
type Judge struct {
	Alpha   float64 `json:"alpha"`
	MinStep float64 `json:"minStep"`
	// Test is TestSignedRank, or TestSign for a bisect log that was judged by it.
	Test string `json:"test"`
}

// DefaultJudge is the judge with the shared defaults.
func DefaultJudge() Judge {
	return Judge{Alpha: DefaultAlpha, MinStep: DefaultMinStep, Test: TestSignedRank}
}

// Validate says what is wrong with a judge's settings, in the flags' words.
func (j Judge) Validate() error {
	var problems []string
	if !(j.Alpha > 0 && j.Alpha < 0.5) {
		problems = append(problems, fmt.Sprintf("--alpha %v: want a level between 0 and 0.5 (%v is the default)", j.Alpha, DefaultAlpha))
	}
	if !(j.MinStep >= 0 && j.MinStep < 1) {
		problems = append(problems, fmt.Sprintf("--min-step %v: want a fraction from 0 to below 1 (%v, 1%%, is the default)", j.MinStep, DefaultMinStep))
	}
	if j.Test != "" && j.Test != TestSignedRank && j.Test != TestSign {
		problems = append(problems, fmt.Sprintf("test %q: want %s (or %s for old bisect logs)", j.Test, TestSignedRank, TestSign))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func (j Judge) test() string {
	if j.Test == "" {
		return TestSignedRank
	}
	return j.Test
}

// Level is the level the judge decides at: Alpha, or DefaultAlpha where Alpha is not set.
func (j Judge) Level() float64 {
	if j.Alpha > 0 {
		return j.Alpha
	}
	return DefaultAlpha
}

// Verdict is the judge's word on a set of rounds, with everything it was decided from.
type Verdict struct {
	// Kind is Faster, Slower, NoDifference or NotEnoughRounds: B against A (or against Against).
	Kind string `json:"kind"`
	Test string `json:"test"`
	// P is the two-sided p-value of the rounds' log ratios against log(Against); 1 when no
	// round differs from it.
	P       float64 `json:"p"`
	Alpha   float64 `json:"alpha"`
	MinStep float64 `json:"minStep"`
	// Against is the ratio tested against: 1 for an A/B, a bisect's threshold for a probe.
	Against float64 `json:"against"`
	Rounds  int     `json:"rounds"`
	// Needed is the fewest rounds with which the test can reach Alpha at all.
	Needed int     `json:"roundsNeeded"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// SDLog is the sample standard deviation of the rounds' log ratios: their spread, 0 with
	// fewer than two rounds.
	SDLog float64 `json:"sdLog"`
	// Resolves is, for a signed-rank verdict without a direction (no difference, not enough
	// rounds) of 4 rounds or more, about the smallest step |ratio - 1| that this many rounds with
	// this spread call with 80 % power at Alpha, the minimum step included (normal noise; see
	// resolvableLog); 0 where it is not estimated.
	Resolves float64 `json:"resolves,omitempty"`
	// RoundsForStep is, with Resolves, about how many rounds at this spread call a 2 % step with
	// that power (twice the default minimum step: a step right at the minimum is called only half
	// the time, its median as often below it as above).
	RoundsForStep int `json:"roundsForStep,omitempty"`
	// Text says the verdict in a sentence: the word, the test, p, rounds, median and range.
	Text string `json:"text"`
}

// UnmarshalJSON reads a verdict, or the sentence comparisons.json held before the judge (a
// campaign's old A/Bs): kept as its text, with no kind, since no test made it.
func (v *Verdict) UnmarshalJSON(b []byte) error {
	var old string
	if json.Unmarshal(b, &old) == nil {
		*v = Verdict{Text: old + " (an old verdict: every round on one side, no test)"}
		return nil
	}
	type plain Verdict
	return json.Unmarshal(b, (*plain)(v))
}

// Decided says the verdict gives a direction.
func (v Verdict) Decided() bool { return v.Kind == Faster || v.Kind == Slower }

// RoundsNeeded is the fewest rounds with which the test can give a two-sided p at or below alpha:
// n rounds all on one side give p = 2/2^n (the same for both tests), so n >= log2(2/alpha).
func RoundsNeeded(alpha float64) int {
	if !(alpha > 0) {
		alpha = DefaultAlpha
	}
	n := 1
	for 2/math.Pow(2, float64(n)) > alpha {
		n++
	}
	return n
}

// Compare judges B/A ratios round by round against 1, with the minimum step.
func (j Judge) Compare(ratios []float64) Verdict {
	return j.judge(ratios, 1, j.MinStep)
}

// Against judges ratios against x (a bisect probe against its threshold): which side of x they
// lie on, beyond chance; no minimum step, the threshold being one already.
func (j Judge) Against(ratios []float64, x float64) Verdict {
	return j.judge(ratios, x, 0)
}

func (j Judge) judge(ratios []float64, x, step float64) Verdict {
	v := Verdict{Test: j.test(), Alpha: j.Level(), MinStep: step, Against: x, Rounds: len(ratios), Needed: RoundsNeeded(j.Level())}
	v.Min, v.Median, v.Max = Spread(ratios)
	below, above := OneSided(v.Test, ratios, x)
	v.P = math.Min(1, 2*math.Min(below, above))
	up := above < below // the side the test points to
	v.SDLog = sdLog(ratios, x)
	stats := v.stats()
	switch {
	case v.Rounds < v.Needed:
		v.Kind = NotEnoughRounds
		v.Text = fmt.Sprintf("not enough rounds to decide (%d needed, %d measured): %s", v.Needed, v.Rounds, stats) + v.power(step)
	case v.P > v.Alpha:
		v.Kind = NoDifference
		v.Text = fmt.Sprintf("no difference: %s > %g", stats, v.Alpha) + v.power(step)
	case math.Abs(v.Median/x-1) < step || (v.Median > x) != up:
		v.Kind = NoDifference
		v.Text = fmt.Sprintf("no difference worth a step: %s, but the median is within the minimum step %g of %g", stats, step, x)
	case up:
		v.Kind = Faster
		v.Text = fmt.Sprintf("faster: %s <= %g", stats, v.Alpha)
	default:
		v.Kind = Slower
		v.Text = fmt.Sprintf("slower: %s <= %g", stats, v.Alpha)
	}
	return v
}

// The power the resolvable step is stated at, and Wilcoxon's asymptotic efficiency against the
// t test the estimate is made with.
const (
	resolvePower  = 0.8
	wilcoxonEffic = 3 / math.Pi
)

// power sets Resolves and RoundsForStep from the rounds' spread and says them: so that "no
// difference" from noisy rounds is not read as "the same speed". minStep is the least step the
// verdict calls (the judge's minimum step; 0 against a threshold); the rounds are counted for a
// 2 % step (twice the default minimum step). Only for the signed-rank test, and from 4 rounds:
// a spread from fewer says too little.
func (v *Verdict) power(minStep float64) string {
	if v.Test != TestSignedRank || v.Rounds < 4 || !(v.SDLog > 0) || math.IsInf(v.SDLog, 0) {
		return ""
	}
	m := math.Log1p(math.Max(minStep, 0))
	step := 2 * DefaultMinStep
	v.RoundsForStep = roundsFor(math.Log1p(step), v.SDLog, v.Alpha, m, v.Needed)
	l := resolvableLog(v.Rounds, v.SDLog, v.Alpha, m)
	if r := math.Exp(l) - 1; !math.IsInf(l, 1) && !math.IsInf(r, 0) && !math.IsNaN(r) {
		v.Resolves = r
		return fmt.Sprintf("; at this spread (%.1f %% a round) %d rounds find a step of about %.1f %% four times in five, a %g %% step takes about %d rounds",
			100*v.SDLog, v.Rounds, 100*v.Resolves, 100*step, v.RoundsForStep)
	}
	// fewer rounds than the test needs find no step of any size
	return fmt.Sprintf("; at this spread (%.1f %% a round) a %g %% step takes about %d rounds", 100*v.SDLog, 100*step, v.RoundsForStep)
}

// resolvableLog is about the smallest shift of the log ratios that n rounds with spread sd find
// with resolvePower at two-sided alpha, m being the least shift called (the log of one plus the
// minimum step). The test's part: with only the rounds all on one side reaching alpha, the
// chance of that (normal noise), else the t test's shift (n-1 degrees of freedom) at the level
// the exact signed-rank test can reach with n rounds, over Wilcoxon's efficiency. The minimum
// step's part: the rounds' median past m with that chance (the median's spread about
// sd·sqrt(π/2n)). The larger of the two.
func resolvableLog(n int, sd, alpha, m float64) float64 {
	if n < 2 {
		return math.Inf(1)
	}
	a := reachableAlpha(n, alpha)
	if !(a > 0) {
		return math.Inf(1)
	}
	var test float64
	if math.Abs(a-2/math.Pow(2, float64(n))) < 1e-15 {
		test = sd * normalQuantile(math.Pow(resolvePower, 1/float64(n)))
	} else {
		df := float64(n - 1)
		test = (tQuantile(1-a/2, df) + tQuantile(resolvePower, df)) * sd / math.Sqrt(wilcoxonEffic*float64(n))
	}
	median := m + normalQuantile(resolvePower)*sd*math.Sqrt(math.Pi/(2*float64(n)))
	return math.Max(test, median)
}

// roundsFor is about how many rounds with spread sd find a shift of the log ratios of shift with
// resolvePower at alpha, m the least shift called: at least needed, at most a billion.
func roundsFor(shift, sd, alpha, m float64, needed int) int {
	for n := max(needed, 2); n <= exactAlphaRounds; n++ {
		if resolvableLog(n, sd, alpha, m) <= shift {
			return n
		}
	}
	if !(shift > m) {
		return 1e9
	}
	z := normalQuantile(1-alpha/2) + normalQuantile(resolvePower)
	test := math.Pow(z*sd/shift, 2) / wilcoxonEffic
	median := math.Pi / 2 * math.Pow(normalQuantile(resolvePower)*sd/(shift-m), 2)
	return int(math.Min(math.Max(math.Ceil(math.Max(test, median)), exactAlphaRounds+1), 1e9))
}

// exactAlphaRounds is the most rounds for which reachableAlpha computes the exact test's level;
// beyond, the test's steps are fine enough to take alpha itself.
const exactAlphaRounds = 60

// reachableAlpha is the largest two-sided level at or below alpha that the exact signed-rank
// test reaches with n rounds without ties (its p-values come in steps: with 8 rounds 0.039, not
// 0.05); 0 where no outcome reaches alpha. Kept per n and alpha: a verdict's roundsFor asks it
// for every round count up to exactAlphaRounds.
func reachableAlpha(n int, alpha float64) float64 {
	if n > exactAlphaRounds {
		return alpha
	}
	type key struct {
		n     int
		alpha float64
	}
	if a, ok := reachable.Load(key{n, alpha}); ok {
		return a.(float64)
	}
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i + 1
	}
	counts := rankSumCounts(ranks)
	all, cum, best := math.Pow(2, float64(n)), 0.0, 0.0
	for s := 0; s <= (len(counts)-1)/2; s++ {
		cum += counts[s]
		if p := 2 * cum / all; p <= alpha {
			best = p
		} else {
			break
		}
	}
	reachable.Store(key{n, alpha}, best)
	return best
}

var reachable sync.Map // reachableAlpha's levels

// rankSumCounts is the null distribution of the signed-rank sum: counts[s], how many of the 2^n
// ways of giving each of the ranks a side put rank sum s above.
func rankSumCounts(ranks []int) []float64 {
	total := 0
	for _, r := range ranks {
		total += r
	}
	counts := make([]float64, total+1)
	counts[0] = 1
	for _, r := range ranks {
		for s := total; s >= r; s-- {
			counts[s] += counts[s-r]
		}
	}
	return counts
}

// tQuantile is Student's t distribution's quantile at p for df degrees of freedom, by the
// Cornish-Fisher expansion around the normal's (within about 0.001 from 5 degrees of freedom).
func tQuantile(p, df float64) float64 {
	z := normalQuantile(p)
	z2 := z * z
	return z + z*(z2+1)/(4*df) + z*(5*z2*z2+16*z2+3)/(96*df*df) + z*(3*z2*z2*z2+19*z2*z2+17*z2-15)/(384*df*df*df)
}

// sdLog is the sample standard deviation of log(ratio/x) over the rounds (0 with fewer than two).
func sdLog(ratios []float64, x float64) float64 {
	var ls []float64
	for _, r := range ratios {
		if l := math.Log(r / x); !math.IsNaN(l) && !math.IsInf(l, 0) {
			ls = append(ls, l)
		}
	}
	if len(ls) < 2 {
		return 0
	}
	mean := 0.0
	for _, l := range ls {
		mean += l
	}
	mean /= float64(len(ls))
	ss := 0.0
	for _, l := range ls {
		ss += (l - mean) * (l - mean)
	}
	return math.Sqrt(ss / float64(len(ls)-1))
}

// normalQuantile is the standard normal distribution's quantile function.
func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

func (v Verdict) stats() string {
	if v.Rounds == 0 {
		return "no round measured both sides"
	}
	against := ""
	if v.Against != 1 {
		against = fmt.Sprintf(" against %.3f", v.Against)
	}
	return fmt.Sprintf("median %.3f (%.3f-%.3f, %d rounds)%s, %s test p = %.3f", v.Median, v.Min, v.Max, v.Rounds, against, v.Test, v.P)
}

// OneSided are the test's one-sided p-values of ratios against x: below, the chance of rounds
// lying this far below x or further were their median x; above, the same above.
func OneSided(test string, ratios []float64, x float64) (below, above float64) {
	if test == TestSign {
		b, a := Sides(ratios, x)
		return signP(b, len(ratios)), signP(a, len(ratios))
	}
	return signedRankP(ratios, x)
}

// Spread is the minimum, median and maximum of xs (zeros when empty).
func Spread(xs []float64) (lo, med, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

// Sides counts the ratios below and above x.
func Sides(ratios []float64, x float64) (below, above int) {
	for _, r := range ratios {
		switch {
		case r < x:
			below++
		case r > x:
			above++
		}
	}
	return below, above
}

// signP is the one-sided sign test's p-value: the chance that k or more of n rounds fall on
// one side of a value the true ratio sits exactly at (each round then a coin toss).
func signP(k, n int) float64 {
	p := 0.0
	for i := k; i <= n; i++ {
		p += binom(n, i)
	}
	return p / math.Pow(2, float64(n))
}

func binom(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// signedRankP is Wilcoxon's one-sided signed-rank test of log(ratio/x): pb is the chance of a
// rank sum of the rounds above x this small or smaller, pa this large or larger, were the
// ratios' median x (each round's side a coin toss). Rounds at x are dropped; tied distances
// share their midrank (doubled, to count exactly).
func signedRankP(ratios []float64, x float64) (pb, pa float64) {
	type dist struct {
		abs   float64
		above bool
	}
	var ds []dist
	for _, r := range ratios {
		if v := math.Log(r / x); v != 0 && !math.IsNaN(v) {
			ds = append(ds, dist{math.Abs(v), v > 0})
		}
	}
	n := len(ds)
	if n == 0 {
		return 1, 1
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].abs < ds[j].abs })
	ranks := make([]int, n)
	for i := 0; i < n; {
		j := i
		for j+1 < n && ds[j+1].abs == ds[i].abs {
			j++
		}
		for k := i; k <= j; k++ {
			ranks[k] = i + j + 2 // twice the midrank of ranks i+1..j+1
		}
		i = j + 1
	}
	wPlus := 0
	for k, r := range ranks {
		if ds[k].above {
			wPlus += r
		}
	}
	counts := rankSumCounts(ranks)
	all := math.Pow(2, float64(n))
	for s, c := range counts {
		if s <= wPlus {
			pb += c
		}
		if s >= wPlus {
			pa += c
		}
	}
	return pb / all, pa / all
}
