package recorded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
)

// writeBundleManifest writes a bundle directory holding only manifest.json: what Open reads of a
// bundle. A manifest without build.plan records part of a plan (source, patches, images).
func writeBundleManifest(t *testing.T, commit string, patches ...string) string {
	t.Helper()
	m := &manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Target: manifest.Target{Name: "cpu-v3", Backend: "cpu"},
		Build: manifest.Build{PlanHash: "sha256:" + strings.Repeat(commit[:2], 32), Source: manifest.Source{URL: "https://github.com/ggml-org/llama.cpp", Commit: commit}}}
	for _, p := range patches {
		m.Build.Patches = append(m.Build.Patches, manifest.Patch{Name: p, SHA256: strings.Repeat("11", 32)})
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, manifest.FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The first build is compared with each other one: the same build has no differences, another
// commit and patch are reported in their groups, and a directory that records no plan says so
// in its comparison while the others stand.
func TestDiffBuildsComparesTheFirstWithEachOther(t *testing.T) {
	a := writeBundleManifest(t, "aa"+strings.Repeat("0", 38))
	same := writeBundleManifest(t, "aa"+strings.Repeat("0", 38))
	other := writeBundleManifest(t, "bb"+strings.Repeat("0", 38), "0001-x.patch")
	none := t.TempDir()
	names := []string{"A.tar.zst", "same", "other", "none"}
	ds := DiffBuilds(context.Background(), names, []string{a, same, other, none})
	if len(ds) != 3 {
		t.Fatalf("DiffBuilds() = %d comparisons, want 3", len(ds))
	}
	for i, d := range ds {
		if d.A != "A.tar.zst" || d.B != names[i+1] {
			t.Errorf("comparison %d: %s against %s, want A.tar.zst against %s", i, d.A, d.B, names[i+1])
		}
	}
	if d := ds[0]; d.Error != "" || d.Groups == nil || len(d.Groups) != 0 {
		t.Errorf("same build: %+v, want no differences (an empty list, not null)", d)
	}
	var groups []string
	for _, g := range ds[1].Groups {
		groups = append(groups, g.Name)
	}
	if strings.Join(groups, ",") != "source commit,patches" || ds[1].Error != "" {
		t.Errorf("other build: groups %v (error %q), want the source commit and the patches", groups, ds[1].Error)
	}
	if d := ds[2]; !strings.Contains(d.Error, "has neither") || d.Groups != nil {
		t.Errorf("no plan: %+v, want the error why it cannot be compared", d)
	}
	var b strings.Builder
	if err := ds.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"\nwhat differs between the builds of A.tar.zst and same (llbuild plan diff):\nA: A.tar.zst (target cpu-v3, plan sha256:aaaaa)",
		"earlier llbuild (manifest.json version 1)",
		"no differences\n",
		"B: other (target cpu-v3, plan sha256:bbbbb)",
		"\nsource commit:\n  commit: aa",
		"\npatches:\n  added 0001-x.patch: + sha256:1111",
		"builds of A.tar.zst and none (llbuild plan diff):\n  cannot compare the plans: " + none + " has neither",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("WriteText() lacks %q:\n%s", want, text)
		}
	}
}

// What bench prints below its table for two builds is what llbuild plan diff prints for them
// (Diff, the command's report), under a heading.
func TestBuildDiffReadsAsPlanDiff(t *testing.T) {
	ctx := context.Background()
	dirs := []string{writeBundleManifest(t, "aa"+strings.Repeat("0", 38)), writeBundleManifest(t, "bb"+strings.Repeat("0", 38), "0001-x.patch"), writeBundleManifest(t, "aa"+strings.Repeat("0", 38))}
	diffs := DiffBuilds(ctx, dirs, dirs)
	if len(diffs) != 2 || len(diffs[0].Groups) == 0 || len(diffs[1].Groups) != 0 {
		t.Fatalf("DiffBuilds() = %+v, want the second to differ and the third not", diffs)
	}
	for i, d := range diffs {
		report, err := Diff(ctx, [2]string{dirs[0], dirs[i+1]}, "server", pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var want, got strings.Builder
		want.WriteString("\nwhat differs between the builds of " + dirs[0] + " and " + dirs[i+1] + " (llbuild plan diff):\n")
		if err := report.WriteText(&want); err != nil {
			t.Fatal(err)
		}
		if err := d.WriteText(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("bench's plan diff of %s:\n%s\nwant plan diff's:\n%s", dirs[i+1], got.String(), want.String())
		}
	}
}
