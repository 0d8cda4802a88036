package cmdutil

import (
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/executor"
	"github.com/llbuild/llbuild/targets"
)

// The flags of the inputs several commands take, each with one name and one help text.
var (
	TargetFlag     = &cli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME` (see llbuild targets)"}
	TargetFileFlag = &cli.StringFlag{Name: "target-file", Usage: "target `FILE` describing your own host (llbuild target detect writes one)"}
	JSONFlag       = &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	FloatingFlag   = &cli.BoolFlag{Name: "allow-floating", Usage: "accept unpinned inputs: base images given by tag without a digest, apt packages without pinned versions (the build is then not reproducible)"}
	RecipeFlag     = &cli.StringFlag{Name: "recipe", Value: "server", Usage: "recipe `NAME`: server or wheel, or a recipe FILE.yaml (one recipe bump --new-series recorded)"}
	// RefFlag builds another commit than the recipe's pin, named as upstream names it.
	RefFlag        = &cli.StringFlag{Name: "ref", Usage: "build llama.cpp at `REF` instead of the recipe's pinned commit: a commit, a release tag (b10573), a branch or a PR head (pull/23398/head), resolved in --source when it is a git repository, else fetched (commits only) from the recipe's source URL; its commit time and build number come from the history"}
	SeriesFlag     = &cli.StringFlag{Name: "series", Usage: "the patches to apply: `scoring` (the built-in series: upstream plus echo and prompt logprobs, the default), plain (upstream plus patch 0001, what a CUDA build needs) or a series FILE (\"NAME.patch sha256:DIGEST\" lines, the patches beside it; an empty file applies none)"}
	SourceRepoFlag = &cli.StringFlag{Name: "source", Usage: "llama.cpp git checkout or mirror `DIR` (patches status also takes a plain source tree)", Required: true}
)

// LoadTarget is the target --target or --target-file names; naming none, both, an unknown one
// or a missing file is a usage error.
func LoadTarget(name, file string) (*targets.Target, error) {
	t, err := targets.Spec{Name: name, File: file}.Load()
	return t, UsageOf(err)
}

// ServerInputsOf reads what a server plan is made of from the command's --recipe, --series and
// --ref, with source the llama.cpp source the command was given; builtinNames lets --recipe name
// the built-in recipes.
func ServerInputsOf(c *cli.Context, source string, builtinNames bool) (*pipeline.Inputs, error) {
	in, err := pipeline.ServerInputs(c.Context, c.String("recipe"), c.String("series"), c.String("ref"), source, builtinNames, Logger(c))
	return in, UsageOf(err)
}

// ExecutorFlags are the flags of the executor that carries out a plan: source's and jobs' help
// texts are the command's (no --jobs where jobs is empty).
func ExecutorFlags(source, jobs string) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "executor", Value: pipeline.ExecutorDagger, Usage: "`dagger` (an engine runs the target's devel image) or host (this machine)"},
		&cli.StringFlag{Name: "source", Usage: source},
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: "out", Usage: "artifact `DIR`"},
		&cli.StringFlag{Name: "work-dir", Usage: "host executor work `DIR` (default: the user cache directory)"},
		&cli.StringFlag{Name: "engine", Usage: "Dagger runner host `URL` (tcp://, docker-container://, kube-pod://) of a running engine, reached through the dagger CLI (still needed; docker is not)"},
		&cli.StringSliceFlag{Name: "base", Usage: "override a base image: `ROLE=REF` with ROLE devel or runtime and REF an image reference, oci-archive:PATH or oci-layout:PATH"},
	}
	if jobs != "" {
		flags = append(flags, &cli.IntFlag{Name: "jobs", Value: 1, Usage: jobs})
	}
	return flags
}

// ExecutorOptionsOf reads ExecutorFlags.
func ExecutorOptionsOf(c *cli.Context) (executor.Options, error) {
	o := executor.Options{
		Executor: c.String("executor"),
		Source:   c.String("source"),
		Engine:   c.String("engine"),
		WorkDir:  c.String("work-dir"),
		Jobs:     c.Int("jobs"),
	}
	var err error
	if o.Bases, err = executor.ParseBases(c.StringSlice("base")); err != nil {
		return o, UsageOf(err)
	}
	if o.Out, err = filepath.Abs(c.String("out")); err != nil {
		return o, err
	}
	return o, nil
}

// ExecutorEnv is what an executor writes to and stamps: s's log and engine log, term for its
// progress, llbuild's version.
func ExecutorEnv(s Streams, term *progress.Term) executor.Env {
	return executor.Env{Version: s.Version, Log: s.Log, EngineLog: s.EngineLog, Progress: term}
}
