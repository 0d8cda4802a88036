package patches

import "testing"

func TestNamedSeriesAndWhatABuildCarries(t *testing.T) {
	scoring, err := Named(SeriesScoring)
	if err != nil || len(scoring) < 2 {
		t.Fatalf("Named(scoring) = %d patches, %v", len(scoring), err)
	}
	plain, err := Named(SeriesPlain)
	if err != nil || len(plain) != 1 || plain[0].Name != BuildPatch {
		t.Fatalf("Named(plain) = %v, %v; want %s alone", plain, err, BuildPatch)
	}
	if _, err := Named("fast"); err == nil {
		t.Error("Named(fast) succeeded")
	}
	pairs := func(ps []Patch) [][2]string {
		var out [][2]string
		for _, p := range ps {
			out = append(out, [2]string{p.Name, p.SHA256})
		}
		return out
	}
	other := pairs(plain)
	other[0][1] = "0000"
	for _, tc := range []struct {
		name           string
		applied        [][2]string
		series, served string
	}{
		{"the built-in series", pairs(scoring), SeriesScoring, "scoring"},
		{"0001 alone", pairs(plain), SeriesPlain, "upstream"},
		{"nothing", nil, "none", "upstream"},
		{"0001 of other bytes", other, "custom", "upstream"},
		{"the series without its last patch", pairs(scoring[:len(scoring)-1]), "custom", "scoring"},
	} {
		if got := NameOf(tc.applied); got != tc.series {
			t.Errorf("%s: NameOf = %s, want %s", tc.name, got, tc.series)
		}
		if got := Contract(tc.applied); got != tc.served {
			t.Errorf("%s: Contract = %s, want %s", tc.name, got, tc.served)
		}
	}
}
