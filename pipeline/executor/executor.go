package executor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/bisect"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/daggerexec"
	"github.com/llbuild/llbuild/pipeline/hostexec"
	"github.com/llbuild/llbuild/pipeline/image"
)

// Both executors list what their builds read, so a bisect campaign skips the commits that change
// none of it whichever builds its probes.
var (
	_ bisect.ReadLister = (*hostexec.Executor)(nil)
	_ bisect.ReadLister = (*daggerexec.Executor)(nil)
)

// Options say which executor builds and how: the values of the flags of every command that
// builds through one (server, wheel, publish, bisect).
type Options struct {
	// Executor is pipeline.ExecutorDagger or pipeline.ExecutorHost.
	Executor, Source, Engine, WorkDir string
	// Out is the artifact directory, absolute.
	Out string
	// Bases maps a role (devel, runtime) to the image --base gives for it.
	Bases map[string]string
	Jobs  int
}

// Env is where an executor reports, and the llbuild version its provenance records.
type Env struct {
	Version string
	Log     *slog.Logger
	// EngineLog gets the Dagger engine's own output (nil: none).
	EngineLog io.Writer
	// Progress is stderr's status line (nil: progress is logged now and then).
	Progress *progress.Term
}

// ParseBases reads --base ROLE=REF entries; a malformed or repeated one is an inputerr.Error.
func ParseBases(entries []string) (map[string]string, error) {
	m := map[string]string{}
	for _, e := range entries {
		role, ref, ok := strings.Cut(e, "=")
		if !ok || ref == "" || (role != "devel" && role != "runtime") {
			return nil, inputerr.Errorf("--base %q: want devel=REF or runtime=REF (REF: an image reference, oci-archive:PATH or oci-layout:PATH)", e)
		}
		if _, dup := m[role]; dup {
			return nil, inputerr.Errorf("--base %s is given twice", role)
		}
		if p, ok := image.LocalPath(ref); ok {
			if _, err := os.Stat(p); err != nil {
				return nil, inputerr.Errorf("--base %s: %v", e, err)
			}
		}
		m[role] = ref
	}
	return m, nil
}

// Check refuses, as an inputerr.Error, options that do not go with o.Executor for a build of the
// server recipe: the host executor takes no engine and no devel image and needs a source it can
// build; a source must be a directory.
func (o Options) Check() error {
	switch o.Executor {
	case pipeline.ExecutorHost:
		if o.Engine != "" {
			return inputerr.Errorf("--engine is for --executor dagger")
		}
		if o.Bases["devel"] != "" {
			return inputerr.Errorf("--base devel= is for --executor dagger: the host executor is the build environment")
		}
		if o.Source == "" {
			return inputerr.Errorf("--executor host needs --source DIR (a llama.cpp directory or git mirror); it fetches nothing")
		}
	case pipeline.ExecutorDagger:
	default:
		return inputerr.Errorf("--executor must be dagger or host, got %q", o.Executor)
	}
	if o.Source == "" {
		return nil
	}
	fi, err := os.Stat(o.Source)
	switch {
	case err != nil:
		return inputerr.Errorf("--source %s: %w", o.Source, err)
	case !fi.IsDir():
		return inputerr.Errorf("--source %s is not a directory", o.Source)
	}
	return nil
}

// CheckDefaultOut refuses, as an inputerr.Error, an artifact directory inside the source when
// it is the default one (outGiven false): the source would hold the build's own outputs.
func (o Options) CheckDefaultOut(outGiven bool) error {
	if o.Source == "" || outGiven {
		return nil
	}
	if abs, _ := filepath.Abs(o.Source); Within(o.Out, abs) {
		return inputerr.Errorf("the default --out %s is inside the source %s: pass --out", o.Out, abs)
	}
	return nil
}

// Within says whether p is dir or lies inside it (an output directory inside a source would be
// read back as part of it).
func Within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(os.PathSeparator))
}

// New starts the executor that o names for plans of the server recipe, series the patches they
// apply. The caller closes it where it is an io.Closer.
func New(o Options, env Env, series []patches.Patch) (pipeline.Executor, error) {
	if o.Executor == pipeline.ExecutorHost {
		return hostexec.New(o.hostOptions(env, o.Source, series))
	}
	return daggerexec.New(o.daggerOptions(env, o.Source, series))
}

// NewWheel starts the executor that o names for wheel plans: o.Source is the llama-cpp-python
// source, llamaSource the llama.cpp one vendored into it, buildJobs the build's parallelism
// on either executor (0: the default). Neither wheel executor draws progress. The caller closes it
// where it is an io.Closer.
func NewWheel(o Options, env Env, series []patches.Patch, llamaSource string, buildJobs int) (pipeline.WheelExecutor, error) {
	env.Progress = nil
	if o.Executor == pipeline.ExecutorHost {
		ho := o.hostOptions(env, llamaSource, series)
		ho.Jobs = buildJobs
		return hostexec.NewWheel(hostexec.WheelOptions{Options: ho, Package: o.Source})
	}
	return daggerexec.NewWheel(daggerexec.WheelOptions{Options: o.daggerOptions(env, llamaSource, series), Package: o.Source, Jobs: buildJobs})
}

func (o Options) builder(env Env) pipeline.Builder {
	return pipeline.Builder{Version: env.Version, Executor: o.Executor}
}

func (o Options) hostOptions(env Env, source string, series []patches.Patch) hostexec.Options {
	return hostexec.Options{Source: source, WorkDir: o.WorkDir, Series: series, Builder: o.builder(env), Logger: env.Log, Progress: env.Progress}
}

func (o Options) daggerOptions(env Env, source string, series []patches.Patch) daggerexec.Options {
	return daggerexec.Options{
		Source:    source,
		Engine:    o.Engine,
		Devel:     o.Bases["devel"],
		Series:    series,
		Builder:   o.builder(env),
		Logger:    env.Log,
		LogOutput: env.EngineLog,
		Progress:  env.Progress,
	}
}

// CheckPins asks apt, in p's devel image (or the devel= one of bases, --base entries) through
// the Dagger engine at engine ("": the default one), whether p's snapshot has every version p
// pins, and writes a line per pin to w: ok, or missing with the versions the snapshot has. A
// plan without pinned apt packages, a malformed base or a runtime one is an inputerr.Error,
// found before the engine is asked; a missing pin is an error that says which file to fix.
func CheckPins(ctx context.Context, p *pipeline.Plan, engine string, bases []string, env Env, w io.Writer) error {
	if p.Apt == nil || len(p.Apt.Packages) == 0 {
		return inputerr.Errorf("target %s, recipe %s: the plan installs no apt packages, so there are no pins to check", p.Target, p.Recipe)
	}
	if len(p.Apt.Sources) == 0 {
		return inputerr.Errorf("target %s: the plan's apt packages are not pinned to a snapshot (%s), so there is nothing to check", p.Target, strings.Join(p.Apt.Unpinned(), ", "))
	}
	m, err := ParseBases(bases)
	if err != nil {
		return err
	}
	if _, ok := m["runtime"]; ok {
		return inputerr.Errorf("--check-pins asks in the devel image: give --base devel=REF")
	}
	ex, err := daggerexec.New(daggerexec.Options{Engine: engine, Devel: m["devel"], Logger: env.Log, LogOutput: env.EngineLog})
	if err != nil {
		return err
	}
	defer ex.Close()
	checks, err := ex.CheckAptPins(ctx, p)
	if err != nil {
		return err
	}
	var missing []string
	for _, ch := range checks {
		if ch.OK {
			fmt.Fprintf(w, "ok       %s %s\n", ch.Name, ch.Version)
			continue
		}
		has := "no version of it"
		if len(ch.Available) > 0 {
			has = strings.Join(ch.Available, " ")
		}
		fmt.Fprintf(w, "missing  %s %s (the snapshot has %s)\n", ch.Name, ch.Version, has)
		missing = append(missing, ch.Name+" "+ch.Version)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the apt snapshot %s lacks %s: pin versions it has in recipes/apt/%s.yaml", p.Apt.Snapshot, strings.Join(missing, ", "), p.Apt.Distro)
	}
	return nil
}
