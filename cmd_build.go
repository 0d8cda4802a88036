package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/build"
	"github.com/llbuild/llbuild/pipeline/executor"
	"github.com/llbuild/llbuild/pipeline/image"
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
			&cli.StringFlag{Name: "image-out", Usage: "write the runtime image as an OCI archive to `FILE` (a directory path ending in / writes an OCI layout); an existing one is replaced only with --force"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing --image-out"},
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
	if c.IsSet("target") && len(targets.Specs(c.StringSlice("target"), nil)) == 0 {
		return o, cmdutil.Usagef("--target %q names no target: give one of %s, or leave --target out for the default (%s)", strings.Join(c.StringSlice("target"), ","), strings.Join(targets.Names(), ", "), targets.Default)
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
	if err := checkBuildOutputs(o, c.Bool("force")); err != nil {
		return o, err
	}
	if err := cmdutil.UsageOf(o.Exec.Check()); err != nil {
		return o, err
	}
	// last: it reads the source (a plain directory's tree hash is part of the plan)
	if o.Inputs, err = cmdutil.ServerInputsOf(c, o.Exec.Source, false); err != nil {
		return o, err
	}
	// a plain directory's tree is all of it, so artifacts written inside it would be read back
	// into the next build's source (a git repository's commit is not)
	if src := o.Inputs.PlainSource; src != "" {
		absSrc, _ := filepath.Abs(src)
		absOut, _ := filepath.Abs(o.Build.Out)
		if executor.Within(absOut, absSrc) {
			return o, cmdutil.Usagef("--out %s is inside the source %s, a plain directory: the next build would read these artifacts as source; give an --out outside it", o.Build.Out, src)
		}
	}
	return o, nil
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

// checkBuildOutputs refuses, before anything builds, outputs the build could only fail to write
// at its end, or that it would write over: --out that is not a directory, an --image-out whose
// directory is missing, that exists (without --force) or that is the runtime base it reads, and a
// --push that is no image reference.
func checkBuildOutputs(o buildOptions, force bool) error {
	if fi, err := os.Stat(o.Build.Out); err == nil && !fi.IsDir() {
		return cmdutil.Usagef("--out %s is a file; give a directory for the artifacts", o.Build.Out)
	}
	for _, ref := range o.Build.Push {
		if _, err := name.ParseReference(ref); err != nil {
			return cmdutil.Usagef("--push %q: %v; give REGISTRY/REPOSITORY:TAG", ref, err)
		}
	}
	out := o.Build.ImageOut
	if out == "" {
		return nil
	}
	if fi, err := os.Stat(out); strings.HasSuffix(out, "/") || err == nil && fi.IsDir() {
		return cmdutil.CheckOutputLayout("--image-out", out, force)
	}
	inputs := map[string]string{}
	for role, spec := range o.Exec.Bases {
		if p, ok := image.LocalPath(spec); ok {
			inputs["the --base "+role+" archive"] = p
		}
	}
	return cmdutil.CheckOutputFile("--image-out", out, force, inputs)
}
