package bench

import "testing"

func TestInvalidRunSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Record
		want string
	}{
		{"its validity problems", Record{Bundle: "a", Round: 2, Decision: "invalid: x", Invalid: []string{"canary 1 differs", "cache reused"}},
			"a round 2: canary 1 differs, cache reused"},
		{"the decision where it has none", Record{Bundle: "b", Round: 0, Decision: "crashed"}, "b round 0: crashed"},
		{"its error after them", Record{Bundle: "c", Round: 1, Invalid: []string{"incomplete"}, Error: "server exited"},
			"c round 1: incomplete: server exited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InvalidRun(&tc.r); got != tc.want {
				t.Errorf("InvalidRun() = %q, want %q", got, tc.want)
			}
		})
	}
}
