package pipeline

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Result is the outcome of building one plan of a matrix.
type Result struct {
	Plan *Plan
	// Dir is the artifact directory when Err is nil.
	Dir string
	Err error
}

// BuildAll builds plans with at most jobs builds at a time. Results are in the order of
// plans, whatever order the builds finish in. One failing build does not stop the others;
// cancelling ctx stops them all.
func BuildAll(ctx context.Context, ex Executor, plans []*Plan, out string, jobs int) []Result {
	results := make([]Result, len(plans))
	var g errgroup.Group
	if jobs < 1 {
		jobs = 1
	}
	g.SetLimit(jobs)
	for i, p := range plans {
		results[i].Plan = p
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				results[i].Err = fmt.Errorf("target %s: %w", p.Target, err)
				return nil
			}
			results[i].Dir, results[i].Err = ex.Build(ctx, p, out)
			return nil
		})
	}
	_ = g.Wait()
	return results
}
