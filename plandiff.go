package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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

// loadPlanSide reads what arg names: a target file or a built-in target, resolved now, or
// what recorded.Open reads (artifacts, a bundle, an image, a plan file).
func loadPlanSide(ctx context.Context, arg, recipe string) (*planSide, error) {
	s := &planSide{arg: arg}
	_, statErr := os.Stat(arg)
	switch {
	case statErr == nil && (strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")):
		t, err := loadTarget("", arg)
		if err != nil {
			return nil, err
		}
		if s.plan, err = resolvePlan("", arg, recipe, false); err != nil {
			return nil, err
		}
		s.host = t
	case statErr != nil && !recorded.IsImageRef(arg):
		t, err := targets.Load(arg)
		if err != nil {
			return nil, usagef("%s is neither a file, a built-in target (%s) nor an image reference (registry.example/repo:tag)", arg, strings.Join(targets.Names(), ", "))
		}
		if s.plan, err = resolvePlan(arg, "", recipe, false); err != nil {
			return nil, err
		}
		s.host = t
	default:
		r, err := recorded.Open(ctx, arg)
		if err != nil {
			return nil, usageOf(err)
		}
		s.plan, s.host, s.partial = r.Plan, r.Host, r.Partial
	}
	return s, nil
}

func writePlanDiff(w io.Writer, sides [2]*planSide, d *pipeline.PlanDiff, checks []pipeline.DriverCheck) error {
	var b strings.Builder
	for i, s := range sides {
		h := s.plan.Hash
		if len(h) > 12 {
			h = h[:12]
		}
		fmt.Fprintf(&b, "%c: %s (target %s, plan %s)", 'A'+i, s.arg, s.plan.Target, h)
		if s.partial {
			b.WriteString(" — a bundle from an earlier llbuild (manifest.json version 1): only its source, patches and base images are compared; rebundle it to compare the whole plan")
		}
		b.WriteString("\n")
	}
	if len(d.Groups) == 0 {
		b.WriteString("no differences\n")
	}
	for _, g := range d.Groups {
		fmt.Fprintf(&b, "\n%s:\n", g.Name)
		for _, c := range g.Changes {
			switch {
			case c.A == "":
				fmt.Fprintf(&b, "  %s: + %s\n", c.What, c.B)
			case c.B == "":
				fmt.Fprintf(&b, "  %s: - %s\n", c.What, c.A)
			default:
				fmt.Fprintf(&b, "  %s: %s -> %s\n", c.What, c.A, c.B)
			}
		}
	}
	if len(checks) > 0 {
		b.WriteString("\ndriver cap:\n")
	}
	for _, ch := range checks {
		verdict := "holds"
		if !ch.Holds {
			verdict = "DOES NOT HOLD: " + ch.Reason
		}
		fmt.Fprintf(&b, "  target %s, driver %s: %s needs %s: %s\n", ch.Target, ch.Driver, ch.Plan, ch.Require, verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
