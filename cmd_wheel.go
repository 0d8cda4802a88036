package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/executor"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
	"github.com/llbuild/llbuild/wheel"
)

func wheelCommand() *cli.Command {
	return &cli.Command{
		Name:  "wheel",
		Usage: "build the llama-cpp-python wheel for a target, its vendored llama.cpp replaced by the server's",
		Description: "Resolves the wheel recipe for the target (see llbuild plan --recipe wheel): CMAKE_ARGS carry the\n" +
			"target's ISA flags (GGML_NATIVE=OFF, every flag explicit) and CUDA architectures or SYCL device;\n" +
			"vendor/llama.cpp is replaced by the server recipe's llama.cpp commit with the patch series. The\n" +
			"package's ctypes bindings are checked against the vendored headers first. The version gets a\n" +
			"local label saying what the wheel is for (0.3.34+cu131.sm86.avx2, 0.3.34+cpu.avx2), and the\n" +
			"built wheel is refused when preflight finds its libraries would not run on the target, when its\n" +
			"CUDA kernels are not exactly the requested architectures, or when it contains libcuda.\n" +
			"--arch without --target picks the built-in CUDA target that builds exactly those architectures\n" +
			"(86: rtx3090, 90: h200, 120: olares-one); with --target it replaces the target's architectures,\n" +
			"which must still run on the target's GPUs and be compiled by its CUDA toolkit. Neither: cpu-v3.\n" +
			"The dagger executor builds in the target's devel image (python-build and scikit-build-core are\n" +
			"installed there, pinned); the host executor uses this machine's compilers and a Python that can\n" +
			"import build and the package's build backend (the build runs with --no-isolation).\n" +
			"stdout: the path of the wheel in its artifact directory. Exit status: 0 built, 1 the build\n" +
			"failed or was refused, 2 usage.",
		Flags: append([]cli.Flag{
			cmdutil.TargetFlag, cmdutil.TargetFileFlag,
			&cli.StringSliceFlag{Name: "arch", Usage: "CUDA `ARCH`itectures (86, 90, 120), comma-separated or repeated"},
			&cli.StringFlag{Name: "llama-source", Usage: "llama.cpp source `DIR` for vendor/llama.cpp: a plain directory or a git repository/mirror holding the server recipe's commit (required for host)"},
			&cli.StringFlag{Name: "commit", Usage: "build llama-cpp-python at this full `COMMIT` instead of the recipe's pin (plan and provenance record it)"},
			&cli.StringFlag{Name: "python", Usage: "Python `VERSION` that runs the build (3.12: python3.12); default python3"},
			&cli.IntFlag{Name: "build-jobs", Usage: "parallel compile jobs (CMAKE_BUILD_PARALLEL_LEVEL); 0 leaves the default"},
			cmdutil.FloatingFlag,
			&cli.BoolFlag{Name: "print-plan", Usage: "print the wheel plan as JSON and build nothing"},
		}, cmdutil.ExecutorFlags("llama-cpp-python source `DIR`: a plain directory or a git repository/mirror holding the recipe's commit (required for host; dagger fetches the recipe's URL without it)", "")...),
		Action: func(c *cli.Context) error {
			o, err := wheelOptionsOf(c)
			if err != nil {
				return err
			}
			return runWheel(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// wheelOptions is everything `llbuild wheel` was asked to do.
type wheelOptions struct {
	Plan      *pipeline.WheelPlan
	PrintPlan bool
	Exec      executor.Options
	Series    []patches.Patch
	// LlamaSource is the llama.cpp source vendored into the package; BuildJobs the build's
	// parallelism (0: the default).
	LlamaSource string
	BuildJobs   int
}

// wheelOptionsOf reads the flags and resolves the wheel plan; usage errors are found here.
func wheelOptionsOf(c *cli.Context) (wheelOptions, error) {
	var o wheelOptions
	if c.NArg() > 0 {
		return o, cmdutil.Usagef("wheel takes no arguments, got %q", c.Args().Slice())
	}
	name, file, archs := c.String("target"), c.String("target-file"), wheel.Architectures(c.StringSlice("arch"))
	if n := c.Int("build-jobs"); n < 0 {
		return o, cmdutil.Usagef("--build-jobs %d: give a number of jobs, or 0 for the default", n)
	}
	if c.IsSet("target") && strings.TrimSpace(name) == "" {
		return o, cmdutil.Usagef("--target %q names no target: give one of %s, or leave --target out for the default (%s)", name, strings.Join(targets.Names(), ", "), targets.Default)
	}
	if name == "" && file == "" && len(archs) == 0 {
		name = targets.Default
	}
	t, err := wheel.Target(name, file, archs, cmdutil.LoadTarget)
	if err != nil {
		return o, cmdutil.UsageOf(err)
	}
	if c.IsSet("commit") {
		if err := recipes.ValidateCommit(c.String("commit")); err != nil {
			return o, cmdutil.Usagef("--commit: %v", err)
		}
	}
	if c.IsSet("python") && !wheel.IsPythonVersion(c.String("python")) {
		return o, cmdutil.Usagef("--python %q: want a version such as 3.12", c.String("python"))
	}
	if o.Plan, err = pipeline.ResolveBuiltinWheel(t, pipeline.WheelOptions{Options: pipeline.Options{AllowFloating: c.Bool("allow-floating")}, Python: c.String("python"), Commit: c.String("commit")}); err != nil {
		return o, err
	}
	if o.PrintPlan = c.Bool("print-plan"); o.PrintPlan {
		return o, nil
	}
	if o.Exec, err = cmdutil.ExecutorOptionsOf(c); err != nil {
		return o, err
	}
	o.LlamaSource, o.BuildJobs = c.String("llama-source"), c.Int("build-jobs")
	setup := wheel.Setup{Executor: o.Exec.Executor, Engine: o.Exec.Engine, Bases: o.Exec.Bases, Package: o.Exec.Source, Llama: o.LlamaSource,
		Out: o.Exec.Out, OutDefault: !c.IsSet("out")}
	if err := setup.Validate(); err != nil {
		return o, cmdutil.UsageOf(err)
	}
	o.Series, err = patches.Series()
	return o, err
}

// runWheel prints the plan, or builds the wheel and prints its path.
func runWheel(ctx context.Context, o wheelOptions, s cmdutil.Streams) error {
	if o.PrintPlan {
		_, err := s.Stdout.Write(o.Plan.JSON())
		return err
	}
	ex, err := executor.NewWheel(o.Exec, cmdutil.ExecutorEnv(s, nil), o.Series, o.LlamaSource, o.BuildJobs)
	if err != nil {
		return err
	}
	whl, err := wheel.Build(ctx, ex, o.Plan, o.Exec.Out)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Stdout, whl)
	return nil
}

func indexCommand() *cli.Command {
	return &cli.Command{
		Name:      "index",
		Usage:     "write a PEP 503 pip index of built wheels, one per variant (cu131, cpu, ...)",
		ArgsUsage: "ARTIFACTS...",
		Description: "Finds the wheels in the artifact directories under each ARTIFACTS (an --out directory of\n" +
			"llbuild wheel, or one artifact directory), checks them against their artifacts.json digests and\n" +
			"writes DIR/<variant>/simple/, the variant being the first part of the wheel's local version label.\n" +
			"Serve DIR over HTTP and install with pip install --extra-index-url http://HOST/cu131/simple\n" +
			"llama-cpp-python. The index is written beside DIR and renamed into place.\n" +
			"stdout: one line per variant, its simple/ directory and the number of wheels.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o", "out"}, Usage: "index `DIR` (replaced whole; refused if it exists and is not an llbuild index); may follow ARTIFACTS"},
		},
		Action: func(c *cli.Context) error {
			roots, output := c.Args().Slice(), c.String("output")
			if len(roots) == 0 {
				return cmdutil.Usagef("index needs at least one ARTIFACTS directory")
			}
			if output == "" {
				return cmdutil.Usagef("index needs -o DIR, the directory to write the index to")
			}
			return cmdutil.UsageOf(wheel.Index(c.Context, roots, output, cmdutil.Stdout(c)))
		},
	}
}
