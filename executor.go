package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bisect"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/daggerexec"
	"github.com/llbuild/llbuild/pipeline/hostexec"
)

// Both executors list what their builds read, so a bisect campaign skips the commits that change
// none of it whichever builds its probes.
var (
	_ bisect.ReadLister = (*hostexec.Executor)(nil)
	_ bisect.ReadLister = (*daggerexec.Executor)(nil)
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
type executorOptions struct {
	Executor, Source, Engine, WorkDir string
	// Out is the artifact directory, absolute.
	Out string
	// Bases maps a role (devel, runtime) to the image --base gives for it.
	Bases map[string]string
	Jobs  int
}

// executorOptionsOf reads executorFlags; a malformed --base is a usage error.
func executorOptionsOf(c *cli.Context) (executorOptions, error) {
	o := executorOptions{
		Executor: c.String("executor"),
		Source:   c.String("source"),
		Engine:   c.String("engine"),
		WorkDir:  c.String("work-dir"),
		Jobs:     c.Int("jobs"),
	}
	var err error
	if o.Bases, err = parseBases(c.StringSlice("base")); err != nil {
		return o, err
	}
	if o.Out, err = filepath.Abs(c.String("out")); err != nil {
		return o, err
	}
	return o, nil
}

// parseBases reads --base ROLE=REF entries.
func parseBases(entries []string) (map[string]string, error) {
	m := map[string]string{}
	for _, e := range entries {
		role, ref, ok := strings.Cut(e, "=")
		if !ok || ref == "" || (role != "devel" && role != "runtime") {
			return nil, usagef("--base %q: want devel=REF or runtime=REF (REF: an image reference, oci-archive:PATH or oci-layout:PATH)", e)
		}
		if _, dup := m[role]; dup {
			return nil, usagef("--base %s is given twice", role)
		}
		m[role] = ref
	}
	return m, nil
}

// check refuses options that do not go with --executor (usage errors) for a build of the
// server recipe: the host executor takes no engine and no devel image and needs a source it
// can build.
func (o executorOptions) check() error {
	switch o.Executor {
	case pipeline.ExecutorHost:
		if o.Engine != "" {
			return usagef("--engine is for --executor dagger")
		}
		if o.Bases["devel"] != "" {
			return usagef("--base devel= is for --executor dagger: the host executor is the build environment")
		}
		if o.Source == "" {
			return usagef("--executor host needs --source DIR (a llama.cpp directory or git mirror); it fetches nothing")
		}
	case pipeline.ExecutorDagger:
	default:
		return usagef("--executor must be dagger or host, got %q", o.Executor)
	}
	if o.Source != "" {
		return checkDirFlag("source", o.Source)
	}
	return nil
}

// newExecutor starts the executor that o names for plans of the server recipe, drawing its
// progress on term (nil: logged now and then). The caller closes it where it is an io.Closer.
func newExecutor(s streams, o executorOptions, series []patches.Patch, term *progress.Term) (pipeline.Executor, error) {
	if o.Executor == pipeline.ExecutorHost {
		return hostexec.New(o.hostOptions(s, o.Source, series, term))
	}
	return daggerexec.New(o.daggerOptions(s, o.Source, series, term))
}

// newWheelExecutor starts the executor that o names for wheel plans: o.Source is the
// llama-cpp-python source, llamaSource the llama.cpp one vendored into it, buildJobs the
// host build's parallelism (0: the default). The caller closes it where it is an io.Closer.
func newWheelExecutor(s streams, o executorOptions, series []patches.Patch, llamaSource string, buildJobs int) (pipeline.WheelExecutor, error) {
	if o.Executor == pipeline.ExecutorHost {
		ho := o.hostOptions(s, llamaSource, series, nil)
		ho.Jobs = buildJobs
		return hostexec.NewWheel(hostexec.WheelOptions{Options: ho, Package: o.Source})
	}
	// Neither wheel executor draws progress on the terminal.
	return daggerexec.NewWheel(daggerexec.WheelOptions{Options: o.daggerOptions(s, llamaSource, series, nil), Package: o.Source})
}

func (o executorOptions) builder() pipeline.Builder {
	return pipeline.Builder{Version: version, Executor: o.Executor}
}

func (o executorOptions) hostOptions(s streams, source string, series []patches.Patch, term *progress.Term) hostexec.Options {
	return hostexec.Options{Source: source, WorkDir: o.WorkDir, Series: series, Builder: o.builder(), Logger: s.Log, Progress: term}
}

func (o executorOptions) daggerOptions(s streams, source string, series []patches.Patch, term *progress.Term) daggerexec.Options {
	return daggerexec.Options{
		Source:    source,
		Engine:    o.Engine,
		Devel:     o.Bases["devel"],
		Series:    series,
		Builder:   o.builder(),
		Logger:    s.Log,
		LogOutput: s.EngineLog,
		Progress:  term,
	}
}

// isWithin says whether p is dir or lies inside it.
func isWithin(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(os.PathSeparator))
}
