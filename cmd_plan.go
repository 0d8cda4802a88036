package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/daggerexec"
	"github.com/llbuild/llbuild/recipes"
)

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

// resolvePlanWith is resolvePlan with a patch series of the caller's (--series).
func resolvePlanWith(target, targetFile, recipe string, allowFloating bool, series []patches.Patch) (*pipeline.Plan, error) {
	t, err := loadTarget(target, targetFile)
	if err != nil {
		return nil, err
	}
	p, err := pipeline.ResolveRecipe(t, recipe, series, pipeline.Options{AllowFloating: allowFloating})
	return p, usageOf(err)
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
