package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/targets"
)

func targetDetectCommand() *cli.Command {
	return &cli.Command{
		Name:  "detect",
		Usage: "describe this machine as a target file (CPU features, NVIDIA and Intel GPUs, driver)",
		Description: "Reads CPUID (with the OS's AVX and AVX-512 state), nvidia-smi and sysfs PCI IDs and prints a\n" +
			"target file: every ggml ISA option set from the CPU's features, the GPU's one architecture,\n" +
			"and the newest pinned CUDA image the driver runs. Use it with --target-file.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "name", Value: "local", Usage: "target `NAME`"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` instead of stdout"},
		},
		Action: func(c *cli.Context) error {
			host, err := preflight.DetectHost(c.Context)
			if err != nil {
				return fmt.Errorf("reading this host: %w", err)
			}
			t, warnings := targets.FromHost(c.String("name"), host)
			for _, w := range warnings {
				fmt.Fprintf(stderrOf(c), "warning: %s\n", w)
			}
			data, err := t.Marshal()
			if err != nil {
				return err
			}
			if _, err := targets.Parse("detected", data); err != nil {
				fmt.Fprintf(stderrOf(c), "warning: the detected target needs editing before use:\n%v\n", err)
			}
			out := c.String("output")
			if out == "" {
				_, err = stdoutOf(c).Write(data)
				return err
			}
			if err := atomicfile.WriteFile(out, data, 0o644); err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdoutOf(c), out)
			return err
		},
	}
}

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

func featureList(fs []targets.Feature) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, " ")
}
