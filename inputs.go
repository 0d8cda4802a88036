package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/jsonout"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

// What several commands share: the flags of the common inputs (targets, recipe, series, ref,
// source), their loading into targets, series and plans, and JSON on stdout.

var targetFlag = &cli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME` (see llbuild targets)"}

var targetFileFlag = &cli.StringFlag{Name: "target-file", Usage: "target `FILE` describing your own host (llbuild target detect writes one)"}

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print JSON"}

var floatingFlag = &cli.BoolFlag{Name: "allow-floating", Usage: "accept unpinned inputs: base images given by tag without a digest, apt packages without pinned versions (the build is then not reproducible)"}

var recipeFlag = &cli.StringFlag{Name: "recipe", Value: "server", Usage: "recipe `NAME`: server or wheel, or a recipe FILE.yaml (one recipe bump --new-series recorded)"}

// refFlag builds another commit than the recipe's pin, named as upstream names it.
var refFlag = &cli.StringFlag{Name: "ref", Usage: "build llama.cpp at `REF` instead of the recipe's pinned commit: a commit, a release tag (b10573), a branch or a PR head (pull/23398/head), resolved in --source when it is a git repository, else fetched (commits only) from the recipe's source URL; its commit time and build number come from the history"}

// seriesFlag chooses the patches a build carries: a named series (scoring, plain) or a series
// file of the user's in the built-in format ("<file>.patch sha256:<digest>" per line), the patches
// beside it. An empty file builds the commit as upstream has it.
var seriesFlag = &cli.StringFlag{Name: "series", Usage: "the patches to apply: `scoring` (the built-in series: upstream plus echo and prompt logprobs, the default), plain (upstream plus patch 0001, what a CUDA build needs) or a series FILE (\"NAME.patch sha256:DIGEST\" lines, the patches beside it; an empty file applies none)"}

var sourceRepoFlag = &cli.StringFlag{Name: "source", Usage: "llama.cpp git checkout or mirror `DIR` (patches status also takes a plain source tree)", Required: true}

// defaultTarget is what `llbuild build` builds when no target is named.
const defaultTarget = targets.Default

// loadTarget resolves --target/--target-file; none, both, an unknown name or a missing file is
// a usage error.
func loadTarget(name, file string) (*targets.Target, error) {
	t, err := targets.Spec{Name: name, File: file}.Load()
	return t, usageOf(err)
}

// resolvePlan loads everything a plan needs and resolves it.
func resolvePlan(target, targetFile, recipe string, allowFloating bool) (*pipeline.Plan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return resolvePlanWith(target, targetFile, recipe, allowFloating, series)
}

// resolvePlanWith is resolvePlan with a patch series of the caller's (--series).
func resolvePlanWith(target, targetFile, recipe string, allowFloating bool, series []patches.Patch) (*pipeline.Plan, error) {
	p, err := pipeline.ResolveSpec(targets.Spec{Name: target, File: targetFile}, recipe, series, pipeline.Options{AllowFloating: allowFloating})
	return p, usageOf(err)
}

// resolveWheelPlan resolves the built-in wheel recipe for t.
func resolveWheelPlan(t *targets.Target, python, commit string, allowFloating bool) (*pipeline.WheelPlan, error) {
	return pipeline.ResolveBuiltinWheel(t, pipeline.WheelOptions{Options: pipeline.Options{AllowFloating: allowFloating}, Python: python, Commit: commit})
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error { return jsonout.Write(w, v) }

// serverInputs is what a server build is made from (pipeline.Inputs); series is its Series.
type serverInputs struct {
	*pipeline.Inputs
	series []patches.Patch
}

// serverInputsOf reads --recipe, --series and --ref (pipeline.ServerInputs); source is --source
// (may be empty). builtinNames lets --recipe name a built-in recipe (plan's flag) rather than
// only a file.
func serverInputsOf(c *cli.Context, source string, builtinNames bool) (*serverInputs, error) {
	in, err := pipeline.ServerInputs(c.Context, c.String("recipe"), c.String("series"), c.String("ref"), source, builtinNames, loggerOf(c))
	if err != nil {
		return nil, usageOf(err)
	}
	return &serverInputs{Inputs: in, series: in.Series}, nil
}

// targetSpec is a target named on the command line: built-in by name, or a file.
type targetSpec struct{ name, file string }

// targetSpecsOf reads the targets of build and publish: --target names (comma-separated or
// repeated) in order, then the target files.
func targetSpecsOf(names, files []string) []targetSpec {
	var specs []targetSpec
	for _, s := range targets.Specs(names, files) {
		specs = append(specs, targetSpec{name: s.Name, file: s.File})
	}
	return specs
}

// resolveServerPlans resolves each target's plan of the server recipe, in order (Inputs.Resolve):
// the one place build and publish turn targets into plans.
func resolveServerPlans(specs []targetSpec, in *serverInputs, allowFloating bool) ([]*pipeline.Plan, error) {
	plans, err := in.Resolve(specsOf(specs), pipeline.Options{AllowFloating: allowFloating})
	return plans, usageOf(err)
}

func specsOf(specs []targetSpec) []targets.Spec {
	ts := make([]targets.Spec, len(specs))
	for i, s := range specs {
		ts[i] = targets.Spec{Name: s.name, File: s.file}
	}
	return ts
}

// seriesOf is the series --series names, or the built-in one.
func seriesOf(c *cli.Context) ([]patches.Patch, error) { return seriesByName(c.String("series")) }

// seriesByName is the series name stands for (patches.ByName); a name that is neither a named
// series nor a file is a usage error.
func seriesByName(name string) ([]patches.Patch, error) {
	s, err := patches.ByName(name)
	return s, usageOf(err)
}

// noCommitIsUsage makes a commit the source does not have a usage error (exit 2: named something
// that is not there).
func noCommitIsUsage(err error) error {
	if errors.Is(err, patches.ErrNoCommit) {
		return usageError{err}
	}
	return err
}

func nonNil[T any](s []T) []T { return jsonout.NonNil(s) }
