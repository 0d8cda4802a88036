package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
)

// BumpOptions say which recipe and series move to which commit of which repository.
type BumpOptions struct {
	// RecipeFile is the recipe to rewrite (recipes/server.yaml in llbuild's tree).
	RecipeFile string
	// SeriesFile is the patch series to rewrite, the patches beside it (patches/series).
	SeriesFile string
	// Source is a llama.cpp checkout or mirror holding Commit.
	Source, Commit string
	// DropUpstream removes the patches that are already upstream at Commit from the series.
	DropUpstream bool
	// NewSeries, when set, is a series file of patches refreshed for Commit (the patches beside
	// it): they replace the series' patches, and the series as it was, with the recipe as it
	// was, is recorded in Record.
	NewSeries string
	// Record is where the old series goes with NewSeries; default the series' directory's
	// subdirectory named by the recipe's old commit (patches/1425386fd).
	Record string
}

// BumpResult is what Bump did.
type BumpResult struct {
	Status  *patches.Report
	Dropped []string
	// Written are the files Bump rewrote, in the order it wrote them.
	Written []string
	// Removed are the patch files the new series no longer names (they are in Recorded).
	Removed []string
	// Recorded is the directory holding the old series, its patches and the old recipe.
	Recorded string
	// Copy says the bump was of a copy (BumpCopy), outside any git tree of llbuild's.
	Copy bool
}

// Bump moves the recipe to opts.Commit: its source commit, epoch and build number, and the
// series' digests refreshed (and, with DropUpstream, the patches upstream at the commit
// removed). It refuses, writing nothing, when a patch that stays does not apply; each file is
// replaced atomically, and if the recipe cannot be written the series is put back.
func Bump(ctx context.Context, opts BumpOptions) (*BumpResult, error) {
	oldRecipe, err := os.ReadFile(opts.RecipeFile)
	if err != nil {
		return nil, inputerr.Errorf("reading the recipe %s: %v (--recipe-file names it; without it, llbuild's own recipes/server.yaml where llbuild runs in its repository)", opts.RecipeFile, osSays(err))
	}
	old, err := Parse(opts.RecipeFile, oldRecipe)
	if err != nil {
		return nil, err
	}
	oldSeries, err := os.ReadFile(opts.SeriesFile)
	if err != nil {
		return nil, inputerr.Errorf("reading the patch series %s: %v (--series names it; without it, llbuild's own patches/series where llbuild runs in its repository)", opts.SeriesFile, osSays(err))
	}
	seriesFS, seriesName := os.DirFS(filepath.Dir(opts.SeriesFile)), filepath.Base(opts.SeriesFile)
	if opts.NewSeries != "" {
		if fi, err := os.Stat(opts.NewSeries); err != nil || !fi.Mode().IsRegular() {
			return nil, inputerr.Errorf("--new-series %s: give a series file (NAME.patch sha256:DIGEST lines, the patches beside it)%s", opts.NewSeries, statSays(err))
		}
		if same, err := sameFile(opts.NewSeries, opts.SeriesFile); err != nil {
			return nil, fmt.Errorf("reading the new series: %w", err)
		} else if !same {
			return bumpToNewSeries(ctx, opts, oldRecipe, oldSeries)
		}
	}
	newSeries, _, res, err := seriesAt(ctx, opts, seriesFS, seriesName, "")
	if err != nil {
		return nil, err
	}
	rep := res.Status
	if _, err := patches.Load(overlay{seriesFS, seriesName, newSeries}, seriesName); err != nil {
		return nil, fmt.Errorf("the rewritten series would not load: %w", err)
	}
	newRecipe, err := SetSource(opts.RecipeFile, oldRecipe, rep.Commit, rep.CommitTime, countAt(ctx, opts.Source, rep, old))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(newSeries, oldSeries) {
		if err := atomicfile.WriteThrough(opts.SeriesFile, newSeries, 0o644); err != nil {
			return nil, err
		}
		res.Written = append(res.Written, opts.SeriesFile)
	}
	if !bytes.Equal(newRecipe, oldRecipe) {
		if err := atomicfile.WriteThrough(opts.RecipeFile, newRecipe, 0o644); err != nil {
			if len(res.Written) > 0 {
				if rerr := atomicfile.WriteThrough(opts.SeriesFile, oldSeries, 0o644); rerr != nil {
					return nil, fmt.Errorf("%w; putting %s back failed too (%v): restore it with git checkout -- %s", err, opts.SeriesFile, rerr, opts.SeriesFile)
				}
			}
			return nil, err
		}
		res.Written = append(res.Written, opts.RecipeFile)
	}
	return res, nil
}

// statSays is ": " and what os.Stat said, or "" when it said nothing.
func statSays(err error) string {
	if err == nil {
		return ""
	}
	return ": " + osSays(err)
}

// osSays is what the system said of a path, without the operation and path a PathError adds.
func osSays(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// seriesAt refreshes the digests of the series file name of fsys, applies it at opts.Commit
// and refuses as refuseUnapplied does; it returns the series file's contents and its patches
// without the ones dropped as upstream, and the result so far. label prefixes an error reading
// the series.
func seriesAt(ctx context.Context, opts BumpOptions, fsys fs.FS, name, label string) ([]byte, []patches.Patch, *BumpResult, error) {
	_, series, err := patches.Refresh(fsys, name, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s%w", label, err)
	}
	rep, err := patches.Status(ctx, opts.Source, opts.Commit, series)
	if err != nil {
		return nil, nil, nil, err
	}
	res := &BumpResult{Status: rep}
	drop, err := refuseUnapplied(opts, rep, res)
	if err != nil {
		return nil, nil, nil, err
	}
	data, series, err := patches.Refresh(fsys, name, drop)
	if err != nil {
		return nil, nil, nil, err
	}
	return data, series, res, nil
}

// refuseUnapplied says which patches to drop (upstream, with DropUpstream), and refuses when a
// patch that stays does not apply at the report's commit.
func refuseUnapplied(opts BumpOptions, rep *patches.Report, res *BumpResult) (map[string]bool, error) {
	drop := map[string]bool{}
	for _, p := range rep.Patches {
		switch {
		case p.State == patches.Upstream && opts.DropUpstream:
			drop[p.Name] = true
			res.Dropped = append(res.Dropped, p.Name)
		case p.State == patches.Upstream:
			return nil, fmt.Errorf("patch %s is already upstream at %s, so it would not apply: pass --drop-upstream to remove it from %s", p.Name, rep.Commit, opts.SeriesFile)
		case !p.OK():
			where := strings.Join(p.Hunks, ", hunk at ")
			if p.State == patches.Depends {
				return nil, fmt.Errorf("patch %s does not apply at %s (hunk at %s): it builds on %s, which no longer applies; refresh that one first; nothing was changed", p.Name, rep.Commit, where, p.DependsOn)
			}
			if where == "" {
				where = p.Detail
			} else {
				where = "hunk at " + where
			}
			return nil, fmt.Errorf("patch %s does not apply at %s: %s; refresh it against that commit (git apply --3way, then git format-patch) or remove it from the series; nothing was changed", p.Name, rep.Commit, where)
		}
	}
	return drop, nil
}

// overlay is an FS with one file's contents replaced, as fs.ReadFile (which Load uses) reads it.
type overlay struct {
	fs.FS
	name string
	data []byte
}

func (o overlay) ReadFile(name string) ([]byte, error) {
	if name == o.name {
		return o.data, nil
	}
	return fs.ReadFile(o.FS, name)
}

// buildComment is the comment above the build number that quotes it (llama-server --version
// says b10106).
var buildComment = regexp.MustCompile(`^(\s*#.*\bsays )b\d+`)

// upstreamComment is the comment the built-in recipe keeps above its commit.
var upstreamComment = regexp.MustCompile(`^(\s*)# upstream \S+ of \d{4}-\d{2}-\d{2}`)

// SetSource returns the recipe file data with source.commit, source.epoch and (when the recipe
// has one) source.buildNumber set to count, everything else as it was, checked by Parse. A comment
// right above the commit that dates it ("# upstream master of 2026-07-23: ...") is rewritten
// with the new commit's date, as what it said about the old commit no longer holds.
func SetSource(file string, data []byte, commit string, epoch int64, count int) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty recipe", file)
	}
	source := mapValue(doc.Content[0], "source")
	if source == nil || source.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: source is missing", file)
	}
	lines := strings.SplitAfter(string(data), "\n")
	set := func(key, value string) error {
		n := mapValue(source, key)
		if n == nil {
			return fmt.Errorf("%s: source.%s is missing; add it (any value) and run again", file, key)
		}
		if n.Kind != yaml.ScalarNode || n.Style != 0 {
			return fmt.Errorf("%s:%d: source.%s must be a plain scalar", file, n.Line, key)
		}
		i := n.Line - 1
		l := lines[i]
		col := n.Column - 1
		if col+len(n.Value) > len(l) || l[col:col+len(n.Value)] != n.Value {
			return fmt.Errorf("%s:%d: cannot find source.%s's value on its line", file, n.Line, key)
		}
		lines[i] = l[:col] + value + l[col+len(n.Value):]
		return nil
	}
	if err := set("commit", commit); err != nil {
		return nil, err
	}
	if err := set("epoch", strconv.FormatInt(epoch, 10)); err != nil {
		return nil, err
	}
	if mapValue(source, "buildNumber") != nil {
		if count <= 0 {
			return nil, fmt.Errorf("%s: source.buildNumber cannot be counted in a shallow repository: git fetch --unshallow the source, then run again", file)
		}
		if err := set("buildNumber", strconv.Itoa(count)); err != nil {
			return nil, err
		}
	}
	if b := mapValue(source, "buildNumber"); b != nil && b.Line >= 2 {
		lines[b.Line-2] = buildComment.ReplaceAllString(lines[b.Line-2], "${1}b"+strconv.Itoa(count))
	}
	if c := mapValue(source, "commit"); c.Line >= 2 {
		if m := upstreamComment.FindStringSubmatch(lines[c.Line-2]); m != nil {
			lines[c.Line-2] = m[1] + "# upstream commit of " + time.Unix(epoch, 0).UTC().Format("2006-01-02") + " (llbuild recipe bump)\n"
		}
	}
	out := []byte(strings.Join(lines, ""))
	if _, err := Parse(file, out); err != nil {
		return nil, err
	}
	return out, nil
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// countAt is the build number at the report's commit: git's count, or in a shallow repository
// (where git counts only what it holds) the count from the recipe's current pin, whose number
// is known; 0 when neither can say.
func countAt(ctx context.Context, repo string, rep *patches.Report, old *Recipe) int {
	if rep.Count > 0 || old == nil || old.Source.BuildNumber <= 0 {
		return rep.Count
	}
	n, err := gitref.BuildNumber(ctx, repo, rep.Commit, &gitref.Anchor{Commit: old.Source.Commit, BuildNumber: old.Source.BuildNumber})
	if err != nil {
		return 0
	}
	return n
}
