package recorded

import (
	"context"
	"os"
	"slices"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/targets"
)

// OpenOrResolve reads the plan arg names, the way commands that compare plans take one: a
// built-in target (its bare name, even where a path of that name exists: ./NAME is the path)
// or a target file (.yaml, .yml), resolved now with recipe and the built-in series, its host
// the target; else what Open reads. An arg that is neither a file, a built-in
// target nor an image reference is an inputerr.Error; o is how targets are resolved (a target
// whose images float needs o.AllowFloating).
func OpenOrResolve(ctx context.Context, arg, recipe string, o pipeline.Options) (*Plan, error) {
	// an image named as --base and bundle --image name one: oci-archive:FILE, oci-layout:DIR
	if p, ok := image.LocalPath(arg); ok {
		if _, err := os.Stat(p); err != nil {
			return nil, inputerr.Errorf("%s: %v", arg, err)
		}
		return Open(ctx, p)
	}
	_, statErr := os.Stat(arg)
	var spec targets.Spec
	switch {
	case slices.Contains(targets.Names(), arg):
		// a built-in target's name is the target even where a file or directory of that name
		// lies here (build --out . leaves one per target): ./NAME is the path
		spec.Name = arg
	case statErr == nil && (strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")):
		spec.File = arg
	case statErr != nil && !IsImageRef(arg):
		if _, err := targets.Load(arg); err != nil {
			return nil, inputerr.Errorf("%s is neither a file, a built-in target (%s) nor an image reference (registry.example/repo:tag)", arg, strings.Join(targets.Names(), ", "))
		}
		spec.Name = arg
	default:
		return Open(ctx, arg)
	}
	t, err := spec.Load()
	if err != nil {
		return nil, &inputerr.Error{Err: err} // a target file that does not read is the caller's to mend
	}
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	p, err := pipeline.ResolveRecipe(t, recipe, series, o)
	if err != nil {
		return nil, err
	}
	return &Plan{Plan: p, Host: t}, nil
}

// Diff compares the plans args name (OpenOrResolve, with recipe): what differs, grouped, and
// whether each side's host's driver starts each plan (pipeline.DriverChecks).
func Diff(ctx context.Context, args [2]string, recipe string, o pipeline.Options) (pipeline.DiffReport, error) {
	var sides [2]*Plan
	for i, arg := range args {
		s, err := OpenOrResolve(ctx, arg, recipe, o)
		if err != nil {
			return pipeline.DiffReport{}, err
		}
		sides[i] = s
	}
	a, b := sides[0], sides[1]
	d := pipeline.DiffPlans(a.Plan, b.Plan, a.Partial || b.Partial)
	checks := pipeline.DriverChecks([2]*pipeline.Plan{a.Plan, b.Plan}, [2]*targets.Target{a.Host, b.Host})
	return pipeline.NewDiffReport([2]pipeline.DiffSide{pipeline.SideOf(args[0], a.Plan, a.Partial), pipeline.SideOf(args[1], b.Plan, b.Partial)}, d, checks), nil
}
