package pipeline

import (
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// ResolveRecipe loads the recipe named (a built-in name or a FILE.yaml) and the recipe it
// vendors, and resolves them for t with Resolve. A recipe named that does not load is an
// inputerr.Error.
func ResolveRecipe(t *targets.Target, recipe string, series []patches.Patch, opts Options) (*Plan, error) {
	r, err := recipes.Load(recipe)
	if err != nil {
		return nil, &inputerr.Error{Err: err}
	}
	var vendor *recipes.Recipe
	if r.Source.Vendor != "" {
		if vendor, err = recipes.Load(r.Source.Vendor); err != nil {
			return nil, err
		}
	}
	return Resolve(t, r, series, vendor, opts)
}

// ResolveSpec loads the target s names (targets.Spec.Load) and resolves the recipe named for it
// with ResolveRecipe.
func ResolveSpec(s targets.Spec, recipe string, series []patches.Patch, opts Options) (*Plan, error) {
	t, err := s.Load()
	if err != nil {
		return nil, err
	}
	return ResolveRecipe(t, recipe, series, opts)
}

// ResolveWheelRecipe loads the built-in wheel recipe and the recipe it vendors, and resolves
// them for t with ResolveWheel.
func ResolveWheelRecipe(t *targets.Target, series []patches.Patch, opts WheelOptions) (*WheelPlan, error) {
	r, err := recipes.Load("wheel")
	if err != nil {
		return nil, err
	}
	vendor, err := recipes.Load(r.Source.Vendor)
	if err != nil {
		return nil, err
	}
	return ResolveWheel(t, r, series, vendor, opts)
}

// ResolveBuiltinWheel is ResolveWheelRecipe with the built-in patch series.
func ResolveBuiltinWheel(t *targets.Target, opts WheelOptions) (*WheelPlan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return ResolveWheelRecipe(t, series, opts)
}

// ResolveWheelSpec loads the target s names (targets.Spec.Load) and resolves the built-in wheel
// recipe for it with ResolveBuiltinWheel.
func ResolveWheelSpec(s targets.Spec, opts WheelOptions) (*WheelPlan, error) {
	t, err := s.Load()
	if err != nil {
		return nil, err
	}
	return ResolveBuiltinWheel(t, opts)
}
