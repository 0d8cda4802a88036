package main

import (
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/patches"
)

// seriesFlag chooses the patches a build carries: a named series (scoring, plain) or a series
// file of the user's in the built-in format ("<file>.patch sha256:<digest>" per line), the patches
// beside it. An empty file builds the commit as upstream has it.
var seriesFlag = &cli.StringFlag{Name: "series", Usage: "the patches to apply: `scoring` (the built-in series: upstream plus echo and prompt logprobs, the default), plain (upstream plus patch 0001, what a CUDA build needs) or a series FILE (\"NAME.patch sha256:DIGEST\" lines, the patches beside it; an empty file applies none)"}

// seriesOf is the series --series names, or the built-in one.
func seriesOf(c *cli.Context) ([]patches.Patch, error) { return seriesByName(c.String("series")) }

// seriesByName is the series name stands for: a named series (scoring, plain), a series file,
// or, for "", the built-in one.
func seriesByName(name string) ([]patches.Patch, error) {
	switch name {
	case "":
		return patches.Series()
	case patches.SeriesScoring, patches.SeriesPlain:
		return patches.Named(name)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, usagef("--series %s: neither a named series (scoring, plain) nor a file: %v", name, err)
	}
	s, err := patches.Load(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
	return s, usageOf(err)
}
