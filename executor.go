package main

import (
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/executor"
)

// executorFlags are the flags of every command that builds through an executor (server,
// wheel, publish): which executor, its engine or work directory, the base images and where
// artifacts go. source says what --source holds for the command; jobs what --jobs counts,
// "" for a command without --jobs.
func executorFlags(source, jobs string) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "executor", Value: pipeline.ExecutorDagger, Usage: "`dagger` (an engine runs the target's devel image) or host (this machine)"},
		&cli.StringFlag{Name: "source", Usage: source},
		&cli.StringFlag{Name: "out", Value: "out", Usage: "artifact `DIR`"},
		&cli.StringFlag{Name: "work-dir", Usage: "host executor work `DIR` (default: the user cache directory)"},
		&cli.StringFlag{Name: "engine", Usage: "Dagger runner host `URL` (tcp://, docker-container://, kube-pod://) of a running engine, reached through the dagger CLI (still needed; docker is not)"},
		&cli.StringSliceFlag{Name: "base", Usage: "override a base image: `ROLE=REF` with ROLE devel or runtime and REF an image reference, oci-archive:PATH or oci-layout:PATH"},
	}
	if jobs != "" {
		flags = append(flags, &cli.IntFlag{Name: "jobs", Value: 1, Usage: jobs})
	}
	return flags
}

// executorOptions are the values of executorFlags.
type executorOptions struct{ executor.Options }

// executorOptionsOf reads executorFlags; a malformed --base is a usage error.
func executorOptionsOf(c *cli.Context) (executorOptions, error) {
	o := executorOptions{executor.Options{
		Executor: c.String("executor"),
		Source:   c.String("source"),
		Engine:   c.String("engine"),
		WorkDir:  c.String("work-dir"),
		Jobs:     c.Int("jobs"),
	}}
	var err error
	if o.Bases, err = parseBases(c.StringSlice("base")); err != nil {
		return o, err
	}
	if o.Out, err = filepath.Abs(c.String("out")); err != nil {
		return o, err
	}
	return o, nil
}

// parseBases reads --base ROLE=REF entries; a malformed one is a usage error.
func parseBases(entries []string) (map[string]string, error) {
	m, err := executor.ParseBases(entries)
	return m, usageOf(err)
}

// check refuses, as usage errors, options that do not go with --executor for a build of the
// server recipe (executor.Options.Check).
func (o executorOptions) check() error { return usageOf(o.Options.Check()) }

// newExecutor starts the executor that o names for plans of the server recipe, drawing its
// progress on term (nil: logged now and then). The caller closes it where it is an io.Closer.
func newExecutor(s streams, o executorOptions, series []patches.Patch, term *progress.Term) (pipeline.Executor, error) {
	return executor.New(o.Options, executorEnv(s, term), series)
}

// newWheelExecutor starts the executor that o names for wheel plans (executor.NewWheel).
func newWheelExecutor(s streams, o executorOptions, series []patches.Patch, llamaSource string, buildJobs int) (pipeline.WheelExecutor, error) {
	return executor.NewWheel(o.Options, executorEnv(s, nil), series, llamaSource, buildJobs)
}

// executorEnv is where an executor reports: the command's streams, its progress on term.
func executorEnv(s streams, term *progress.Term) executor.Env {
	return executor.Env{Version: version, Log: s.Log, EngineLog: s.EngineLog, Progress: term}
}

// isWithin says whether p is dir or lies inside it.
func isWithin(p, dir string) bool { return executor.Within(p, dir) }
