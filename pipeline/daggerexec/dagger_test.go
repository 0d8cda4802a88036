package daggerexec

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden query files")

// buildOutputs are the files a llama.cpp server build leaves in build/bin.
var buildOutputs = map[string]string{
	"bin/llama-server":      "server",
	"bin/libllama.so.0.0.1": "llama",
	"bin/libllama.so.0":     "->libllama.so.0.0.1",
	"bin/libggml-cpu.so":    "cpu",
	"bin/libggml-base.so":   "base",
	"bin/not-an-output.txt": "left out",
}

func newFake(out string) *fakeEngine {
	return &fakeEngine{files: buildOutputs, paths: map[string]string{out: "$OUT"}}
}

func golden(t *testing.T, name string, got []string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	text := strings.Join(got, "\n") + "\n"
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != text {
		t.Errorf("queries differ from %s (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", file, text, want)
	}
}

func series(t *testing.T) []patches.Patch {
	return fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
}

func newExecutor(t *testing.T, f *fakeEngine, opts Options) *Executor {
	t.Helper()
	opts.conn = f
	if opts.ReadsDir == "" {
		opts.ReadsDir = t.TempDir()
	}
	opts.Builder = pipeline.Builder{Version: "test"}
	ex, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

func TestBuildSendsThePlanAsQueries(t *testing.T) {
	tests := []struct {
		name   string
		target string
		golden string
	}{
		{"a CPU target from the plan's git commit", "cpu-v3", "cpu-v3"},
		{"a CUDA target links the stub and keeps its env", "h200", "h200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := series(t)
			p := fixture.Plan(t, tt.target, fixture.Recipe(t, strings.Repeat("a", 40)), s)
			out := t.TempDir()
			f := newFake(out)
			dir, err := newExecutor(t, f, Options{Series: s}).Build(context.Background(), p, out)
			if err != nil {
				t.Fatalf("Build() = %v", err)
			}
			golden(t, tt.golden, f.recorded())

			// What the fake exported went through the same artifact writer as the host's.
			a, err := artifacts.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range a.Manifest.Files {
				names = append(names, f.Path)
			}
			if got, want := strings.Join(names, " "), "libggml-base.so libggml-cpu.so libllama.so.0 libllama.so.0.0.1 llama-server patches/0001-server-greeting.patch patches/0002-ggml-cpu-build-info.patch"; got != want {
				t.Errorf("artifacts = %s, want %s", got, want)
			}
			if a.Provenance.Builder.Executor != "dagger" {
				t.Errorf("provenance executor = %q, want dagger", a.Provenance.Builder.Executor)
			}
			if left, _ := filepath.Glob(filepath.Join(out, ".export-*")); len(left) > 0 {
				t.Errorf("export directories left: %v", left)
			}
		})
	}
}

func TestQueriesCarryTheEssentials(t *testing.T) {
	s := series(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	out := t.TempDir()
	f := newFake(out)
	if _, err := newExecutor(t, f, Options{Series: s}).Build(context.Background(), p, out); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(f.recorded(), "\n")
	for _, want := range []string{
		`from(address:"` + p.Images.Devel.Ref + `")`,
		`sharing:LOCKED`,
		`git(url:"https://example.invalid/fakellama"){commit(id:"` + strings.Repeat("a", 40) + `"){tree`,
		`"-DGGML_AVX2=ON"`, `"-DCMAKE_C_FLAGS=-ffile-prefix-map=/src=."`,
		`withEnvVariable(name:"SOURCE_DATE_EPOCH", value:"1784810751")`,
		`withEnvVariable(name:"CCACHE_BASEDIR", value:"/src")`,
		`cacheVolume(key:"llbuild-ccache")`,
		`args:["cmake","--build","/build","--target","llama-server"]`,
		`include:["bin/llama-server","bin/*.so*"]`,
		`export(path:"$OUT/`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no query contains %s", want)
		}
	}
	// Patches go in series order, each as its own exec.
	i1 := strings.Index(all, "0001-server-greeting.patch")
	i2 := strings.Index(all, "0002-ggml-cpu-build-info.patch")
	if i1 < 0 || i2 < 0 {
		t.Errorf("patches missing from the queries")
	}
}

func TestLocalSourcesAndEngine(t *testing.T) {
	s := series(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	out := t.TempDir()
	f := newFake(out)
	f.paths[fixture.Source()] = "$SRC"
	_, err := newExecutor(t, f, Options{Series: s, Source: fixture.Source(), Engine: "tcp://engine.invalid:1234"}).Build(context.Background(), p, out)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(f.recorded(), "\n")
	if !strings.Contains(all, `host{directory(exclude:[".git"], path:"$SRC")`) {
		t.Errorf("a plain source directory is not loaded from the host:\n%s", all)
	}
	if strings.Contains(all, "git(url:") {
		t.Errorf("a local source still fetches from the URL")
	}
}

func TestPatchExecErrorNamesPatchAndHunk(t *testing.T) {
	s := series(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	out := t.TempDir()
	f := newFake(out)
	f.failExport = map[string]any{
		"_type":    "EXEC_ERROR",
		"exitCode": 1,
		"cmd":      []string{"sh", "-c", `git apply --check --whitespace=nowarn "$1" && git apply --whitespace=nowarn "$1"`, "apply", "/patches/0002-ggml-cpu-build-info.patch"},
		"stdout":   "",
		"stderr":   "error: patch failed: ggml/src/ggml-cpu/ggml-cpu.c:1\nerror: ggml/src/ggml-cpu/ggml-cpu.c: patch does not apply\n",
	}
	_, err := newExecutor(t, f, Options{Series: s}).Build(context.Background(), p, out)
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("Build() = %v, want a PatchError", err)
	}
	if pe.Patch != "0002-ggml-cpu-build-info.patch" || strings.Join(pe.Hunks, ",") != "ggml/src/ggml-cpu/ggml-cpu.c:1" {
		t.Errorf("PatchError = %s at %v", pe.Patch, pe.Hunks)
	}
	if _, err := os.Stat(filepath.Join(out, p.Target)); !os.IsNotExist(err) {
		t.Errorf("a failed build left artifacts")
	}
}

func TestCompileExecErrorShowsTail(t *testing.T) {
	s := series(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	out := t.TempDir()
	f := newFake(out)
	var lines []string
	for i := 0; i < 40; i++ {
		lines = append(lines, "[ninja] step "+string(rune('a'+i%26)))
	}
	lines = append(lines, "server.cpp:17:5: error: expected ';' before 'return'")
	f.failExport = map[string]any{
		"_type": "EXEC_ERROR", "exitCode": 1,
		"cmd":    []string{"cmake", "--build", "/build", "--target", "llama-server"},
		"stdout": strings.Join(lines, "\n"),
		"stderr": "ninja: build stopped: subcommand failed.",
	}
	_, err := newExecutor(t, f, Options{Series: s}).Build(context.Background(), p, out)
	var ee *ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("Build() = %v, want an ExecError", err)
	}
	if ee.ExitCode != 1 || !strings.Contains(ee.Tail, "error: expected ';'") || !strings.HasSuffix(ee.Tail, "subcommand failed.") {
		t.Errorf("ExecError = exit %d tail:\n%s", ee.ExitCode, ee.Tail)
	}
	if n := len(strings.Split(ee.Tail, "\n")); n != tailLines {
		t.Errorf("tail has %d lines, want %d", n, tailLines)
	}
	for _, want := range []string{"target cpu-v3", "export", "cmake --build /build --target llama-server exited with 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestMatrixOnOneEngineKeepsOrder(t *testing.T) {
	s := series(t)
	out := t.TempDir()
	f := newFake(out)
	ex := newExecutor(t, f, Options{Series: s})
	var plans []*pipeline.Plan
	for _, n := range []string{"h200", "cpu-v3", "rtx3090"} {
		plans = append(plans, fixture.Plan(t, n, fixture.Recipe(t, strings.Repeat("a", 40)), s))
	}
	res := pipeline.BuildAll(context.Background(), ex, plans, out, 3)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Plan.Target, r.Err)
		}
		if r.Plan != plans[i] || !strings.Contains(r.Dir, "/"+plans[i].Target+"/") {
			t.Errorf("result %d = %s, want %s's", i, r.Dir, plans[i].Target)
		}
	}
}

func TestNewFailsFastWithoutEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DAGGER_SESSION_PORT", "")
	t.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", "")
	// The engine the suite may run against would answer the checks below.
	t.Setenv(runnerHost, "")
	_, err := New(Options{})
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "--executor host") {
		t.Errorf("New() without dagger = %v, want ErrNoEngine suggesting --executor host", err)
	}
	bin := filepath.Join(t.TempDir(), "dagger")
	os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755)
	t.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", bin)
	_, err = New(Options{})
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "docker") {
		t.Errorf("New() with the CLI but no docker or --engine = %v, want ErrNoEngine naming docker", err)
	}
	// docker on PATH but its daemon down (issue 31): one line that says what to do, not the
	// CLI's log
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "docker"), []byte("#!/bin/sh\necho 'Client:' >&2\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"), 0o755)
	t.Setenv("PATH", dir)
	_, err = New(Options{})
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "the Docker daemon is not answering (docker version: Cannot connect to the Docker daemon") ||
		!strings.Contains(err.Error(), "start Docker") || !strings.Contains(err.Error(), "--engine tcp://") || strings.Contains(err.Error(), "\n") {
		t.Errorf("New() with docker's daemon down = %v, want one line naming the daemon and the ways out", err)
	}
	open, _ := listening(t)
	if _, err := New(Options{Engine: open}); err != nil {
		t.Errorf("New() with the CLI and --engine = %v, want nil (the session opens on the first build)", err)
	}
	// a tcp:// engine where nothing listens is said at once, with what to check
	closed, l := listening(t)
	l.Close()
	_, err = New(Options{Engine: closed})
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "nothing answers at --engine "+closed) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("New() with --engine %s where nothing listens = %v, want ErrNoEngine naming the address", closed, err)
	}
}

// listening returns tcp://ADDR of a listener that accepts connections until the test ends: what
// New's check that a tcp:// engine answers needs (the session itself opens on the first build).
func listening(t *testing.T) (string, net.Listener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return "tcp://" + l.Addr().String(), l
}

func TestDevelBaseFromLocalFiles(t *testing.T) {
	layoutDir, archive, _ := standInDevel(t)
	tests := []struct {
		name, base, want string
	}{
		{"an OCI archive is imported", "oci-archive:" + archive, `import(source:"id-`},
		{"an OCI layout is tarred and imported", "oci-layout:" + layoutDir, `import(source:"id-`},
		{"a mirror keeps the plan's digest", "mirror.invalid/ubuntu:24.04", `from(address:"mirror.invalid/ubuntu:24.04@sha256:224a1869083a311ef3f13648a154ba79832fbef6364d31493642ca03082da254")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := series(t)
			p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
			out := t.TempDir()
			f := newFake(out)
			if _, err := newExecutor(t, f, Options{Series: s, Devel: tt.base}).Build(context.Background(), p, out); err != nil {
				t.Fatal(err)
			}
			all := strings.Join(f.recorded(), "\n")
			if !strings.Contains(all, tt.want) {
				t.Errorf("no query contains %s:\n%s", tt.want, all)
			}
			if strings.Contains(all, `from(address:"ubuntu:24.04@`) {
				t.Errorf("the plan's devel image is still pulled")
			}
			if strings.HasPrefix(tt.base, "oci-") {
				if !strings.Contains(all, `host{file(path:"`) {
					t.Errorf("the archive is not read from the host")
				}
			}
			if left, _ := filepath.Glob(filepath.Join(out, ".export-*")); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestEngineWithoutCLISaysTheCLIIsStillNeeded: --engine replaces docker, not the dagger CLI (the
// SDK opens its session by running `dagger session`, which then dials the runner host), so the
// error says that, names the URL given (without its credentials) and does not suggest --engine.
func TestEngineWithoutCLISaysTheCLIIsStillNeeded(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DAGGER_SESSION_PORT", "")
	t.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", "")
	t.Setenv(runnerHost, "")
	tests := []struct {
		name, engine, env string
		want              []string
		notWant           []string
	}{
		{
			name:    "--engine names the URL and the CLI",
			engine:  "tcp://buildbox:1234",
			want:    []string{"--engine tcp://buildbox:1234", "dagger CLI", "v0.21.8", "_EXPERIMENTAL_DAGGER_CLI_BIN", "docker is not needed"},
			notWant: []string{"pass --engine"},
		},
		{
			name:    "credentials in the URL are redacted",
			engine:  "tcp://user:secret@buildbox:1234",
			want:    []string{"tcp://user:xxxxx@buildbox:1234"},
			notWant: []string{"secret"},
		},
		{
			name: "the runner host from the environment is named as such",
			env:  "kube-pod://engine-0",
			want: []string{runnerHost + "=kube-pod://engine-0", "dagger CLI"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(runnerHost, tt.env)
			_, err := New(Options{Engine: tt.engine})
			if !errors.Is(err, ErrNoEngine) {
				t.Fatalf("New() = %v, want ErrNoEngine", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() = %q, want it to contain %q", err, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("New() = %q, want it without %q", err, w)
				}
			}
		})
	}
}

// The SDK runs only the CLI _EXPERIMENTAL_DAGGER_CLI_BIN names and otherwise downloads one from
// dl.dagger.io: the dagger CLI the user installed on PATH must be the one it runs.
func TestNewHandsTheCLIOnPathToTheSDK(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dagger")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("DAGGER_SESSION_PORT", "")
	t.Setenv(runnerHost, "")
	t.Setenv("_EXPERIMENTAL_DAGGER_CLI_BIN", "") // restored after the test
	os.Unsetenv("_EXPERIMENTAL_DAGGER_CLI_BIN")
	u, _ := listening(t)
	if _, err := New(Options{Engine: u}); err != nil {
		t.Fatalf("New() with the CLI on PATH and --engine = %v, want nil", err)
	}
	if got := os.Getenv("_EXPERIMENTAL_DAGGER_CLI_BIN"); got != bin {
		t.Errorf("_EXPERIMENTAL_DAGGER_CLI_BIN = %q after New(), want the CLI on PATH %s (else the SDK downloads one)", got, bin)
	}
}

// A devel image whose nvcc is another CUDA release than the plan's is refused before anything
// is built: the runtime image would claim the plan's NVIDIA_REQUIRE_CUDA for binaries that need
// the compiler's. A devel image without the driver stub is refused the same way.
func TestBuildRefusesAnotherCUDARelease(t *testing.T) {
	for _, tt := range []struct{ name, probe, want string }{
		{"nvcc 13.0 for a CUDA 13.1 plan", fakeCUDAProbe, "nvcc in the devel image nvidia/cuda:13.1.1-devel-ubuntu24.04@sha256:9cf8694a27722418a1f175d90f85d5afb5a728fd4a9907d7f0565efecfa14d32 is 13.0.88 (Cuda compilation tools, release 13.0, V13.0.88): use a devel image of CUDA 13.1, or a target whose build.cuda.toolkit is 13.0"},
		{"no stub", "nvcc=/usr/bin/nvcc\nversion=Cuda compilation tools, release 13.1, V13.1.80\n", "no CUDA driver stub (stubs/libcuda.so) in the devel image"},
		{"no nvcc", "nvcc=\n", "no nvcc in the devel image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := series(t)
			p := fixture.Plan(t, "rtx3090", fixture.Recipe(t, strings.Repeat("a", 40)), s)
			out := t.TempDir()
			f := newFake(out)
			f.stdout = tt.probe
			_, err := newExecutor(t, f, Options{Series: s}).Build(context.Background(), p, out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build() = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(strings.Join(f.recorded(), "\n"), "{export(") {
				t.Errorf("a refused build still exported")
			}
		})
	}
}
