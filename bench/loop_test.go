package bench

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestLoopOf(t *testing.T) {
	cycle := func(prefix []int, c []int, n int) []int {
		out := append([]int{}, prefix...)
		for i := 0; len(out) < n; i++ {
			out = append(out, c[i%len(c)])
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]int, 512)
	for i := range random {
		random[i] = rng.IntN(32000)
	}
	for _, c := range []struct {
		name   string
		tokens []int
		want   *Loop
	}{
		{"the bigram pair's cycle after its way in", cycle([]int{9, 8, 7, 6, 5}, []int{1, 2, 3, 4}, 512), &Loop{Period: 4, From: 5}},
		{"one token over and over", cycle(nil, []int{7}, 100), &Loop{Period: 1, From: 0}},
		{"the cycle's start is where the repetition begins, not the prefix's end", cycle([]int{5, 3, 4}, []int{3, 4}, 64), &Loop{Period: 2, From: 1}},
		{"text, no cycle", random, nil},
		{"a cycle over less than half", append(append([]int{}, random[:300]...), cycle(nil, []int{1, 2}, 200)...), nil},
		{"three times is not yet a loop", cycle([]int{100, 200, 300, 400, 500, 600}, []int{1, 2, 3, 4, 5}, 21), nil},
		{"longer than maxLoopPeriod", cycle(nil, random[:maxLoopPeriod+1], 512), nil},
		{"the longest period looked for", cycle(nil, random[:maxLoopPeriod], 512), &Loop{Period: maxLoopPeriod, From: 0}},
		{"nothing generated", nil, nil},
	} {
		if got := loopOf(c.tokens); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: loopOf = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A run whose row 0 loops is named under the table, once per bundle, with its cycle; a run
// that does not loop is not.
func TestWriteTableWarnsOfLoops(t *testing.T) {
	looped := &Record{Bundle: "/b/loop", Rows: []Row{{Generated: 512, Loop: &Loop{Period: 4, From: 9}}}}
	looped.Identity.Label = "loop-run"
	looped.Summary = summarize(looped.Rows)
	again := *looped
	plain := &Record{Bundle: "/b/text", Rows: []Row{{Generated: 512}}}
	plain.Identity.Label = "text-run"
	plain.Summary = summarize(plain.Rows)
	var b strings.Builder
	if err := (&Result{Runs: []*Record{looped, &again, plain}}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := "warning: row 0 of loop-run loops: its output repeats a 4-token cycle from token 9 of 512."
	if strings.Count(out, "warning: row 0 of") != 1 || !strings.Contains(out, want) {
		t.Errorf("table:\n%s\nwant one warning: %s", out, want)
	}
}
