package bisect

import (
	"context"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
)

// validGiven is a new campaign's settings with nothing wrong in them.
func validGiven() Given {
	return Given{Good: "b100", Bad: "master", Target: "cpu-v3", Template: "tpl", Mode: "screen", Metric: MetricRow0,
		Rounds: 3, MaxRounds: 9, Alpha: 0.05, MinStep: 0.01}
}

func TestGivenProblemsAreSaidTogether(t *testing.T) {
	if got := validGiven().Problems(); len(got) != 0 {
		t.Errorf("Problems() of valid settings = %q, want none", got)
	}
	g := Given{Metric: "speed", Mode: "quick", Rounds: 1, MaxRounds: 0, Alpha: 0.5, Rows: -1, MinStep: 1}
	got := strings.Join(g.Problems(), "; ")
	for _, want := range []string{"--good is needed", "--bad is needed", "--target is needed", "--template is needed",
		`--metric "speed"`, `--mode "quick"`, "--rounds 1", "--max-rounds 0 is below --rounds 1", "--alpha 0.5: want a level between 0 and 0.5 (0.05 is the default)", "--rows -1: want 1 or more",
		"--min-step 1: want a fraction from 0 to 1 (0.01, 1%, is the default)"} {
		if !strings.Contains(got, want) {
			t.Errorf("Problems() = %q, want it to say %q", got, want)
		}
	}
	if strings.Contains(got, "--generate") || strings.Contains(got, "--canaries") {
		t.Errorf("Problems() = %q names a flag that is fine", got)
	}
}

func TestProtocolTakesTheCampaignsOverrides(t *testing.T) {
	p, err := (&Settings{Mode: "full", Rows: 3, Generate: 64}).Protocol()
	if err != nil {
		t.Fatal(err)
	}
	if p.Rows != 3 || p.Generate != 64 || p.Canaries != 384 || p.Mode != "full" {
		t.Errorf("Protocol() = %+v, want full's 384 canaries with 3 rows of 64 tokens", p)
	}
	if _, err := (&Settings{Mode: "quick"}).Protocol(); err == nil {
		t.Error("Protocol() of an unknown mode: no error")
	}
}

// Prepare's mistakes are the caller's (inputerr), said before anything is built.
func TestPrepareRefusesMistakes(t *testing.T) {
	repo := gitfixture.New(t)
	noSeries := func(string) ([]patches.Patch, error) { return []patches.Patch{}, nil }
	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"not a repository", Request{Dir: t.TempDir(), Repo: t.TempDir(), Series: noSeries}, "is not a git repository"},
		{"nothing to start from", Request{Dir: t.TempDir(), Repo: repo.Dir, Series: noSeries}, "--good is needed to start a campaign"},
		{"an unknown target", Request{Dir: t.TempDir(), Repo: repo.Dir, Series: noSeries, Given: func() Given {
			g := validGiven()
			g.Target = "cpu-v99"
			return g
		}()}, "cpu-v99"},
		{"an unknown end", Request{Dir: t.TempDir(), Repo: repo.Dir, Series: noSeries, Given: validGiven()}, `"b100"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Prepare(context.Background(), tc.r, nil)
			if !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Prepare() = %v, want the caller's mistake saying %q", err, tc.want)
			}
		})
	}
}
