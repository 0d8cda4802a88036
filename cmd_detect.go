package main

import (
	"github.com/urfave/cli/v2"
)

func targetDetectCommand() *cli.Command {
	return &cli.Command{
		Name:  "detect",
		Usage: "describe this machine as a target file (CPU features, NVIDIA and Intel GPUs, driver)",
		Action: func(c *cli.Context) error {
			return cli.Exit("target detect: host detection is not built yet", exitFailed)
		},
	}
}
