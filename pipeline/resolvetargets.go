package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// ResolveTargets resolves r's plan for each target specs names, in order: the one place several
// targets become plans. A target that does not load or resolve for a reason inputerr marks, or
// one given twice, stops it with that inputerr.Error; the other errors of all targets are
// reported together, the plans that resolved returned with them.
func ResolveTargets(specs []targets.Spec, r *recipes.Recipe, series []patches.Patch, opts Options) ([]*Plan, error) {
	var plans []*Plan
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		t, err := s.Load()
		if err != nil {
			if inputerr.Is(err) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		p, err := Resolve(t, r, series, nil, opts)
		if err != nil {
			if inputerr.Is(err) {
				return nil, err
			}
			if !strings.HasPrefix(err.Error(), "target "+t.Name+": ") { // Resolve's own errors name it
				err = fmt.Errorf("target %s: %w", t.Name, err)
			}
			errs = append(errs, err)
			continue
		}
		if seen[p.Target] {
			return nil, inputerr.Errorf("target %s is given twice", p.Target)
		}
		seen[p.Target] = true
		plans = append(plans, p)
	}
	return plans, errors.Join(errs...)
}
