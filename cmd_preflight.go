package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/targets"
)

func preflightCommand() *cli.Command {
	return &cli.Command{
		Name:      "preflight",
		Usage:     "predict whether binaries, a bundle or an image will start on a host (SIGILL, driver cap, missing GPU kernels)",
		ArgsUsage: " ",
		Description: `Reads ELF files (from --binary, --bundle or an image's layers) and checks them against this
machine or a target: CPU instructions the host lacks (decoded from the executable sections; for
ggml's per-CPU libraries, the variant ggml's loader would pick), the image's NVIDIA_REQUIRE_CUDA
as nvidia-container-cli evaluates it, the CUDA runtime the binaries link, and whether each
NVIDIA GPU has a cubin or PTX for its compute capability.

Exit status: 0 every check passed (ok, or "dispatched at run time": instructions the CPU lacks
only in functions the file's ifunc resolvers choose by CPUID), 1 something would fail, 2
something could not be checked (or preflight was called wrongly).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "bundle", Usage: "bundle `DIR` (its bin/ and lib/ ELF files)"},
			&cli.StringSliceFlag{Name: "binary", Usage: "ELF `FILE` to check (repeatable; executables and shared libraries)"},
			&cli.StringFlag{Name: "image", Usage: "image `REF` in a registry"},
			&cli.StringFlag{Name: "image-archive", Usage: "`FILE` from docker save or llbuild build --image-out (an OCI archive), or an OCI layout directory"},
			&cli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "check against built-in target `NAME` instead of this machine"},
			&cli.StringFlag{Name: "target-file", Usage: "check against the host described in target `FILE`"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.BoolFlag{Name: "driver-only", Usage: "with --image or --image-archive: answer whether the host's driver runs the image from its config alone (NVIDIA_REQUIRE_CUDA), without fetching or reading its layers; the instruction, library and kernel checks are not made"},
		},
		Action: runPreflight,
	}
}

func runPreflight(c *cli.Context) error {
	ctx := c.Context
	log := loggerOf(c)
	bundle, bins := c.String("bundle"), c.StringSlice("binary")
	src := preflight.ImageSource{Ref: c.String("image"), Archive: c.String("image-archive")}
	if c.NArg() > 0 {
		return usagef("preflight takes no arguments (got %q); name files with --binary", c.Args().Slice())
	}
	if bundle == "" && len(bins) == 0 && src.Ref == "" && src.Archive == "" {
		return usagef("nothing to check: give --bundle, --binary, --image or --image-archive")
	}
	if src.Ref != "" && src.Archive != "" {
		return usagef("give --image or --image-archive, not both")
	}
	driverOnly := c.Bool("driver-only")
	if driverOnly && (src.Ref == "" && src.Archive == "" || bundle != "" || len(bins) > 0) {
		return usagef("--driver-only checks an image alone (--image or --image-archive): the driver question of a bundle or binaries needs their files")
	}

	var (
		host     targets.Host
		hostName string
	)
	if c.String("target") != "" || c.String("target-file") != "" {
		t, err := targets.ResolveHost(c.String("target"), c.String("target-file"))
		if err != nil {
			return usageError{err}
		}
		host, hostName = t.Host, "target "+t.Name
	} else {
		h, err := preflight.DetectHost(ctx)
		if err != nil {
			return cli.Exit(fmt.Sprintf("preflight: reading this machine: %v", err), exitUsage)
		}
		host, hostName = h, "this machine"
	}

	start := time.Now()
	var in preflight.Input
	var names []string
	if len(bins) > 0 {
		b, err := preflight.ReadFiles(ctx, bins)
		if err != nil {
			return cli.Exit("preflight: "+err.Error(), exitUsage)
		}
		in.Binaries = append(in.Binaries, b...)
		names = append(names, strings.Join(bins, " "))
	}
	if bundle != "" {
		b, err := preflight.ReadBundle(ctx, bundle)
		if err != nil {
			return cli.Exit("preflight: "+err.Error(), exitUsage)
		}
		in.Binaries = append(in.Binaries, b...)
		names = append(names, bundle)
	}
	if src.Ref != "" || src.Archive != "" {
		read := preflight.ReadImage
		if driverOnly {
			read = preflight.ReadImageConfig
		}
		img, err := read(ctx, src)
		if err != nil {
			return cli.Exit("preflight: "+err.Error(), exitUsage)
		}
		in.Binaries = append(in.Binaries, img.Binaries...)
		in.Env = img.Env
		in.Read = img.Read
		names = append(names, img.Name)
	}
	in.Name = strings.Join(names, " + ")
	log.Debug("preflight read inputs", "files", len(in.Binaries), "elapsed", time.Since(start))

	report := preflight.Check(host, hostName, in)
	out := stdoutOf(c)
	var err error
	if c.Bool("json") {
		err = report.WriteJSON(out)
	} else {
		err = report.WriteText(out)
	}
	if err != nil {
		return cli.Exit("preflight: writing the report: "+err.Error(), exitUsage)
	}
	if code := report.ExitCode(); code != 0 {
		return cli.Exit("", code)
	}
	return nil
}
