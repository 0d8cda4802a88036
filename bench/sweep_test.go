package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/manifest"
)

// pollVariant is a sweep's variant of testBundle with --poll v, named as a sweep names it.
func pollVariant(v string) *Bundle {
	b := testBundle(func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--poll", v) })
	b.Name, b.Dir = "poll"+v, "/lab/sweep/poll"+v
	return b
}

// sweepDefaults is the swept bundle itself, named as a sweep names it.
func sweepDefaults() *Bundle {
	b := testBundle()
	b.Name = "defaults"
	return b
}

// A sweep's winner is the judge's, not a single row 0's: the screen only ranks; the leader meets
// the defaults and the next ones in full mode, and is called the winner only when the judge says
// it is faster than the defaults and slower than none of them. When every setting runs as fast
// as the defaults, the sweep says no setting is faster.
func TestSweepWinnerIsTheJudges(t *testing.T) {
	variant, base := pollVariant, sweepDefaults()
	variants := []*Bundle{variant("10"), variant("20"), variant("30"), variant("40")}
	for _, tc := range []struct {
		name             string
		speeds           map[string]int
		loop             int
		winner, conclude string
	}{
		{"one setting faster", map[string]int{"defaults": 1000, "poll10": 1500, "poll20": 2000, "poll30": 900, "poll40": 1200}, 0, "poll20",
			"poll20 is faster than the defaults: faster: median 2.000"},
		{"none faster", map[string]int{"defaults": 1000, "poll10": 1000, "poll20": 1000, "poll30": 1000, "poll40": 1000}, 0, "",
			"no setting is faster than the defaults"},
		{"output in a loop", map[string]int{"defaults": 1000, "poll10": 1500, "poll20": 2000, "poll30": 900, "poll40": 1200}, 4, "poll20",
			"poll20 is faster than the defaults: faster: median 2.000 (2.000-2.000, 6 rounds), signed-rank test p = 0.031 <= 0.05; but row 0's output loops (defaults: a 4-token cycle from token 0), so settings that change the drafts were measured on that cycle, not on text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeLlama{flipAt: -1, loop: tc.loop, speed: func(b *Bundle) int { return tc.speeds[b.Name] }}
			o := SweepOptions{Options: Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), start: fake.starter()}, Full: fastProtocol(ModeFull)}
			res, err := Sweep(context.Background(), base, variants, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Winner != tc.winner || !strings.Contains(res.Conclusion, tc.conclude) || (tc.loop == 0) == strings.Contains(res.Conclusion, "loops") {
				t.Errorf("winner %q (%s), want %q with %q", res.Winner, res.Conclusion, tc.winner, tc.conclude)
			}
			if len(res.Screen.Runs) != 5 || res.Full == nil || len(res.Full.Runs) != 4*RoundsNeeded(DefaultAlpha) {
				t.Fatalf("screen %d runs, full %v: want 5 screens, then the leader, the defaults and two more over 6 rounds", len(res.Screen.Runs), res.Full)
			}
			if res.Verdicts[0].A != "defaults" || res.Verdicts[0].B != res.Leader || len(res.Verdicts) != 3 {
				t.Errorf("verdicts %+v: want the leader over the defaults first, then over the next two", res.Verdicts)
			}
			for _, r := range res.Full.Runs {
				if r.Protocol.Mode != ModeFull {
					t.Errorf("full run %s in mode %s", r.Identity.Label, r.Protocol.Mode)
				}
			}
			var text strings.Builder
			if err := res.WriteText(&text); err != nil || !strings.Contains(text.String(), "it only picks what the full run measures") {
				t.Errorf("text:\n%s", text.String())
			}
			// the winner's bundle is named, to serve as it is; no winner, no bundle
			winnerLine := "the winner's bundle: " + variants[1].Dir + " (--poll (unset) → 20; serve it with llbuild serve " + variants[1].Dir + ")\n"
			if tc.winner != "" && (res.WinnerDir != variants[1].Dir || !strings.HasSuffix(text.String(), winnerLine)) {
				t.Errorf("winner's bundle %q, text:\n%s\nwant it to end with %q", res.WinnerDir, text.String(), winnerLine)
			}
			if tc.winner == "" && (res.WinnerDir != "" || strings.Contains(text.String(), "the winner's bundle")) {
				t.Errorf("no winner, but its bundle %q is named:\n%s", res.WinnerDir, text.String())
			}
		})
	}
}

// A sweep whose defaults crash in the full run compared nothing: it says so and is an error,
// not a verdict of "no difference". A variant that crashes in the screen is only ranked last.
func TestSweepWithoutAPairIsAnError(t *testing.T) {
	variant, base := pollVariant, sweepDefaults()
	variants := []*Bundle{variant("10"), variant("20"), variant("30")}
	speeds := map[string]int{"defaults": 1000, "poll10": 1500, "poll20": 2000, "poll30": 900}
	for _, tc := range []struct {
		name    string
		fails   func(b *Bundle, n int) bool
		wantErr string
		leader  string
	}{
		{"the defaults crash in the full run", func(b *Bundle, n int) bool { return b.Name == "defaults" && n > 1 },
			"the full run has no round in which both the defaults and poll20 ran validly", "poll20"},
		{"a variant crashes in the screen", func(b *Bundle, n int) bool { return b.Name == "poll20" }, "", "poll10"},
		{"every variant crashes", func(b *Bundle, n int) bool { return b.Name != "defaults" }, "no variant's screen was valid", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeLlama{flipAt: -1, speed: func(b *Bundle) int { return speeds[b.Name] }, fails: tc.fails}
			o := SweepOptions{Options: Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), start: fake.starter()}, Full: fastProtocol(ModeFull)}
			res, err := Sweep(context.Background(), base, variants, o)
			err = res.Err(err)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Err() = %v, want %q", err, tc.wantErr)
			}
			if res.Leader != tc.leader || (tc.wantErr != "" && res.Winner != "") {
				t.Errorf("leader %q winner %q (%s), want leader %q", res.Leader, res.Winner, res.Conclusion, tc.leader)
			}
		})
	}
}
