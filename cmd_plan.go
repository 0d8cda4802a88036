package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/executor"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

func recipesCommand() *cli.Command {
	return &cli.Command{
		Name:   "recipes",
		Usage:  "list the built-in recipes",
		Flags:  []cli.Flag{cmdutil.JSONFlag},
		Action: func(c *cli.Context) error { return recipes.WriteList(cmdutil.Stdout(c), c.Bool("json")) },
	}
}

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "resolve a target and a recipe into the full build plan, without building",
		Description: "Prints exactly what `llbuild build` will do: base images with digests, apt packages with\n" +
			"versions and the archive snapshot, source and commit, patches with digests, CMake arguments\n" +
			"in order, environment, build targets, outputs and image labels. The same inputs print the same bytes.",
		Flags: []cli.Flag{cmdutil.TargetFlag, cmdutil.TargetFileFlag, cmdutil.RecipeFlag, cmdutil.JSONFlag, cmdutil.FloatingFlag, cmdutil.SeriesFlag, cmdutil.RefFlag,
			&cli.StringFlag{Name: "source", Usage: "the llama.cpp source `DIR` the build will read, as build takes it: a git repository or mirror (--ref is resolved in it; without one its commits are fetched from the recipe's source URL), or a plain directory, whose tree hash is part of the plan"},
			&cli.BoolFlag{Name: "check-pins", Usage: "ask apt, in the devel image through the Dagger engine (it must reach the archive snapshot), whether the snapshot has every pinned apt version; exits 1 when one is missing"},
			&cli.StringFlag{Name: "engine", Usage: "with --check-pins: Dagger runner host `URL` of a running engine"},
			&cli.StringSliceFlag{Name: "base", Usage: "with --check-pins: the devel image to ask in, `devel=REF` (an image reference, oci-archive:PATH or oci-layout:PATH)"},
		},
		Subcommands: []*cli.Command{planDiffCommand()},
		Action: func(c *cli.Context) error {
			o, err := planOptionsOf(c)
			if err != nil {
				return err
			}
			return runPlan(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// planOptions is everything `llbuild plan` was asked to do.
type planOptions struct {
	Target        targets.Spec
	AllowFloating bool
	JSON          bool
	// Wheel is --recipe wheel; Inputs are the server recipe's otherwise.
	Wheel  bool
	Inputs *pipeline.Inputs
	// CheckPins asks apt in the devel image (Engine's, Bases' devel= one) for the apt pins;
	// EngineOrBase says --engine or --base was given, which only CheckPins takes.
	CheckPins    bool
	Engine       string
	Bases        []string
	EngineOrBase bool
}

// planOptionsOf reads the flags; it reads the server recipe's inputs (and resolves --ref) only
// once the flags are known to go together.
func planOptionsOf(c *cli.Context) (planOptions, error) {
	if c.NArg() > 0 {
		return planOptions{}, cmdutil.Usagef("plan takes no arguments, got %q", c.Args().Slice())
	}
	o := planOptions{
		Target: targets.Spec{Name: c.String("target"), File: c.String("target-file")}, AllowFloating: c.Bool("allow-floating"), JSON: c.Bool("json"),
		Wheel: c.String("recipe") == "wheel", CheckPins: c.Bool("check-pins"), Engine: c.String("engine"), Bases: c.StringSlice("base"),
		EngineOrBase: c.IsSet("engine") || c.IsSet("base"),
	}
	if o.Wheel {
		if c.IsSet("series") || c.IsSet("ref") {
			return o, cmdutil.Usagef("--series and --ref apply to the server recipe; the wheel plan vendors the server recipe's built-in series and pin")
		}
		return o, nil
	}
	var err error
	o.Inputs, err = cmdutil.ServerInputsOf(c, c.String("source"), true)
	return o, err
}

// runPlan resolves the plan and prints it, or checks its apt pins.
func runPlan(ctx context.Context, o planOptions, s cmdutil.Streams) error {
	if o.Wheel {
		w, err := pipeline.ResolveWheelSpec(o.Target, pipeline.WheelOptions{Options: pipeline.Options{AllowFloating: o.AllowFloating}})
		if err != nil {
			return cmdutil.UsageOf(err)
		}
		return w.Print(s.Stdout, o.JSON)
	}
	plans, err := o.Inputs.Resolve([]targets.Spec{o.Target}, pipeline.Options{AllowFloating: o.AllowFloating})
	if err != nil {
		return err
	}
	switch {
	case o.CheckPins:
		return cmdutil.UsageOf(executor.CheckPins(ctx, plans[0], o.Engine, o.Bases, cmdutil.ExecutorEnv(s, nil), s.Stdout))
	case o.EngineOrBase:
		return cmdutil.Usagef("--engine and --base apply to --check-pins")
	}
	return plans[0].Print(s.Stdout, o.JSON)
}
