package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
	"github.com/urfave/cli/v2"
)

// What several commands share: the flags of the common inputs (targets, recipe, series, ref,
// source), their loading into targets, series and plans, and JSON on stdout.

var targetFlag = &cli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME` (see llbuild targets)"}

var targetFileFlag = &cli.StringFlag{Name: "target-file", Usage: "target `FILE` describing your own host (llbuild target detect writes one)"}

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print JSON"}

var floatingFlag = &cli.BoolFlag{Name: "allow-floating", Usage: "accept unpinned inputs: base images given by tag without a digest, apt packages without pinned versions (the build is then not reproducible)"}

var recipeFlag = &cli.StringFlag{Name: "recipe", Value: "server", Usage: "recipe `NAME`: server or wheel, or a recipe FILE.yaml (one recipe bump --new-series recorded)"}

// loadTarget resolves --target/--target-file; a missing one is a usage error.
func loadTarget(name, file string) (*targets.Target, error) {
	if name == "" && file == "" {
		return nil, usagef("no target given: use --target (one of %s) or --target-file", strings.Join(targets.Names(), ", "))
	}
	if name != "" && file != "" {
		return nil, usagef("give --target or --target-file, not both")
	}
	t, err := targets.Resolve(name, file)
	if errors.Is(err, targets.ErrUnknownTarget) || errors.Is(err, fs.ErrNotExist) {
		return nil, usageError{err}
	}
	return t, err
}

// resolvePlan loads everything a plan needs and resolves it.
func resolvePlan(target, targetFile, recipe string, allowFloating bool) (*pipeline.Plan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return resolvePlanWith(target, targetFile, recipe, allowFloating, series)
}

// resolveWheelPlan resolves the built-in wheel recipe for t.
func resolveWheelPlan(t *targets.Target, python, commit string, allowFloating bool) (*pipeline.WheelPlan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return pipeline.ResolveWheelRecipe(t, series, pipeline.WheelOptions{Options: pipeline.Options{AllowFloating: allowFloating}, Python: python, Commit: commit})
}

// defaultTarget is what `llbuild build` builds when no target is named.
const defaultTarget = "cpu-v3"

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// refFlag builds another commit than the recipe's pin, named as upstream names it.
var refFlag = &cli.StringFlag{Name: "ref", Usage: "build llama.cpp at `REF` instead of the recipe's pinned commit: a commit, a release tag (b10573), a branch or a PR head (pull/23398/head), resolved in --source when it is a git repository, else fetched (commits only) from the recipe's source URL; its commit time and build number come from the history"}

// serverInputs is what a server build is made from: the recipe (its source moved to --ref) and
// the series.
type serverInputs struct {
	recipe *recipes.Recipe
	series []patches.Patch
	// plainSource is --source when it is a plain directory, whose tree hash (tree, made by
	// resolveServerPlans once the plans resolve without it) is part of the plan.
	plainSource, tree string
	log               *slog.Logger
}

// serverInputsOf reads --recipe, --series and --ref; source is --source (may be empty).
// builtinNames lets --recipe name a built-in recipe (plan's flag) rather than only a file.
func serverInputsOf(c *cli.Context, source string, builtinNames bool) (*serverInputs, error) {
	name := c.String("recipe")
	if name == "" {
		name = "server"
	}
	if !builtinNames && name != "server" && !strings.HasSuffix(name, ".yaml") {
		return nil, usagef("--recipe takes a server recipe FILE.yaml, got %q (the built-in one is used without the flag)", name)
	}
	r, err := recipes.Load(name)
	if err != nil {
		return nil, usageError{err}
	}
	if r.Name != "server" {
		return nil, usagef("--recipe %s is the %q recipe; this command builds the server recipe", name, r.Name)
	}
	series, err := seriesOf(c)
	if err != nil {
		return nil, err
	}
	if ref := c.String("ref"); ref != "" {
		repo, err := gitref.FetchRef(c.Context, ref, source, r.Source.URL)
		if err != nil {
			return nil, usageOf(err)
		}
		commit, err := gitref.Resolve(c.Context, repo, ref)
		if err != nil {
			return nil, usageError{err}
		}
		if r, err = r.At(c.Context, repo, commit, ref); err != nil {
			return nil, usageError{err}
		}
		loggerOf(c).Info("ref resolved", "ref", ref, "commit", commit.Hash, "subject", commit.Subject, "build", r.Source.BuildNumber, "in", repo)
	}
	in := &serverInputs{recipe: r, series: series, log: loggerOf(c)}
	if source != "" {
		if st, err := os.Stat(source); err == nil && st.IsDir() && !gitref.IsRepository(c.Context, source) {
			in.plainSource = source
		}
	}
	return in, nil
}

// targetSpec is a target named on the command line: built-in by name, or a file.
type targetSpec struct{ name, file string }

// targetSpecsOf reads the targets of build and publish: --target names (comma-separated or
// repeated) in order, then the target files.
func targetSpecsOf(names, files []string) []targetSpec {
	var specs []targetSpec
	for _, t := range names {
		for _, n := range strings.Split(t, ",") {
			if n = strings.TrimSpace(n); n != "" {
				specs = append(specs, targetSpec{name: n})
			}
		}
	}
	for _, f := range files {
		specs = append(specs, targetSpec{file: f})
	}
	return specs
}

// resolveServerPlans resolves each target's plan of the server recipe, in order: the one place
// build and publish turn targets into plans. A target given twice is a usage error; resolution
// errors of several targets are reported together.
func resolveServerPlans(specs []targetSpec, in *serverInputs, allowFloating bool) ([]*pipeline.Plan, error) {
	plans, err := resolveServerPlansWith(specs, in, allowFloating, "")
	if err != nil || in.plainSource == "" {
		return plans, err
	}
	// A plain directory's tree is part of the plan: read once the plans resolve without it, so
	// that a usage error is said before the source is read.
	if in.tree == "" {
		if in.tree, err = pipeline.TreeHash(in.plainSource); err != nil {
			return nil, fmt.Errorf("hashing the source directory %s: %w", in.plainSource, err)
		}
		if in.log != nil {
			in.log.Info("the source is a plain directory: its tree hash is part of the plan", "source", in.plainSource, "tree", in.tree)
		}
	}
	return resolveServerPlansWith(specs, in, allowFloating, in.tree)
}

// seriesFlag chooses the patches a build carries: a named series (scoring, plain) or a series
// file of the user's in the built-in format ("<file>.patch sha256:<digest>" per line), the patches
// beside it. An empty file builds the commit as upstream has it.
var seriesFlag = &cli.StringFlag{Name: "series", Usage: "the patches to apply: `scoring` (the built-in series: upstream plus echo and prompt logprobs, the default), plain (upstream plus patch 0001, what a CUDA build needs) or a series FILE (\"NAME.patch sha256:DIGEST\" lines, the patches beside it; an empty file applies none)"}

// seriesOf is the series --series names, or the built-in one.
func seriesOf(c *cli.Context) ([]patches.Patch, error) { return seriesByName(c.String("series")) }

// seriesByName is the series name stands for: a named series (scoring, plain), a series file,
// or, for "", the built-in one.
func seriesByName(name string) ([]patches.Patch, error) {
	switch name {
	case "":
		return patches.Series()
	case patches.SeriesScoring, patches.SeriesPlain:
		return patches.Named(name)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, usagef("--series %s: neither a named series (scoring, plain) nor a file: %v", name, err)
	}
	s, err := patches.Load(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
	return s, usageOf(err)
}

var sourceRepoFlag = &cli.StringFlag{Name: "source", Usage: "llama.cpp git checkout or mirror `DIR` (patches status also takes a plain source tree)", Required: true}

// noCommitIsUsage makes a commit the source does not have a usage error (exit 2: named something
// that is not there).
func noCommitIsUsage(err error) error {
	if errors.Is(err, patches.ErrNoCommit) {
		return usageError{err}
	}
	return err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func resolveServerPlansWith(specs []targetSpec, in *serverInputs, allowFloating bool, tree string) ([]*pipeline.Plan, error) {
	var plans []*pipeline.Plan
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		t, err := loadTarget(s.name, s.file)
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		p, err := pipeline.Resolve(t, in.recipe, in.series, nil, pipeline.Options{AllowFloating: allowFloating, SourceTree: tree})
		if err != nil {
			if err := usageOf(err); errors.As(err, new(usageError)) {
				return nil, err
			}
			errs = append(errs, fmt.Errorf("target %s: %w", t.Name, err))
			continue
		}
		if seen[p.Target] {
			return nil, usagef("target %s is given twice", p.Target)
		}
		seen[p.Target] = true
		plans = append(plans, p)
	}
	return plans, errors.Join(errs...)
}
