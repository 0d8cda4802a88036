package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
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
		Action: func(c *cli.Context) error {
			o, err := preflightOptionsOf(c)
			if err != nil {
				return err
			}
			return runPreflight(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// preflightOptions is what preflight checks and against which host (the target named, or this
// machine when none is).
type preflightOptions struct {
	preflight.Sources
	Target, TargetFile string
	JSON               bool
}

func preflightOptionsOf(c *cli.Context) (preflightOptions, error) {
	o := preflightOptions{
		Sources: preflight.Sources{Bundle: c.String("bundle"), Binaries: c.StringSlice("binary"), DriverOnly: c.Bool("driver-only"),
			Image: preflight.ImageSource{Ref: c.String("image"), Archive: c.String("image-archive"), Log: cmdutil.Logger(c)}},
		Target: c.String("target"), TargetFile: c.String("target-file"), JSON: c.Bool("json"),
	}
	switch {
	case c.NArg() > 0:
		return o, cmdutil.Usagef("preflight takes no arguments (got %q); name files with --binary", c.Args().Slice())
	case o.Bundle == "" && len(o.Binaries) == 0 && !o.HasImage():
		return o, cmdutil.Usagef("nothing to check: give --bundle, --binary, --image or --image-archive")
	case o.Image.Ref != "" && o.Image.Archive != "":
		return o, cmdutil.Usagef("give --image or --image-archive, not both")
	case o.DriverOnly && (!o.HasImage() || o.Bundle != "" || len(o.Binaries) > 0):
		return o, cmdutil.Usagef("--driver-only checks an image alone (--image or --image-archive): the driver question of a bundle or binaries needs their files")
	}
	return o, nil
}

// runPreflight reads what o names, checks it against the host and writes the report; its exit
// status is the report's.
func runPreflight(ctx context.Context, o preflightOptions, s cmdutil.Streams) error {
	log, stdout := s.Log, s.Stdout
	host, hostName := targets.Host{}, "this machine"
	if o.Target != "" || o.TargetFile != "" {
		t, err := targets.ResolveHost(o.Target, o.TargetFile)
		if err != nil {
			return cmdutil.Usage(err)
		}
		host, hostName = t.Host, "target "+t.Name
	} else if h, err := preflight.DetectHost(ctx); err != nil {
		return cli.Exit(fmt.Sprintf("preflight: reading this machine: %v", err), cmdutil.ExitUsage)
	} else {
		host = h
	}
	start := time.Now()
	in, err := preflight.ReadSources(ctx, o.Sources)
	var missing *preflight.MissingFileError
	if errors.As(err, &missing) {
		return cli.Exit("preflight: "+err.Error(), 1) // would fail
	}
	if err != nil {
		return cli.Exit("preflight: "+err.Error(), cmdutil.ExitUsage)
	}
	log.Debug("preflight read inputs", "files", len(in.Binaries), "elapsed", time.Since(start))

	report := preflight.Check(host, hostName, in)
	if o.JSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return cli.Exit("preflight: writing the report: "+err.Error(), cmdutil.ExitUsage)
	}
	if code := report.ExitCode(); code != 0 {
		return cli.Exit("", code)
	}
	return nil
}
