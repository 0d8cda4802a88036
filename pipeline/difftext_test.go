package pipeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDiffReportTextAndJSON(t *testing.T) {
	a, err := resolve(t, "cpu-v3", "server", Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := resolve(t, "h200", "server", Options{})
	if err != nil {
		t.Fatal(err)
	}
	sides := [2]DiffSide{SideOf("cpu-v3", a, false), SideOf("old-bundle", b, true)}
	checks := []DriverCheck{
		{Target: "h200", Driver: "570 (CUDA 12.8)", Plan: "A", Require: "cuda>=12.0", Holds: true},
		{Target: "h200", Driver: "570 (CUDA 12.8)", Plan: "B", Require: "cuda>=13.0", Reason: "driver too old"},
	}
	r := NewDiffReport(sides, DiffPlans(a, b, true), checks)
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"A: cpu-v3 (target cpu-v3, plan " + a.Hash[:12] + ")\n",
		"B: old-bundle (target h200, plan " + b.Hash[:12] + ") — a bundle from an earlier llbuild",
		"\nbase images:\n",
		"\ndriver cap:\n  target h200, driver 570 (CUDA 12.8): A needs cuda>=12.0: holds\n",
		"  target h200, driver 570 (CUDA 12.8): B needs cuda>=13.0: DOES NOT HOLD: driver too old\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("WriteText() = %q, want it to contain %q", text.String(), want)
		}
	}
	if err := r.StartError(); err == nil || err.Error() != "B would not start: driver too old" {
		t.Errorf("StartError() = %v, want B's failed check (A's failing does not count)", err)
	}
	r.Drivers[0].Holds, r.Drivers[1].Holds = false, true
	if err := r.StartError(); err != nil {
		t.Errorf("StartError() with only A failing = %v, want nil", err)
	}

	// a plan of a plain directory against the same plan of the fetched commit: the source
	// differs, in the tree it builds (the bytes, whatever the commit says)
	plain, err := resolve(t, "cpu-v3", "server", Options{SourceTree: "sha256:0bf4ed37"})
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	tree := NewDiffReport([2]DiffSide{SideOf("pinned", a, false), SideOf("plain", plain, false)}, DiffPlans(a, plain, false), nil)
	if err := tree.WriteText(&text); err != nil || !strings.Contains(text.String(), "tree: (the commit, fetched) -> sha256:0bf4ed37 (a plain directory, unverified)") {
		t.Errorf("WriteText() of a plain tree's plan against the fetch's = %q, %v; want the tree named", text.String(), err)
	}

	same := NewDiffReport([2]DiffSide{SideOf("x", a, false), SideOf("y", a, false)}, DiffPlans(a, a, false), nil)
	text.Reset()
	if err := same.WriteText(&text); err != nil || !strings.HasSuffix(text.String(), "no differences\n") || strings.Contains(text.String(), "driver cap") {
		t.Errorf("WriteText() of one plan twice = %q, %v; want no differences and no driver cap", text.String(), err)
	}
	js, err := json.Marshal(same)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"groups":[],"drivers":[]`; !strings.Contains(string(js), want) {
		t.Errorf("JSON = %s, want empty lists (%s)", js, want)
	}
}
