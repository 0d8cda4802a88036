package main

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/jsonout"
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
		Flags: []cli.Flag{cmdutil.JSONFlag,
			&cli.StringFlag{Name: "extract", Usage: "unpack a sound ARCHIVE into `DIR` (checked again while unpacking, renamed into place); nothing is written for an unsound one"},
			&cli.BoolFlag{Name: "force", Usage: "with --extract, replace an existing DIR"},
		},
		Action: func(c *cli.Context) error {
			o, err := verifyOptionsOf(c)
			if err != nil {
				return err
			}
			return runVerify(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// verifyOptions is the bundle to verify (a directory or an archive), how to report, and where
// to unpack an archive that verifies ("" not to).
type verifyOptions struct {
	Path    string
	IsDir   bool
	JSON    bool
	Extract string
	Force   bool
}

func verifyOptionsOf(c *cli.Context) (verifyOptions, error) {
	o := verifyOptions{Path: c.Args().First(), JSON: c.Bool("json"), Extract: c.String("extract"), Force: c.Bool("force")}
	if c.NArg() < 1 {
		return o, cmdutil.Usagef("verify takes one DIR or ARCHIVE")
	}
	if c.NArg() > 1 {
		return o, cmdutil.Usagef("verify takes one DIR or ARCHIVE, got also %q", c.Args().Tail())
	}
	if o.Force && o.Extract == "" {
		return o, cmdutil.Usagef("--force replaces the directory --extract names; give --extract DIR with it")
	}
	fi, err := os.Stat(o.Path)
	if err != nil {
		return o, cmdutil.Usage(err)
	}
	o.IsDir = fi.IsDir()
	if o.Extract != "" && o.IsDir {
		return o, cmdutil.Usagef("--extract unpacks an archive; %s is a directory", o.Path)
	}
	return o, nil
}

// runVerify checks every file of the bundle against its manifest and writes the problems (or
// one JSON object); an archive that verifies is unpacked where o.Extract says.
func runVerify(ctx context.Context, o verifyOptions, s cmdutil.Streams) error {
	log, out := s.Log, s.Stdout
	v, err := manifest.VerifyPath(o.Path, o.IsDir)
	if err != nil {
		return cmdutil.UsageOf(err)
	}
	if o.JSON {
		err = jsonout.Write(out, v)
	} else {
		err = v.WriteProblems(out)
	}
	if err != nil {
		return err
	}
	if !v.OK {
		return cli.Exit(fmt.Sprintf("%s: %d problem(s)", o.Path, len(v.Problems)), cmdutil.ExitFailed)
	}
	if o.Extract != "" {
		if err := manifest.ExtractArchive(ctx, o.Path, o.Extract, o.Force); err != nil {
			return cmdutil.UsageOf(err)
		}
		log.Info("bundle extracted", "archive", o.Path, "dir", o.Extract)
	}
	if !o.JSON {
		fmt.Fprintf(out, "%s: ok\n", o.Path)
	}
	return nil
}
