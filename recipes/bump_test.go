package recipes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/patches"
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
	if s := read(t, recipe); !strings.Contains(s, "llama-server --version says b2\n  buildNumber: 2\n") {
		t.Errorf("the comment quoting the build number was not rewritten:\n%s", s)
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

// snapshot is every file under dir and its contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = read(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestBumpToARefreshedSeries: upstream rewrote the line 0002 changes, so the series no longer
// applies; a refreshed 0002 in a series of its own moves the pin, replaces the patches, and
// the old series with its recipe is recorded where it can still be built from.
func TestBumpToARefreshedSeries(t *testing.T) {
	r := gitfixture.New(t)
	c := filepath.Join(r.Dir, "ggml/src/ggml-cpu/ggml-cpu.c")
	os.WriteFile(c, []byte(strings.Replace(read(t, c), `"file: " __FILE__`, `"source: " __FILE__`, 1)), 0o644)
	gitfixture.Git(t, r.Dir, r.NewTime+3600, "commit", "--quiet", "-am", "upstream renames the file line")
	moved := gitfixture.Git(t, r.Dir, 0, "rev-parse", "HEAD")

	recipe, series := bumpTree(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	old := snapshot(t, filepath.Dir(recipe))
	stale := filepath.Join(t.TempDir(), "series")
	os.WriteFile(stale, []byte(read(t, series)), 0o644)
	for _, n := range []string{"0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch"} {
		os.WriteFile(filepath.Join(filepath.Dir(stale), n), []byte(read(t, filepath.Join(filepath.Dir(series), n))), 0o644)
	}
	// the refreshed series: 0001 is upstream and left out, 0002 rewritten for the new line; its
	// digest is stale, as a hand-made series' would be
	fresh := filepath.Join(t.TempDir(), "series")
	refreshed := strings.ReplaceAll(read(t, filepath.Join(filepath.Dir(series), "0002-ggml-cpu-build-info.patch")), `"file: " __FILE__`, `"source: " __FILE__`)
	os.WriteFile(filepath.Join(filepath.Dir(fresh), "0002-ggml-cpu-build-info.patch"), []byte(refreshed), 0o644)
	os.WriteFile(fresh, []byte("# refreshed for the new line\n0002-ggml-cpu-build-info.patch sha256:"+strings.Repeat("0", 64)+"\n"), 0o644)

	for _, tt := range []struct {
		name, newSeries, record, want string
	}{
		{"a new series that does not apply either", stale, "", "0002-ggml-cpu-build-info.patch does not apply"},
		{"a record directory that exists", fresh, t.TempDir(), "already exists"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Bump(context.Background(), BumpOptions{RecipeFile: recipe, SeriesFile: series, Source: r.Dir, Commit: moved, DropUpstream: true, NewSeries: tt.newSeries, Record: tt.record})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Bump() = %v, want a refusal saying %q", err, tt.want)
			}
			if now := snapshot(t, filepath.Dir(recipe)); !reflect.DeepEqual(now, old) {
				t.Errorf("Bump() refused but changed the tree: %d files before, %d after", len(old), len(now))
			}
		})
	}

	res, err := Bump(context.Background(), BumpOptions{RecipeFile: recipe, SeriesFile: series, Source: r.Dir, Commit: moved, DropUpstream: true, NewSeries: fresh})
	if err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Dir(series)
	builtinRecipe, err := Load("server")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(pdir, builtinRecipe.Source.Commit[:9]); res.Recorded != want {
		t.Errorf("recorded in %s, want %s (the recipe's old commit)", res.Recorded, want)
	}
	// the record is the old tree's series, patches and recipe, byte for byte
	rec := snapshot(t, res.Recorded)
	want := map[string]string{"series": old["patches/series"], "server.yaml": old["server.yaml"],
		"0001-server-greeting.patch": old["patches/0001-server-greeting.patch"], "0002-ggml-cpu-build-info.patch": old["patches/0002-ggml-cpu-build-info.patch"]}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("the record holds %v, want the old series, its two patches and the old recipe", keys(rec))
	}
	if _, err := patches.Load(os.DirFS(res.Recorded), "series"); err != nil {
		t.Errorf("the recorded series does not load: %v", err)
	}
	if got, err := Load(filepath.Join(res.Recorded, "server.yaml")); err != nil || got.Source.Commit != builtinRecipe.Source.Commit {
		t.Errorf("the recorded recipe: %v, %v; want the old pin", got, err)
	}
	// the series is the refreshed one, with its digest, and 0001's file is gone
	loaded, err := patches.Load(os.DirFS(pdir), "series")
	if err != nil || len(loaded) != 1 || string(loaded[0].Data) != refreshed {
		t.Fatalf("the new series: %v, %d patches; want the refreshed 0002 alone", err, len(loaded))
	}
	if !strings.HasPrefix(read(t, series), "# refreshed for the new line\n") {
		t.Errorf("the new series' comments were not kept:\n%s", read(t, series))
	}
	if _, err := os.Stat(filepath.Join(pdir, "0001-server-greeting.patch")); !os.IsNotExist(err) || len(res.Removed) != 1 {
		t.Errorf("0001's file: %v, removed %v; want it gone (it is recorded)", err, res.Removed)
	}
	if got, err := Parse(recipe, []byte(read(t, recipe))); err != nil || got.Source.Commit != moved {
		t.Errorf("the recipe: %v, %v; want it at %s", got, err, moved)
	}
	if st, err := patches.Status(context.Background(), r.Dir, moved, loaded); err != nil || !st.OK() {
		t.Errorf("the new series at the new pin: %+v, %v; want it to apply", st, err)
	}
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// A recipe and series kept as links (linked in from a lab's repository) stay links after a
// bump, and their targets carry the bump.
func TestBumpWritesThroughLinkedRecipeAndSeries(t *testing.T) {
	r := gitfixture.New(t)
	recipe, series := bumpTree(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	links := t.TempDir()
	lr, ls := filepath.Join(links, "server.yaml"), filepath.Join(filepath.Dir(series), "series.link")
	if err := os.Symlink(recipe, lr); err != nil {
		t.Fatal(err)
	}
	os.Symlink("series", ls)
	if _, err := Bump(context.Background(), BumpOptions{RecipeFile: lr, SeriesFile: ls, Source: r.Dir, Commit: r.New[:10], DropUpstream: true}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{lr, ls} {
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link after the bump (%v)", l, err)
		}
	}
	got, err := Parse(recipe, []byte(read(t, recipe)))
	if err != nil {
		t.Fatalf("the linked recipe's target does not load: %v", err)
	}
	if got.Source.Commit != r.New {
		t.Errorf("the linked recipe's target is at %s, want %s", got.Source.Commit, r.New)
	}
	if strings.Contains(read(t, series), gitfixture.UpstreamPatch) {
		t.Errorf("the linked series' target still names %s", gitfixture.UpstreamPatch)
	}
}
