package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
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
			targetFileFlag,
			floatingFlag,
			&cli.StringFlag{Name: "recipe", Value: "server", Usage: "a server recipe `FILE.yaml` instead of the built-in one (one that recipe bump --new-series recorded, with its --series)"},
			seriesFlag,
			refFlag,
			&cli.StringFlag{Name: "image-out", Usage: "write the runtime image as an OCI archive to `FILE` (a directory path ending in / writes an OCI layout)"},
			&cli.StringSliceFlag{Name: "push", Usage: "push the runtime image to `REF` (repeatable)"},
			jsonFlag,
		}, executorFlags("llama.cpp source `DIR`: a plain directory or a git repository/mirror holding the plan's commit (required for host)", "targets built at once")...),
		Action: func(c *cli.Context) error {
			o, err := buildOptionsOf(c)
			if err != nil {
				return err
			}
			return runBuild(c.Context, o, streamsOf(c))
		},
	}
}

// buildOptions is everything `llbuild build` was asked to do.
type buildOptions struct {
	Specs         []targetSpec
	Inputs        *serverInputs
	AllowFloating bool
	Exec          executorOptions
	// ImageOut and Push ask for the runtime image (one target only).
	ImageOut string
	Push     []string
	JSON     bool
}

func (o buildOptions) imaging() bool { return o.ImageOut != "" || len(o.Push) > 0 }

// buildOptionsOf reads the flags; usage errors are found here, before anything is resolved.
func buildOptionsOf(c *cli.Context) (buildOptions, error) {
	if c.NArg() > 0 {
		return buildOptions{}, usagef("%s takes no arguments, got %q", c.Command.Name, c.Args().Slice())
	}
	o := buildOptions{AllowFloating: c.Bool("allow-floating"), ImageOut: c.String("image-out"), Push: c.StringSlice("push"), JSON: c.Bool("json")}
	var files []string
	if f := c.String("target-file"); f != "" {
		files = []string{f}
	}
	o.Specs = targetSpecsOf(c.StringSlice("target"), files)
	if len(o.Specs) == 0 {
		// The default target runs on any x86-64-v3 machine, so the main job works anywhere.
		o.Specs = []targetSpec{{name: defaultTarget}}
		loggerOf(c).Info("no --target given: building the default target", "target", defaultTarget)
	}
	var err error
	if o.Exec, err = executorOptionsOf(c); err != nil {
		return o, err
	}
	if o.imaging() && len(o.Specs) > 1 {
		return o, usagef("--image-out and --push take one target, got %d", len(o.Specs))
	}
	if o.Exec.Jobs < 1 {
		return o, usagef("--jobs must be at least 1")
	}
	if src := o.Exec.Source; src != "" && !c.IsSet("out") {
		if abs, _ := filepath.Abs(src); isWithin(o.Exec.Out, abs) {
			return o, usagef("the default --out %s is inside the source %s: pass --out", o.Exec.Out, abs)
		}
	}
	if err := o.Exec.check(); err != nil {
		return o, err
	}
	// last: it reads the source (a plain directory's tree hash is part of the plan)
	if o.Inputs, err = serverInputsOf(c, o.Exec.Source, false); err != nil {
		return o, err
	}
	return o, nil
}

// runBuild resolves the plans, builds them and, with ImageOut or Push, the runtime image; it
// prints one line per target (or the JSON array).
func runBuild(ctx context.Context, o buildOptions, s streams) error {
	plans, err := resolveServerPlans(o.Specs, o.Inputs, o.AllowFloating)
	if err != nil {
		return err
	}
	log := s.Log
	// The runtime base is checked before anything builds: a wrong --base runtime (another
	// digest than the plan's) must not cost a whole build first.
	var runtimeBase v1.Image
	if o.imaging() {
		if runtimeBase, err = image.LoadBase(ctx, o.Exec.Bases["runtime"], plans[0].Images.Runtime); err != nil {
			return fmt.Errorf("target %s: runtime base image, checked before building: %w", plans[0].Target, err)
		}
	}
	ex, err := newExecutor(s, o.Exec, o.Inputs.series, s.Term)
	if err != nil {
		return err
	}
	results := pipeline.BuildAll(ctx, ex, plans, o.Exec.Out, o.Exec.Jobs)
	if cl, ok := ex.(interface{ Close() error }); ok {
		if err := cl.Close(); err != nil {
			log.Warn("closing the engine session", "err", err)
		}
	}
	stdout := s.Stdout
	type built struct {
		Target   string `json:"target"`
		PlanHash string `json:"planHash"`
		Dir      string `json:"dir,omitempty"`
		Image    string `json:"image,omitempty"`
		Error    string `json:"error,omitempty"`
	}
	var report []built
	var errs []error
	for _, r := range results {
		b := built{Target: r.Plan.Target, PlanHash: r.Plan.Hash, Dir: r.Dir}
		if r.Err != nil {
			errs = append(errs, r.Err)
			b.Error = r.Err.Error()
			report = append(report, b)
			continue
		}
		if o.imaging() {
			digest, err := image.Build(ctx, r.Dir, runtimeBase, image.Output{
				File: o.ImageOut, Push: o.Push, Log: log, Term: s.Term, Every: plainProgressEvery,
			})
			if err != nil {
				err = fmt.Errorf("target %s: image: %w", r.Plan.Target, err)
				errs = append(errs, err)
				b.Error = err.Error()
			}
			b.Image = digest
		}
		report = append(report, b)
		switch {
		case o.JSON || b.Error != "":
		case o.imaging():
			fmt.Fprintln(stdout, b.Image)
		default:
			fmt.Fprintln(stdout, b.Dir)
		}
	}
	if o.JSON {
		if err := writeJSON(stdout, report); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
