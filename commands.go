package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// commands lists llbuild's subcommands in the order help shows them.
func commands() []*cli.Command {
	return []*cli.Command{
		targetsCommand(),
		targetCommand(),
		recipesCommand(),
		planCommand(),
		patchesCommand(),
		recipeCommand(),
		preflightCommand(),
		bundleCommand(),
		verifyCommand(),
		serveCommand(),
		benchCommand(),
		bisectCommand(),
		buildCommand(),
		renamed(buildCommand(), "server"),
		wheelCommand(),
		indexCommand(),
		publishCommand(),
	}
}

// renamed is cmd under the name it had before, hidden from help: it does what cmd does, after a
// one-line note on stderr that the name changed.
func renamed(cmd *cli.Command, old string) *cli.Command {
	name, before := cmd.Name, cmd.Before
	cmd.Name, cmd.Aliases, cmd.Hidden = old, nil, true
	cmd.Usage += fmt.Sprintf(" (deprecated: use llbuild %s)", name)
	cmd.Before = func(c *cli.Context) error {
		fmt.Fprintf(stderrOf(c), "llbuild: %q is deprecated: use %q (the same flags)\n", "llbuild "+old, "llbuild "+name)
		if before != nil {
			return before(c)
		}
		return nil
	}
	return cmd
}
