package main

import (
	"fmt"

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
