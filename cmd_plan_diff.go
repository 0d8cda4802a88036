package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/jsonout"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/recorded"
)

func planDiffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "what differs between two plans, and whether each target's driver still starts them",
		ArgsUsage: "A B",
		Description: "A and B are each a built-in target, a target file (.yaml), a plan (.json, as plan --json\n" +
			"prints it, or a provenance.json), an artifact directory, a bundle directory or archive\n" +
			"(.tar.zst, .tar.gz), or a runtime image: an OCI archive (.tar, as build --image-out writes),\n" +
			"an OCI layout directory, or a registry reference naming its registry and a tag or digest\n" +
			"(registry.example/repo:tag, docker.io/user/repo@sha256:...). A target's bare name is the\n" +
			"target even beside a directory of that name (./NAME is the directory). Differences are\n" +
			"grouped: source commit, patches, base images, apt, CMake arguments, environment, CUDA,\n" +
			"runtime env, labels. Exit 0 when B's NVIDIA_REQUIRE_CUDA holds on every target's driver, 1\n" +
			"when not, 2 when a plan could not be read (a usage error, a registry that cannot be reached\n" +
			"or lacks the tag).",
		Flags: []cli.Flag{cmdutil.RecipeFlag, cmdutil.JSONFlag, cmdutil.FloatingFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cmdutil.Usagef("plan diff takes two plans A B (targets, target files, plan files, artifact or bundle directories, images), got %d", c.NArg())
			}
			return runPlanDiff(c.Context, [2]string{c.Args().Get(0), c.Args().Get(1)}, c.String("recipe"), pipeline.Options{AllowFloating: c.Bool("allow-floating")}, c.Bool("json"), cmdutil.StreamsOf(c))
		},
	}
}

// runPlanDiff prints what differs between the plans args name and each target's driver check
// (recorded.Diff); it fails when B would not start on a target's driver (StartError, exit 1).
// A plan it could not read, for whatever reason (a registry down too), is exit 2, as preflight's
// "could not check" is: exit 1 says B would not start, which nothing was compared to know.
func runPlanDiff(ctx context.Context, args [2]string, recipe string, o pipeline.Options, asJSON bool, s cmdutil.Streams) error {
	r, err := recorded.Diff(ctx, args, recipe, o)
	if err != nil {
		return cmdutil.Usage(err)
	}
	if asJSON {
		err = jsonout.Write(s.Stdout, r)
	} else {
		err = r.WriteText(s.Stdout)
	}
	if err != nil {
		return err
	}
	return r.StartError()
}
