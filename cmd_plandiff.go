package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/recorded"
	"github.com/llbuild/llbuild/targets"
)

func planDiffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "what differs between two plans, and whether each target's driver still starts them",
		ArgsUsage: "A B",
		Description: "A and B are each a built-in target, a target file (.yaml), a plan (.json, as plan --json\n" +
			"prints it, or a provenance.json), an artifact directory, a bundle directory, or a runtime image:\n" +
			"an OCI archive (.tar, as build --image-out writes), an OCI layout directory, or a registry\n" +
			"reference naming its registry and a tag or digest (registry.example/repo:tag,\n" +
			"docker.io/user/repo@sha256:...). Differences are grouped: source commit, patches, base images,\n" +
			"apt, CMake arguments, environment, CUDA, runtime env, labels. Exit 0 when B's NVIDIA_REQUIRE_CUDA\n" +
			"holds on every target's driver, 1 when not.",
		Flags: []cli.Flag{recipeFlag, jsonFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usagef("plan diff takes two plans A B (targets, target files, plan files, artifact or bundle directories, images), got %d", c.NArg())
			}
			var sides [2]*planSide
			for i, arg := range c.Args().Slice() {
				s, err := loadPlanSide(c.Context, arg, c.String("recipe"))
				if err != nil {
					return err
				}
				sides[i] = s
			}
			d := pipeline.DiffPlans(sides[0].plan, sides[1].plan, sides[0].partial || sides[1].partial)
			checks := driverChecks(sides)
			out := stdoutOf(c)
			if c.Bool("json") {
				err := writeJSON(out, struct {
					A       planRef                `json:"a"`
					B       planRef                `json:"b"`
					Groups  []pipeline.Group       `json:"groups"`
					Drivers []pipeline.DriverCheck `json:"drivers"`
				}{sides[0].ref(), sides[1].ref(), nonNil(d.Groups), nonNil(checks)})
				if err != nil {
					return err
				}
			} else if err := writePlanDiff(out, sides, d, checks); err != nil {
				return err
			}
			var failed []string
			for _, ch := range checks {
				if ch.Plan == "B" && !ch.Holds {
					failed = append(failed, ch.Reason)
				}
			}
			if len(failed) > 0 {
				return errors.New("B would not start: " + strings.Join(failed, "; "))
			}
			return nil
		},
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// planSide is one side of a diff: its plan, the host it is for when known, and whether it
// records only part of a plan (a bundle from before manifest.json version 2).
type planSide struct {
	arg     string
	plan    *pipeline.Plan
	host    *targets.Target
	partial bool
}

type planRef struct {
	Arg     string `json:"arg"`
	Target  string `json:"target"`
	Hash    string `json:"hash,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

func (s *planSide) ref() planRef {
	return planRef{Arg: s.arg, Target: s.plan.Target, Hash: s.plan.Hash, Partial: s.partial}
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

// driverChecks checks both sides' plans against the driver of each side's host.
func driverChecks(sides [2]*planSide) []pipeline.DriverCheck {
	return pipeline.DriverChecks([2]*pipeline.Plan{sides[0].plan, sides[1].plan}, [2]*targets.Target{sides[0].host, sides[1].host})
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
