package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

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
			if c.NArg() > 0 {
				return usagef("%s takes no arguments, got %q", c.Command.Name, c.Args().Slice())
			}
			var names []string
			for _, t := range c.StringSlice("target") {
				for _, n := range strings.Split(t, ",") {
					if n = strings.TrimSpace(n); n != "" {
						names = append(names, n)
					}
				}
			}
			if c.String("target-file") != "" {
				names = append(names, "")
			}
			if len(names) == 0 {
				// The default target runs on any x86-64-v3 machine, so the main job works anywhere.
				names = []string{defaultTarget}
				loggerOf(c).Info("no --target given: building the default target", "target", defaultTarget)
			}
			eo, err := executorOptionsOf(c)
			if err != nil {
				return err
			}
			imaging := c.String("image-out") != "" || len(c.StringSlice("push")) > 0
			if imaging && len(names) > 1 {
				return usagef("--image-out and --push take one target, got %d", len(names))
			}
			if eo.Jobs < 1 {
				return usagef("--jobs must be at least 1")
			}
			in, err := serverInputsOf(c, eo.Source, false)
			if err != nil {
				return err
			}
			var specs []targetSpec
			for _, n := range names {
				if n == "" {
					specs = append(specs, targetSpec{file: c.String("target-file")})
				} else {
					specs = append(specs, targetSpec{name: n})
				}
			}
			plans, err := resolveServerPlans(specs, in, c.Bool("allow-floating"))
			if err != nil {
				return err
			}
			series := in.series
			var errs []error
			if src := eo.Source; src != "" && !c.IsSet("out") {
				if abs, _ := filepath.Abs(src); isWithin(eo.Out, abs) {
					return usagef("the default --out %s is inside the source %s: pass --out", eo.Out, abs)
				}
			}
			log := loggerOf(c)
			if err := eo.check(); err != nil {
				return err
			}
			// The runtime base is checked before anything builds: a wrong --base runtime (another
			// digest than the plan's) must not cost a whole build first.
			var runtimeBase v1.Image
			if imaging {
				if runtimeBase, err = image.LoadBase(c.Context, eo.Bases["runtime"], plans[0].Images.Runtime); err != nil {
					return fmt.Errorf("target %s: runtime base image, checked before building: %w", plans[0].Target, err)
				}
			}
			ex, err := newExecutor(c, eo, series, termOf(c))
			if err != nil {
				return err
			}

			results := pipeline.BuildAll(c.Context, ex, plans, eo.Out, eo.Jobs)
			if cl, ok := ex.(interface{ Close() error }); ok {
				if err := cl.Close(); err != nil {
					log.Warn("closing the engine session", "err", err)
				}
			}
			stdout := stdoutOf(c)
			type built struct {
				Target   string `json:"target"`
				PlanHash string `json:"planHash"`
				Dir      string `json:"dir,omitempty"`
				Image    string `json:"image,omitempty"`
				Error    string `json:"error,omitempty"`
			}
			var report []built
			for _, r := range results {
				b := built{Target: r.Plan.Target, PlanHash: r.Plan.Hash, Dir: r.Dir}
				if r.Err != nil {
					errs = append(errs, r.Err)
					b.Error = r.Err.Error()
					report = append(report, b)
					continue
				}
				if imaging {
					digest, err := image.Build(c.Context, r.Dir, runtimeBase, image.Output{
						File: c.String("image-out"), Push: c.StringSlice("push"),
						Log: loggerOf(c), Term: termOf(c), Every: plainProgressEvery,
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
				case c.Bool("json") || b.Error != "":
				case imaging:
					fmt.Fprintln(stdout, b.Image)
				default:
					fmt.Fprintln(stdout, b.Dir)
				}
			}
			if c.Bool("json") {
				if err := writeJSON(stdout, report); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
}
