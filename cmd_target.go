package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/cmdutil"
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
			&cli.StringFlag{Name: "output", Aliases: []string{"o", "out"}, Usage: "write to `FILE` instead of stdout"},
			&cli.BoolFlag{Name: "force", Usage: "with -o, replace an existing FILE"},
		},
		Action: func(c *cli.Context) error {
			name, output := c.String("name"), c.String("output")
			if !targets.ValidName(name) {
				return cmdutil.Usagef("--name %q: a target name is lower-case letters, digits and '-'", name)
			}
			if c.NArg() > 0 {
				return cmdutil.Usagef("target detect takes no arguments, got %q (--name NAME names the target)", c.Args().Slice())
			}
			if c.Bool("force") && output == "" {
				return cmdutil.Usagef("--force replaces the file -o names; give -o FILE with it")
			}
			if err := cmdutil.CheckOutputFile("-o", output, c.Bool("force"), nil); err != nil {
				return err
			}
			return runTargetDetect(c.Context, name, output, cmdutil.StreamsOf(c))
		},
	}
}

// runTargetDetect describes this host as a target file (targets.Detected), written to output or,
// for "", stdout; the warnings go to stderr.
func runTargetDetect(ctx context.Context, name, output string, s cmdutil.Streams) error {
	host, err := preflight.DetectHost(ctx)
	if err != nil {
		return fmt.Errorf("reading this host: %w", err)
	}
	data, warnings, err := targets.Detected(name, host)
	for _, w := range warnings {
		fmt.Fprintf(s.Stderr, "warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	if output == "" {
		_, err = s.Stdout.Write(data)
		return err
	}
	if err := atomicfile.WriteFile(output, data, 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintln(s.Stdout, output)
	return err
}

func targetsCommand() *cli.Command {
	return &cli.Command{
		Name:   "targets",
		Usage:  "list the built-in targets",
		Flags:  []cli.Flag{cmdutil.JSONFlag},
		Action: func(c *cli.Context) error { return targets.WriteList(cmdutil.Stdout(c), c.Bool("json")) },
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
				Flags:     []cli.Flag{cmdutil.TargetFileFlag},
				Action: func(c *cli.Context) error {
					if c.NArg() > 1 {
						return cmdutil.Usagef("target show takes one NAME")
					}
					// loadTarget's message names --target, which this command takes as an argument.
					if c.NArg() > 0 && c.String("target-file") != "" {
						return cmdutil.Usagef("give a target NAME or --target-file FILE, not both")
					}
					if c.NArg() == 0 && c.String("target-file") == "" {
						return cmdutil.Usagef("no target given: use llbuild target show NAME (one of %s) or llbuild target show --target-file FILE", strings.Join(targets.Names(), ", "))
					}
					t, err := cmdutil.LoadTarget(c.Args().First(), c.String("target-file"))
					if err != nil {
						return err
					}
					b, err := t.Marshal()
					if err != nil {
						return err
					}
					_, err = cmdutil.Stdout(c).Write(b)
					return err
				},
			},
			targetDetectCommand(),
		},
	}
}
