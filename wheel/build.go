package wheel

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

// Architectures is the CUDA architectures that --arch values name: each value a comma-separated
// list, items trimmed, empty ones dropped.
func Architectures(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// IsPythonVersion says v is a Python 3 version a build can run under: 3.N, N one or two digits.
func IsPythonVersion(v string) bool {
	major, minor, ok := strings.Cut(v, ".")
	return ok && major == "3" && minor != "" && len(minor) <= 2 && strings.Trim(minor, "0123456789") == ""
}

// Target is the target a wheel is built for: the one named (name or file, read by load), its
// CUDA architectures replaced by archs when any are given; with none named, the built-in CUDA
// target that builds exactly archs. An architecture the named target cannot take, or archs
// no built-in target builds, is an inputerr.Error; load's errors come back as they are.
func Target(name, file string, archs []string, load func(name, file string) (*targets.Target, error)) (*targets.Target, error) {
	if name == "" && file == "" {
		return targets.ForCUDAArchitectures(archs)
	}
	t, err := load(name, file)
	if err != nil || len(archs) == 0 {
		return t, err
	}
	if t, err = pipeline.WithArchitectures(t, archs); err != nil {
		return nil, &inputerr.Error{Err: err}
	}
	return t, nil
}

// Setup is how a wheel is to be built: the executor (pipeline.ExecutorHost or
// ExecutorDagger), the Dagger engine, base images by role (devel, runtime), the
// llama-cpp-python (Package) and llama.cpp (Llama) source directories, which the dagger
// executor fetches when they are empty, and the artifact directory Out, OutDefault when it
// was not chosen.
type Setup struct {
	Executor, Engine string
	Bases            map[string]string
	Package, Llama   string
	Out              string
	OutDefault       bool
}

// Validate refuses, as an inputerr.Error, a setup no wheel build can use: a source that is not
// a directory, a default Out inside a source, a runtime base (only the devel image builds a
// wheel), an engine or a devel base for the host executor, which is the build environment
// itself, the host executor without both sources (it fetches nothing), or an unknown executor.
func (s Setup) Validate() error {
	sources := []struct{ flag, dir string }{{"source", s.Package}, {"llama-source", s.Llama}}
	for _, src := range sources {
		if src.dir == "" {
			continue
		}
		if fi, err := os.Stat(src.dir); err != nil {
			return inputerr.Errorf("--%s %s: %w", src.flag, src.dir, err)
		} else if !fi.IsDir() {
			return inputerr.Errorf("--%s %s is not a directory", src.flag, src.dir)
		}
	}
	for _, src := range sources {
		if abs, _ := filepath.Abs(src.dir); src.dir != "" && s.OutDefault && within(s.Out, abs) {
			return inputerr.Errorf("the default --out %s is inside --%s %s: pass --out", s.Out, src.flag, abs)
		}
	}
	if s.Bases["runtime"] != "" {
		return inputerr.Errorf("--base runtime= has no use for a wheel: only the devel image builds it")
	}
	switch s.Executor {
	case pipeline.ExecutorHost:
		if s.Engine != "" || s.Bases["devel"] != "" {
			return inputerr.Errorf("--engine and --base are for --executor dagger: the host executor is the build environment")
		}
		if s.Package == "" || s.Llama == "" {
			return inputerr.Errorf("--executor host needs --source DIR (llama-cpp-python) and --llama-source DIR (llama.cpp); it fetches nothing")
		}
	case pipeline.ExecutorDagger:
	default:
		return inputerr.Errorf("--executor must be dagger or host, got %q", s.Executor)
	}
	return nil
}

// within says whether p is dir or lies inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(os.PathSeparator))
}

// Build builds plan's wheel with ex into its artifact directory under out, closes ex where it
// is an io.Closer, and returns the wheel's path.
func Build(ctx context.Context, ex pipeline.WheelExecutor, plan *pipeline.WheelPlan, out string) (string, error) {
	if cl, ok := ex.(io.Closer); ok {
		defer cl.Close()
	}
	dir, err := ex.BuildWheel(ctx, plan, out)
	if err != nil {
		return "", err
	}
	return Find(dir)
}

// Find is the one wheel that a wheel build wrote to its artifact directory.
func Find(dir string) (string, error) {
	whls, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	if len(whls) != 1 {
		return "", fmt.Errorf("artifact directory %s holds %d wheels, want 1", dir, len(whls))
	}
	return whls[0], nil
}
