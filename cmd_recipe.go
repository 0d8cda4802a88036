package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
)

func recipeCommand() *cli.Command {
	return &cli.Command{
		Name:  "recipe",
		Usage: "change a recipe in llbuild's working tree",
		Subcommands: []*cli.Command{{
			Name:  "bump",
			Usage: "move the recipe's llama.cpp pin to another commit, the patch series with it",
			Description: "Writes the commit, its committer time and build number into the recipe and refreshes the\n" +
				"series' digests; with --drop-upstream removes the patches already upstream at the commit. With\n" +
				"--new-series the refreshed patches replace the series', and the old series with its recipe is\n" +
				"recorded (build it with --recipe DIR/server.yaml --series DIR/series). Refuses, changing\n" +
				"nothing, when a patch that stays does not apply. Changes files only; never commits.\n" +
				"stdout: the files written, then the record directory.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "commit", Usage: "llama.cpp `COMMIT` to move to (any revision the repository knows)", Required: true},
				cmdutil.SourceRepoFlag,
				&cli.BoolFlag{Name: "drop-upstream", Usage: "remove from the series the patches already upstream at the commit"},
				&cli.StringFlag{Name: "recipe-file", Value: filepath.Join("recipes", "server.yaml"), Usage: "recipe `FILE` to rewrite"},
				&cli.StringFlag{Name: "series", Value: filepath.Join("patches", "series"), Usage: "patch series `FILE` to rewrite, the patches beside it"},
				&cli.StringFlag{Name: "new-series", Usage: "series `FILE` of patches refreshed for the commit (the patches beside it): they replace the series' patches, and the old series is recorded (--record)"},
				&cli.StringFlag{Name: "record", Usage: "with --new-series: `DIR` to record the old series, its patches and the old recipe in (default: the series' directory/<old commit>, e.g. patches/1425386fd)"},
				&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "bump a copy of the built-in recipe and series in `DIR` (created; it must not exist) instead of llbuild's working tree: build it with --recipe DIR/server.yaml --series DIR/series, no rebuild of llbuild needed"},
			},
			Action: func(c *cli.Context) error {
				o, err := recipeBumpOptionsOf(c)
				if err != nil {
					return err
				}
				return runRecipeBump(c.Context, o, cmdutil.StreamsOf(c))
			},
		}},
	}
}

// recipeBumpOptions is recipes.Bump's options and, with --out, the directory the built-in recipe
// and series are copied into first (removed again if the bump fails).
type recipeBumpOptions struct {
	recipes.BumpOptions
	Out string
}

func recipeBumpOptionsOf(c *cli.Context) (recipeBumpOptions, error) {
	o := recipeBumpOptions{Out: c.String("out"), BumpOptions: recipes.BumpOptions{
		RecipeFile:   c.String("recipe-file"),
		SeriesFile:   c.String("series"),
		Source:       c.String("source"),
		Commit:       c.String("commit"),
		DropUpstream: c.Bool("drop-upstream"),
		NewSeries:    c.String("new-series"),
		Record:       c.String("record"),
	}}
	if c.NArg() > 0 {
		return o, cmdutil.Usagef("recipe bump takes no arguments, got %q", c.Args().Slice())
	}
	if o.Record != "" && o.NewSeries == "" {
		return o, cmdutil.Usagef("--record is where --new-series records the old series; give --new-series FILE with it")
	}
	if o.Out != "" && (c.IsSet("recipe-file") || c.IsSet("series")) {
		return o, cmdutil.Usagef("--out copies the built-in recipe and series; give it without --recipe-file and --series")
	}
	if _, err := os.Stat(o.Out); err == nil && o.Out != "" {
		return o, cmdutil.Usagef("--out %s exists: give a new directory (recipe bump --out never overwrites)", o.Out)
	}
	return o, nil
}

// runRecipeBump moves the recipe and series (a copy of the built-in ones with o.Out) and prints
// each file it wrote.
func runRecipeBump(ctx context.Context, o recipeBumpOptions, s cmdutil.Streams) error {
	log, stdout := s.Log, s.Stdout
	var res *recipes.BumpResult
	var err error
	if o.Out != "" {
		res, err = recipes.BumpCopy(ctx, o.Out, o.BumpOptions)
	} else {
		res, err = recipes.Bump(ctx, o.BumpOptions)
	}
	if err != nil {
		if errors.Is(err, patches.ErrNoCommit) {
			return cmdutil.Usage(err)
		}
		return err
	}
	res.Log(log)
	return res.WriteFiles(stdout)
}
