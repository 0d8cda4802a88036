package main

import "github.com/urfave/cli/v2"

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
		serverCommand(),
		wheelCommand(),
		indexCommand(),
		publishCommand(),
	}
}
