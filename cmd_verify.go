package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/manifest"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check a bundle directory or archive against its manifest",
		ArgsUsage: "DIR|ARCHIVE",
		Description: "Checks the manifest's schema and version, every file's size and sha256 (naming any tampered\n" +
			"file), that no path escapes the bundle (absolute paths, .., links leading out, devices), that\n" +
			"the GGUF headers parse and match the manifest, and that llama-server's arguments name only\n" +
			"files inside the bundle. An archive (.tar.zst, .tar.gz) is streamed once and nothing is\n" +
			"written, unless --extract DIR asks to unpack a sound one. Prints one line per problem (or\n" +
			"JSON with --json). Exit 0 when the bundle is sound, 1 when it is not, 2 on a usage error.",
		Flags: []cli.Flag{jsonFlag,
			&cli.StringFlag{Name: "extract", Usage: "unpack a sound ARCHIVE into `DIR` (checked again while unpacking, renamed into place); nothing is written for an unsound one"},
			&cli.BoolFlag{Name: "force", Usage: "with --extract, replace an existing DIR"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return usagef("verify takes one DIR or ARCHIVE")
			}
			target := c.Args().First()
			if c.NArg() > 1 {
				return usagef("verify takes one DIR or ARCHIVE, got also %q", c.Args().Tail())
			}
			fi, err := os.Stat(target)
			if err != nil {
				return usageError{err}
			}
			extract := c.String("extract")
			if extract != "" && fi.IsDir() {
				return usagef("--extract unpacks an archive; %s is a directory", target)
			}
			var problems []manifest.Problem
			if fi.IsDir() {
				problems = manifest.Verify(target)
			} else if problems, err = manifest.VerifyArchive(target); err != nil {
				return usageOf(err)
			}
			out := stdoutOf(c)
			if c.Bool("json") {
				if problems == nil {
					problems = []manifest.Problem{}
				}
				b, err := json.MarshalIndent(struct {
					Path     string             `json:"path"`
					OK       bool               `json:"ok"`
					Problems []manifest.Problem `json:"problems"`
				}{target, len(problems) == 0, problems}, "", "  ")
				if err != nil {
					return err
				}
				if _, err := out.Write(append(b, '\n')); err != nil {
					return err
				}
			} else {
				for _, p := range problems {
					fmt.Fprintln(out, p.String())
				}
			}
			if len(problems) > 0 {
				return cli.Exit(fmt.Sprintf("%s: %d problem(s)", target, len(problems)), exitFailed)
			}
			if extract != "" {
				if err := manifest.ExtractArchive(c.Context, target, extract, c.Bool("force")); err != nil {
					return usageOf(err)
				}
				loggerOf(c).Info("bundle extracted", "archive", target, "dir", extract)
			}
			if !c.Bool("json") {
				fmt.Fprintf(out, "%s: ok\n", target)
			}
			return nil
		},
	}
}
