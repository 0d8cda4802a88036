package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/build"
	"github.com/llbuild/llbuild/pipeline/executor"
	"github.com/llbuild/llbuild/targets"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:  "build",
		Usage: "build llama-server for one or more targets: artifacts, and optionally a runtime image",
		Description: "Resolves each target's plan (see llbuild plan) and carries it out with the dagger executor\n" +
			"(an engine runs the plan's devel image) or the host executor (this machine's compilers).\n" +
			"Artifacts land in OUT/<target>/<plan hash>/ with artifacts.json and provenance.json.\n" +
			"stdout: one line per target, the artifact directory, or the image digest with --image-out/--push;\n" +
			"--json prints an array instead: target, plan hash, directory, image digest, error.\n" +
			"Exit status: 0 all built, 1 a build failed, 2 usage.",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME`s, comma-separated or repeated"},
			cmdutil.TargetFileFlag,
			cmdutil.FloatingFlag,
			&cli.StringFlag{Name: "recipe", Value: "server", Usage: "a server recipe `FILE.yaml` instead of the built-in one (one that recipe bump --new-series recorded, with its --series)"},
			cmdutil.SeriesFlag,
			cmdutil.RefFlag,
			&cli.StringFlag{Name: "image-out", Usage: "write the runtime image as an OCI archive to `FILE` (a directory path ending in / writes an OCI layout)"},
			&cli.StringSliceFlag{Name: "push", Usage: "push the runtime image to `REF` (repeatable)"},
			cmdutil.JSONFlag,
		}, cmdutil.ExecutorFlags("llama.cpp source `DIR`: a plain directory or a git repository/mirror holding the plan's commit (required for host)", "targets built at once")...),
		Action: func(c *cli.Context) error {
			o, err := buildOptionsOf(c)
			if err != nil {
				return err
			}
			return runBuild(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// buildOptions is everything `llbuild build` was asked to do.
type buildOptions struct {
	Specs         []targets.Spec
	Inputs        *pipeline.Inputs
	AllowFloating bool
	Exec          executor.Options
	// Build is what build.Run is asked (the runtime image, JSON, where artifacts go); runBuild
	// adds where it reports.
	Build build.Options
}

// buildOptionsOf reads the flags; usage errors are found here, before anything is resolved.
func buildOptionsOf(c *cli.Context) (buildOptions, error) {
	if c.NArg() > 0 {
		return buildOptions{}, cmdutil.Usagef("%s takes no arguments, got %q", c.Command.Name, c.Args().Slice())
	}
	o := buildOptions{AllowFloating: c.Bool("allow-floating"), Build: build.Options{ImageOut: c.String("image-out"), Push: c.StringSlice("push"), JSON: c.Bool("json")}}
	var files []string
	if f := c.String("target-file"); f != "" {
		files = []string{f}
	}
	if o.Specs = targets.Specs(c.StringSlice("target"), files); len(o.Specs) == 0 {
		o.Specs = []targets.Spec{{Name: targets.Default}}
		cmdutil.Logger(c).Info("no --target given: building the default target", "target", targets.Default)
	}
	var err error
	if o.Exec, err = cmdutil.ExecutorOptionsOf(c); err != nil {
		return o, err
	}
	o.Build.Out, o.Build.Jobs, o.Build.RuntimeBase = o.Exec.Out, o.Exec.Jobs, o.Exec.Bases["runtime"]
	if err := o.Build.Check(len(o.Specs)); err != nil {
		return o, cmdutil.UsageOf(err)
	}
	if err := o.Exec.CheckDefaultOut(c.IsSet("out")); err != nil {
		return o, cmdutil.UsageOf(err)
	}
	if err := cmdutil.UsageOf(o.Exec.Check()); err != nil {
		return o, err
	}
	// last: it reads the source (a plain directory's tree hash is part of the plan)
	o.Inputs, err = cmdutil.ServerInputsOf(c, o.Exec.Source, false)
	return o, err
}

// runBuild resolves the plans and carries them out (build.Run): artifacts and, when asked, the
// runtime image; it prints one line per target (or the JSON array).
func runBuild(ctx context.Context, o buildOptions, s cmdutil.Streams) error {
	plans, err := o.Inputs.Resolve(o.Specs, pipeline.Options{AllowFloating: o.AllowFloating})
	if err != nil {
		return err
	}
	start := func() (pipeline.Executor, error) {
		return executor.New(o.Exec, cmdutil.ExecutorEnv(s, s.Term), o.Inputs.Series)
	}
	o.Build.Log, o.Build.Term, o.Build.Every = s.Log, s.Term, s.Every
	return build.Run(ctx, plans, start, o.Build, s.Stdout)
}
