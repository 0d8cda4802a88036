package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// Inputs are what the plans of a server build are made from besides their targets: the recipe
// (its source moved to a ref), the patch series, and the source when it is a plain directory.
type Inputs struct {
	Recipe *recipes.Recipe
	Series []patches.Patch
	// PlainSource is a source directory without history: its tree hash (TreeHash) is part of
	// every plan, read once by Resolve.
	PlainSource string
	Log         *slog.Logger
	tree        string
}

// ServerInputs reads the inputs of a server build as the command line names them: the recipe
// (recipes.LoadServer), the series (patches.ByName), the commit ref names ("": the recipe's
// pin; recipes.Recipe.AtRef, resolved in source when it is a repository) and the source
// directory ("" when none). A name that names nothing is an inputerr.Error.
func ServerInputs(ctx context.Context, recipe, series, ref, source string, builtinNames bool, log *slog.Logger) (*Inputs, error) {
	r, err := recipes.LoadServer(recipe, builtinNames)
	if err != nil {
		return nil, err
	}
	s, err := patches.ByName(series)
	if err != nil {
		return nil, err
	}
	if ref != "" {
		if r, err = r.AtRef(ctx, ref, source, log); err != nil {
			return nil, err
		}
	}
	in := &Inputs{Recipe: r, Series: s, Log: log}
	if source != "" && gitref.IsPlainDirectory(ctx, source) {
		in.PlainSource = source
	}
	return in, nil
}

// Resolve resolves the plan of each target specs name (ResolveTargets). A PlainSource's tree is
// hashed once the plans resolve without it, so that a mistake in the inputs is said before the
// source is read.
func (in *Inputs) Resolve(specs []targets.Spec, opts Options) ([]*Plan, error) {
	plans, err := ResolveTargets(specs, in.Recipe, in.Series, opts)
	if err != nil || in.PlainSource == "" {
		return plans, err
	}
	if in.tree == "" {
		if in.tree, err = TreeHash(in.PlainSource); err != nil {
			return nil, fmt.Errorf("hashing the source directory %s: %w", in.PlainSource, err)
		}
		if in.Log != nil {
			in.Log.Info("the source is a plain directory: its tree hash is part of the plan", "source", in.PlainSource, "tree", in.tree)
		}
	}
	opts.SourceTree = in.tree
	return ResolveTargets(specs, in.Recipe, in.Series, opts)
}
