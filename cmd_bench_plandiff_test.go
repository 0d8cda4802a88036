package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/recorded"
)

// What bench prints below its table for two builds is what llbuild plan diff prints for them,
// under a heading: the bench's comparison (recorded.DiffBuilds) and plan diff's writer agree.
func TestBenchPlanDiffReadsAsPlanDiff(t *testing.T) {
	bundle := func(commit string, patches ...string) string {
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
	ctx := context.Background()
	dirs := []string{bundle("aa" + strings.Repeat("0", 38)), bundle("bb"+strings.Repeat("0", 38), "0001-x.patch"), bundle("aa" + strings.Repeat("0", 38))}
	names := []string{"old.tar.zst", "new", "same"}
	diffs := recorded.DiffBuilds(ctx, names, dirs)
	for i, d := range diffs {
		var sides [2]*planSide
		for j, k := range []int{0, i + 1} {
			s, err := loadPlanSide(ctx, dirs[k], "server")
			if err != nil {
				t.Fatal(err)
			}
			s.arg = names[k]
			sides[j] = s
		}
		var want, got strings.Builder
		want.WriteString("\nwhat differs between the builds of " + names[0] + " and " + names[i+1] + " (llbuild plan diff):\n")
		if err := writePlanDiff(&want, sides, pipeline.DiffPlans(sides[0].plan, sides[1].plan, sides[0].partial || sides[1].partial), nil); err != nil {
			t.Fatal(err)
		}
		if err := d.WriteText(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("bench's plan diff of %s:\n%s\nwant plan diff's:\n%s", names[i+1], got.String(), want.String())
		}
	}
	if len(diffs) != 2 || len(diffs[0].Groups) == 0 || len(diffs[1].Groups) != 0 {
		t.Errorf("DiffBuilds() = %+v, want new to differ and same not", diffs)
	}
}
