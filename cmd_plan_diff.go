package main

import (
	"errors"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/pipeline"
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

type planRef struct {
	Arg     string `json:"arg"`
	Target  string `json:"target"`
	Hash    string `json:"hash,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

func (s *planSide) ref() planRef {
	return planRef{Arg: s.arg, Target: s.plan.Target, Hash: s.plan.Hash, Partial: s.partial}
}

// driverChecks checks both sides' plans against the driver of each side's host.
func driverChecks(sides [2]*planSide) []pipeline.DriverCheck {
	return pipeline.DriverChecks([2]*pipeline.Plan{sides[0].plan, sides[1].plan}, [2]*targets.Target{sides[0].host, sides[1].host})
}
