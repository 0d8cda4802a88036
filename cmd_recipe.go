package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

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
				"series' digests; with --drop-upstream removes the patches already upstream at the commit.\n" +
				"Refuses, changing nothing, when a patch that stays does not apply. Changes files only; never commits.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "commit", Usage: "llama.cpp `COMMIT` to move to (any revision the repository knows)", Required: true},
				sourceRepoFlag,
				&cli.BoolFlag{Name: "drop-upstream", Usage: "remove from the series the patches already upstream at the commit"},
				&cli.StringFlag{Name: "recipe-file", Value: filepath.Join("recipes", "server.yaml"), Usage: "recipe `FILE` to rewrite"},
				&cli.StringFlag{Name: "series", Value: filepath.Join("patches", "series"), Usage: "patch series `FILE` to rewrite, the patches beside it"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return usagef("recipe bump takes no arguments, got %q", c.Args().Slice())
				}
				res, err := recipes.Bump(c.Context, recipes.BumpOptions{
					RecipeFile:   c.String("recipe-file"),
					SeriesFile:   c.String("series"),
					Source:       c.String("source"),
					Commit:       c.String("commit"),
					DropUpstream: c.Bool("drop-upstream"),
				})
				if err != nil {
					return noCommitIsUsage(err)
				}
				log := loggerOf(c)
				for _, d := range res.Dropped {
					log.Info("dropped from the series: already upstream; git rm the file when you commit", "patch", d, "commit", res.Status.Commit)
				}
				if len(res.Written) == 0 {
					log.Info("the recipe is already at the commit and the series is current", "commit", res.Status.Commit)
				}
				for _, f := range res.Written {
					if _, err := fmt.Fprintln(stdoutOf(c), f); err != nil {
						return err
					}
				}
				return nil
			},
		}},
	}
}
