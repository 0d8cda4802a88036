package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/daggerexec"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

var (
	targetFlag     = &cli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME` (see llbuild targets)"}
	targetFileFlag = &cli.StringFlag{Name: "target-file", Usage: "target `FILE` describing your own host (llbuild target detect writes one)"}
	jsonFlag       = &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	floatingFlag   = &cli.BoolFlag{Name: "allow-floating", Usage: "accept unpinned inputs: base images given by tag without a digest, apt packages without pinned versions (the build is then not reproducible)"}
	recipeFlag     = &cli.StringFlag{Name: "recipe", Value: "server", Usage: "recipe `NAME`: server or wheel, or a recipe FILE.yaml (one recipe bump --new-series recorded)"}
)

func targetsCommand() *cli.Command {
	return &cli.Command{
		Name:  "targets",
		Usage: "list the built-in targets",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			var all []*targets.Target
			for _, n := range targets.Names() {
				t, err := targets.Load(n)
				if err != nil {
					return err
				}
				all = append(all, t)
			}
			out := stdoutOf(c)
			if c.Bool("json") {
				return writeJSON(out, all)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKEND\tGPU\tDRIVER\tCPU FEATURES")
			for _, t := range all {
				gpu, drv := "-", "-"
				if len(t.Host.GPUs) > 0 {
					g := t.Host.GPUs[0]
					gpu = g.Name
					switch {
					case t.Build.CUDA != nil:
						gpu += " (sm_" + strings.Join(t.Build.CUDA.Architectures, ",") + ")"
					case t.Build.SYCL != nil:
						gpu += " (" + t.Build.SYCL.DeviceArch + ")"
					}
				}
				if t.Host.Driver.Version != "" {
					drv = t.Host.Driver.Version + " (CUDA " + t.Host.Driver.CUDA + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Build.Backend, gpu, drv, featureList(t.Host.CPU.Features))
			}
			return tw.Flush()
		},
	}
}

func featureList(fs []targets.Feature) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, " ")
}

func targetCommand() *cli.Command {
	return &cli.Command{
		Name:  "target",
		Usage: "show a target, or describe this machine as one",
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "print a target file",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{targetFileFlag},
				Action: func(c *cli.Context) error {
					if c.NArg() > 1 {
						return usagef("target show takes one NAME")
					}
					// loadTarget's message names --target, which this command takes as an argument.
					if c.NArg() == 0 && c.String("target-file") == "" {
						return usagef("no target given: use llbuild target show NAME (one of %s) or llbuild target show --target-file FILE", strings.Join(targets.Names(), ", "))
					}
					t, err := loadTarget(c.Args().First(), c.String("target-file"))
					if err != nil {
						return err
					}
					b, err := t.Marshal()
					if err != nil {
						return err
					}
					_, err = stdoutOf(c).Write(b)
					return err
				},
			},
			targetDetectCommand(),
		},
	}
}

func recipesCommand() *cli.Command {
	return &cli.Command{
		Name:  "recipes",
		Usage: "list the built-in recipes",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			var all []*recipes.Recipe
			for _, n := range recipes.Names() {
				r, err := recipes.Load(n)
				if err != nil {
					return err
				}
				all = append(all, r)
			}
			out := stdoutOf(c)
			if c.Bool("json") {
				return writeJSON(out, all)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tCOMMIT\tBUILDS")
			for _, r := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Source.URL, r.Source.Commit, strings.Join(r.BuildTargets, ","))
			}
			return tw.Flush()
		},
	}
}

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "resolve a target and a recipe into the full build plan, without building",
		Description: "Prints exactly what `llbuild build` will do: base images with digests, apt packages with\n" +
			"versions and the archive snapshot, source and commit, patches with digests, CMake arguments\n" +
			"in order, environment, build targets, outputs and image labels. The same inputs print the same bytes.",
		Flags: []cli.Flag{targetFlag, targetFileFlag, recipeFlag, jsonFlag, floatingFlag, seriesFlag, refFlag,
			&cli.StringFlag{Name: "source", Usage: "the llama.cpp source `DIR` the build will read, as build takes it: a git repository or mirror (--ref is resolved in it; without one its commits are fetched from the recipe's source URL), or a plain directory, whose tree hash is part of the plan"},
			&cli.BoolFlag{Name: "check-pins", Usage: "ask apt, in the devel image through the Dagger engine (it must reach the archive snapshot), whether the snapshot has every pinned apt version; exits 1 when one is missing"},
			&cli.StringFlag{Name: "engine", Usage: "with --check-pins: Dagger runner host `URL` of a running engine"},
			&cli.StringSliceFlag{Name: "base", Usage: "with --check-pins: the devel image to ask in, `devel=REF` (an image reference, oci-archive:PATH or oci-layout:PATH)"},
		},
		Subcommands: []*cli.Command{planDiffCommand()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("plan takes no arguments, got %q", c.Args().Slice())
			}
			out := stdoutOf(c)
			if c.String("recipe") == "wheel" {
				if c.IsSet("series") || c.IsSet("ref") {
					return usagef("--series and --ref apply to the server recipe; the wheel plan vendors the server recipe's built-in series and pin")
				}
				return printWheelPlan(c, out)
			}
			in, err := serverInputsOf(c, c.String("source"), true)
			if err != nil {
				return err
			}
			plans, err := resolveServerPlans([]targetSpec{{c.String("target"), c.String("target-file")}}, in, c.Bool("allow-floating"))
			if err != nil {
				return err
			}
			p := plans[0]
			if c.Bool("check-pins") {
				return checkPins(c, p)
			} else if c.IsSet("engine") || c.IsSet("base") {
				return usagef("--engine and --base apply to --check-pins")
			}
			if c.Bool("json") {
				_, err := out.Write(p.JSON())
				return err
			}
			return p.WriteText(out)
		},
	}
}

// loadTarget resolves --target/--target-file; a missing one is a usage error.
func loadTarget(name, file string) (*targets.Target, error) {
	if name == "" && file == "" {
		return nil, usagef("no target given: use --target (one of %s) or --target-file", strings.Join(targets.Names(), ", "))
	}
	if name != "" && file != "" {
		return nil, usagef("give --target or --target-file, not both")
	}
	t, err := targets.Resolve(name, file)
	if errors.Is(err, targets.ErrUnknownTarget) || errors.Is(err, fs.ErrNotExist) {
		return nil, usageError{err}
	}
	return t, err
}

// resolvePlan loads everything a plan needs and resolves it.
func resolvePlan(target, targetFile, recipe string, allowFloating bool) (*pipeline.Plan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return resolvePlanWith(target, targetFile, recipe, allowFloating, series)
}

// resolvePlanWith is resolvePlan with a patch series of the caller's (--series).
func resolvePlanWith(target, targetFile, recipe string, allowFloating bool, series []patches.Patch) (*pipeline.Plan, error) {
	t, err := loadTarget(target, targetFile)
	if err != nil {
		return nil, err
	}
	p, err := pipeline.ResolveRecipe(t, recipe, series, pipeline.Options{AllowFloating: allowFloating})
	return p, usageOf(err)
}

// resolveWheelPlan resolves the built-in wheel recipe for t.
func resolveWheelPlan(t *targets.Target, python, commit string, allowFloating bool) (*pipeline.WheelPlan, error) {
	series, err := patches.Series()
	if err != nil {
		return nil, err
	}
	return pipeline.ResolveWheelRecipe(t, series, pipeline.WheelOptions{Options: pipeline.Options{AllowFloating: allowFloating}, Python: python, Commit: commit})
}

// defaultTarget is what `llbuild build` builds when no target is named.
const defaultTarget = "cpu-v3"

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// printWheelPlan prints the wheel recipe the way a wheel build carries it out: CMake's
// arguments go into CMAKE_ARGS of a Python build rather than to cmake directly.
func printWheelPlan(c *cli.Context, out io.Writer) error {
	t, err := loadTarget(c.String("target"), c.String("target-file"))
	if err != nil {
		return err
	}
	w, err := resolveWheelPlan(t, "", "", c.Bool("allow-floating"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		_, err := out.Write(w.JSON())
		return err
	}
	if err := w.Plan.WriteText(out); err != nil {
		return err
	}
	fmt.Fprintf(out, "wheel:         python -m build --wheel --no-isolation (%s), vendor/llama.cpp replaced by %s @ %s\n", w.Interpreter(), w.Plan.Vendor.URL, w.Plan.Vendor.Commit)
	fmt.Fprintf(out, "CMAKE_ARGS:    %s\n", w.CMakeArgsEnv(pipeline.SourceDirToken))
	fmt.Fprintf(out, "version label: +%s (index %s)\n", w.LocalVersion, w.Variant)
	_, err = fmt.Fprintf(out, "wheel plan:    %s\n", w.ShortHash())
	return err
}

// checkPins asks apt in the plan's devel image whether the plan's snapshot has every pinned
// version, prints one line per pin, and fails when one is missing.
func checkPins(c *cli.Context, p *pipeline.Plan) error {
	if p.Apt == nil || len(p.Apt.Packages) == 0 {
		return usagef("target %s, recipe %s: the plan installs no apt packages, so there are no pins to check", p.Target, p.Recipe)
	}
	if len(p.Apt.Sources) == 0 {
		return usagef("target %s: the plan's apt packages are not pinned to a snapshot (%s), so there is nothing to check", p.Target, strings.Join(p.Apt.Unpinned(), ", "))
	}
	bases, err := parseBases(c.StringSlice("base"))
	if err != nil {
		return err
	}
	if _, ok := bases["runtime"]; ok {
		return usagef("--check-pins asks in the devel image: give --base devel=REF")
	}
	ex, err := daggerexec.New(daggerexec.Options{Engine: c.String("engine"), Devel: bases["devel"], Logger: loggerOf(c), LogOutput: engineLogOf(c)})
	if err != nil {
		return err
	}
	defer ex.Close()
	checks, err := ex.CheckAptPins(c.Context, p)
	if err != nil {
		return err
	}
	out := stdoutOf(c)
	var missing []string
	for _, ch := range checks {
		if ch.OK {
			fmt.Fprintf(out, "ok       %s %s\n", ch.Name, ch.Version)
			continue
		}
		has := "no version of it"
		if len(ch.Available) > 0 {
			has = strings.Join(ch.Available, " ")
		}
		fmt.Fprintf(out, "missing  %s %s (the snapshot has %s)\n", ch.Name, ch.Version, has)
		missing = append(missing, ch.Name+" "+ch.Version)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the apt snapshot %s lacks %s: pin versions it has in recipes/apt/%s.yaml", p.Apt.Snapshot, strings.Join(missing, ", "), p.Apt.Distro)
	}
	return nil
}
