package patches

import (
	"strings"
	"testing"
)

func TestResultDescribeNamesHunksOrTheBlockingPatch(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{Result{State: Applies}, "applies"},
		{Result{State: Conflicts, Hunks: []string{"a.cpp:10", "b.cpp:20"}}, "conflicts: hunk at a.cpp:10, hunk at b.cpp:20"},
		{Result{State: Conflicts, Detail: "corrupt patch"}, "conflicts: corrupt patch"},
		{Result{State: Depends, DependsOn: "0002-x.patch", Hunks: []string{"c.cpp:3", "d.cpp:4"}}, "depends on 0002-x.patch, which no longer applies (hunk at c.cpp:3, d.cpp:4)"},
	}
	for _, tt := range tests {
		if got := tt.r.Describe(); got != tt.want {
			t.Errorf("Describe() = %q, want %q", got, tt.want)
		}
	}
}

func TestReportBlockedNamesTheFirstPatchThatDoesNotApply(t *testing.T) {
	ok := &Report{Commit: "0123456789abcdef", Patches: []Result{{Name: "a", State: Applies}, {Name: "b", State: Upstream}}}
	if err := ok.Blocked(); err != nil {
		t.Errorf("Blocked() = %v, want nil", err)
	}
	tree := &Report{Source: "/src", Tree: "sha256:" + strings.Repeat("ab", 32), Patches: []Result{
		{Name: "a", State: Applies}, {Name: "b", State: Conflicts, Hunks: []string{"x.c:1"}}, {Name: "c", State: Conflicts}}}
	err := tree.Blocked()
	if err == nil || !strings.HasPrefix(err.Error(), "the series does not apply at /src: b conflicts: hunk at x.c:1; refresh it against that tree") {
		t.Errorf("Blocked() = %v, want the tree and patch b named", err)
	}
	var b strings.Builder
	if err := tree.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "PATCH  AT TREE sha256:abababababab (/src, not a git repository)\na      applies\n"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("WriteText() = %q, want it to start %q", b.String(), want)
	}
}

func TestParseRangeWantsTwoCommits(t *testing.T) {
	tests := []struct {
		in       string
		from, to string
		ok       bool
	}{
		{"a..b", "a", "b", true},
		{"1425386fd..34af94cd9", "1425386fd", "34af94cd9", true},
		{"a...b", "", "", false},
		{"a..", "", "", false},
		{"..b", "", "", false},
		{"a", "", "", false},
	}
	for _, tt := range tests {
		from, to, ok := ParseRange(tt.in)
		if from != tt.from || to != tt.to || ok != tt.ok {
			t.Errorf("ParseRange(%q) = %q, %q, %v; want %q, %q, %v", tt.in, from, to, ok, tt.from, tt.to, tt.ok)
		}
	}
}

func TestRangeDescribeSaysWhereAPatchChanged(t *testing.T) {
	tests := []struct {
		r    RangeResult
		want string
	}{
		{RangeResult{AtFrom: Applies, AtTo: Applies}, "applies throughout"},
		{RangeResult{AtFrom: Applies, AtTo: Upstream}, "applies at the start, already upstream at the end"},
		{RangeResult{AtFrom: Applies, AtTo: Upstream, Change: &Change{Commit: "0123456789abcdef0", Subject: "server: x", Time: 86400, Position: 7, Result: Result{State: Conflicts, Hunks: []string{"s.cpp:5"}}}},
			`conflicts from 0123456789ab (1970-01-02, commit 7 of the range) "server: x": hunk at s.cpp:5; at the end: already upstream`},
	}
	for _, tt := range tests {
		if got := tt.r.Describe(); got != tt.want {
			t.Errorf("Describe() = %q, want %q", got, tt.want)
		}
	}
	rep := &RangeReport{To: "fedcba9876543210", Patches: []RangeResult{{Name: "p", AtFrom: Applies, AtTo: Conflicts}}}
	if err := rep.Blocked(); err == nil || !strings.HasPrefix(err.Error(), "the series does not apply at fedcba987654: p applies at the start, conflicts at the end;") {
		t.Errorf("Blocked() = %v, want patch p named at the range's end", err)
	}
}
