package recipes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
)

// bumpTree is a recipe and a series of fixture patches in a directory of their own, as in
// llbuild's tree.
func bumpTree(t *testing.T, names ...string) (recipe, series string) {
	t.Helper()
	dir := t.TempDir()
	data, err := builtin.ReadFile("server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	recipe = filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(recipe, data, 0o644); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "patches")
	os.MkdirAll(pdir, 0o755)
	var b strings.Builder
	b.WriteString("# the fixture series\n")
	for _, n := range names {
		body, err := os.ReadFile(filepath.Join(gitfixture.PatchDir(), n))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(pdir, n), body, 0o644)
		sum := sha256.Sum256(body)
		fmt.Fprintf(&b, "%s sha256:%s\n", n, hex.EncodeToString(sum[:]))
	}
	series = filepath.Join(pdir, "series")
	os.WriteFile(series, []byte(b.String()), 0o644)
	return recipe, series
}

func read(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBumpMovesThePinAndDropsUpstreamPatches(t *testing.T) {
	r := gitfixture.New(t)
	recipe, series := bumpTree(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	// A digest left stale by an edit is refreshed.
	lines := strings.SplitAfter(read(t, series), "\n")
	lines[2] = "0002-ggml-cpu-build-info.patch sha256:" + strings.Repeat("0", 64) + "\n"
	os.WriteFile(series, []byte(strings.Join(lines, "")), 0o644)
	res, err := Bump(context.Background(), BumpOptions{RecipeFile: recipe, SeriesFile: series, Source: r.Dir, Commit: r.New[:10], DropUpstream: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Dropped, ","); got != gitfixture.UpstreamPatch {
		t.Errorf("Bump() dropped %q, want %q", got, gitfixture.UpstreamPatch)
	}
	got, err := Parse(recipe, []byte(read(t, recipe)))
	if err != nil {
		t.Fatalf("the bumped recipe does not load: %v", err)
	}
	if got.Source.Commit != r.New || got.Source.Epoch != r.NewTime || got.Source.BuildNumber != 2 {
		t.Errorf("bumped source = %s epoch %d build %d, want %s epoch %d build 2", got.Source.Commit, got.Source.Epoch, got.Source.BuildNumber, r.New, r.NewTime)
	}
	if s := read(t, recipe); !strings.Contains(s, "  # upstream commit of 2023-11-15 (llbuild recipe bump)\n  commit: "+r.New) {
		t.Errorf("the dated comment above the commit was not rewritten:\n%s", s)
	}
	body, _ := os.ReadFile(filepath.Join(filepath.Dir(series), "0002-ggml-cpu-build-info.patch"))
	sum := sha256.Sum256(body)
	want := "# the fixture series\n0002-ggml-cpu-build-info.patch sha256:" + hex.EncodeToString(sum[:]) + "\n"
	if s := read(t, series); s != want {
		t.Errorf("series after Bump() =\n%s\nwant\n%s", s, want)
	}
}

func TestBumpRefusesAndChangesNothing(t *testing.T) {
	r := gitfixture.New(t)
	tests := []struct {
		name    string
		patches []string
		drop    bool
		want    []string
	}{
		{"an upstream patch without --drop-upstream", []string{"0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch"}, false, []string{"0001-server-greeting.patch is already upstream", "--drop-upstream"}},
		{"a patch that conflicts", []string{"0001-server-greeting.patch", "broken-stale-context.patch"}, true, []string{"broken-stale-context.patch does not apply", "hunk at tools/server/server.cpp:2", "nothing was changed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recipe, series := bumpTree(t, tt.patches...)
			beforeR, beforeS := read(t, recipe), read(t, series)
			_, err := Bump(context.Background(), BumpOptions{RecipeFile: recipe, SeriesFile: series, Source: r.Dir, Commit: r.New, DropUpstream: tt.drop})
			if err == nil {
				t.Fatal("Bump() = nil, want a refusal")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Bump() = %v, want it to say %q", err, w)
				}
			}
			if read(t, recipe) != beforeR || read(t, series) != beforeS {
				t.Error("Bump() refused but changed the recipe or the series")
			}
			if entries, _ := os.ReadDir(filepath.Dir(series)); len(entries) != len(tt.patches)+1 {
				t.Errorf("Bump() left %d files beside the series, want %d", len(entries), len(tt.patches)+1)
			}
		})
	}
}
