package main

import (
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/patches"
)

// seriesFlag replaces the built-in patch series with one of the user's: a series file in the
// built-in format ("<file>.patch sha256:<digest>" per line), the patches beside it. An empty
// file builds the recipe's commit as upstream has it.
var seriesFlag = &cli.StringFlag{Name: "series", Usage: "apply the patch series `FILE` (\"NAME.patch sha256:DIGEST\" lines, the patches beside it) instead of the built-in one; an empty file applies none"}

// seriesOf is the series --series names, or the built-in one.
func seriesOf(c *cli.Context) ([]patches.Patch, error) {
	file := c.String("series")
	if file == "" {
		return patches.Series()
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, usagef("--series %s: %v", file, err)
	}
	return patches.Load(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
}
