package publish

import (
	"strings"
	"testing"

	"github.com/llbuild/llbuild/bench"
)

func TestGateDecisionIsTheJudges(t *testing.T) {
	cmp := func(ratios ...float64) *bench.Comparison {
		c := &bench.Comparison{Ratios: ratios}
		c.Min, c.Median, c.Max = bench.Spread(ratios)
		c.Verdict = bench.DefaultJudge().Compare(ratios)
		return c
	}
	same := [2]int{1024, 1024}
	for _, tc := range []struct {
		name    string
		cmp     *bench.Comparison
		invalid []string
		slots   [2]int
		pass    bool
		want    string
	}{
		{"slower in six rounds", cmp(0.90, 0.93, 0.95, 0.92, 0.91, 0.94), nil, same, false, "new/old is slower: median 0.925"},
		{"three rounds all slower: not enough to decide, so refused", cmp(0.90, 0.93, 0.95), nil, same, false, "not enough rounds to decide (6 needed, 3 measured)"},
		{"three rounds all faster: refused too, no verdict", cmp(1.1, 1.2, 1.15), nil, same, false, "raise --gate-rounds"},
		{"as fast", cmp(0.99, 1.00, 1.01, 0.98, 1.02, 1.0), nil, same, true, "not slower: new/old no difference"},
		{"faster", cmp(1.1, 1.2, 1.15, 1.12, 1.11, 1.13), nil, same, true, "not slower: new/old faster"},
		{"a broken new server", cmp(1.2, 1.2, 1.2, 1.2, 1.2, 1.2), []string{"new round 0: canaries 3/4"}, same, false, "canaries 3/4"},
		{"different per-slot contexts", cmp(1, 1, 1, 1, 1, 1), nil, [2]int{1024, 4096}, false, "different per-slot contexts (old 1024 tokens, new 4096)"},
		{"nothing measured", nil, nil, same, false, "no round"},
	} {
		pass, why := GateDecision(tc.cmp, tc.invalid, tc.slots)
		if pass != tc.pass || !strings.Contains(why, tc.want) {
			t.Errorf("%s: pass %v %q, want %v with %q", tc.name, pass, why, tc.pass, tc.want)
		}
	}
}
