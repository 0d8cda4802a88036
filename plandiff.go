package main

import (
	"context"
	"io"

	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/recorded"
	"github.com/llbuild/llbuild/targets"
)

// planSide is one side of a diff: its plan, the host it is for when known, and whether it
// records only part of a plan (a bundle from before manifest.json version 2).
type planSide struct {
	arg     string
	plan    *pipeline.Plan
	host    *targets.Target
	partial bool
}

// loadPlanSide reads what arg names (recorded.OpenOrResolve); what it cannot be is a usage
// error.
func loadPlanSide(ctx context.Context, arg, recipe string) (*planSide, error) {
	r, err := recorded.OpenOrResolve(ctx, arg, recipe)
	if err != nil {
		return nil, usageOf(err)
	}
	return &planSide{arg: arg, plan: r.Plan, host: r.Host, partial: r.Partial}, nil
}

// writePlanDiff writes d between sides as plan diff prints it (pipeline.DiffReport.WriteText).
func writePlanDiff(w io.Writer, sides [2]*planSide, d *pipeline.PlanDiff, checks []pipeline.DriverCheck) error {
	a, b := sides[0], sides[1]
	return pipeline.NewDiffReport([2]pipeline.DiffSide{pipeline.SideOf(a.arg, a.plan, a.partial), pipeline.SideOf(b.arg, b.plan, b.partial)}, d, checks).WriteText(w)
}
