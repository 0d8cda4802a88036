package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
	"github.com/llbuild/llbuild/targets"
)

// rpathOrigin keeps the build directory's absolute path out of the binaries' RUNPATH, so two
// work directories give the same bytes.
const rpathOrigin = "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON"

type env struct {
	work, cache, out string
}

func newEnv(t *testing.T) env {
	root := t.TempDir()
	return env{filepath.Join(root, "work"), filepath.Join(root, "ccache"), filepath.Join(root, "out")}
}

func (e env) executor(t *testing.T, source string, series []patches.Patch) *Executor {
	t.Helper()
	ex, err := New(Options{Source: source, WorkDir: e.work, CacheDir: e.cache, Series: series, Builder: pipeline.Builder{Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func buildFixture(t *testing.T, e env, p *pipeline.Plan, series []patches.Patch) *artifacts.Artifacts {
	t.Helper()
	dir, err := e.executor(t, fixture.Source(), series).Build(context.Background(), p, e.out)
	if err != nil {
		t.Fatalf("Build() = %v", err)
	}
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatalf("artifacts.Open() = %v", err)
	}
	return a
}

func runServer(t *testing.T, a *artifacts.Artifacts, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(a.Dir, "llama-server"), args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+a.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("llama-server %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func countInsns(t *testing.T, file, reg string) int {
	t.Helper()
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", file).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", file, err)
	}
	return strings.Count(string(out), "%"+reg)
}

func TestPlanFlagsReachTheCompiler(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git", "objdump")
	avx512, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	avx512.Name = "cpu-v4"
	for _, o := range []string{"GGML_AVX512", "GGML_AVX512_VNNI"} {
		avx512.Build.ISA[o] = true
	}
	tests := []struct {
		name        string
		target      *targets.Target
		wantOptions []string
		wantISA     string
		wantZMM     bool
	}{
		{"cpu-v3 builds AVX2 and no AVX-512", nil, []string{"GGML_NATIVE=OFF", "GGML_AVX2=ON", "GGML_FMA=ON", "GGML_AVX512=OFF", "BUILD_SHARED_LIBS=ON", "LLAMA_BUILD_UI=off"}, "isa: SSE42 AVX AVX2 FMA F16C BMI2\n", false},
		{"an AVX-512 target builds zmm code", avx512, []string{"GGML_AVX512=ON", "GGML_AVX512_VNNI=ON"}, "isa: SSE42 AVX AVX2 FMA F16C BMI2 AVX512 AVX512_VNNI\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixture.Recipe(t, "", rpathOrigin)
			series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
			var p *pipeline.Plan
			if tt.target == nil {
				p = fixture.Plan(t, "cpu-v3", r, series)
			} else {
				p = fixture.PlanFor(t, tt.target, r, series)
			}
			e := newEnv(t)
			a := buildFixture(t, e, p, series)

			var names []string
			for _, f := range a.Manifest.Files {
				names = append(names, f.Path+":"+f.Kind)
			}
			for _, want := range []string{"llama-server:executable", "libggml-cpu.so.0.9.4:library", "libggml-base.so.0:library", "libllama.so:library"} {
				if !strings.Contains(strings.Join(names, " "), want) {
					t.Errorf("artifacts = %v, want %s among them", names, want)
				}
			}
			// The fixture needs the plan's epoch for its configure log to show no unused options.
			cfgLog, _ := filepath.Glob(filepath.Join(e.work, p.Target+"-"+p.ShortHash(), "logs", "*-configure.log"))
			if len(cfgLog) != 1 {
				t.Fatalf("configure logs = %v", cfgLog)
			}
			if b, _ := os.ReadFile(cfgLog[0]); strings.Contains(string(b), "not used by the project") || strings.Contains(string(b), "CMake Warning") {
				t.Errorf("configure warned about the plan's arguments:\n%s", b)
			}

			info := runServer(t, a, "--build-info")
			for _, o := range tt.wantOptions {
				if !strings.Contains(info, " "+o) {
					t.Errorf("--build-info lacks %s:\n%s", o, info)
				}
			}
			if !strings.Contains(info, tt.wantISA) {
				t.Errorf("--build-info ISA line: want %q in\n%s", tt.wantISA, info)
			}
			// __DATE__/__TIME__ follow SOURCE_DATE_EPOCH; __FILE__ follows -ffile-prefix-map.
			wantDate := time.Unix(fixture.Epoch, 0).UTC().Format("Jan _2 2006 15:04:05")
			if !strings.Contains(info, "patched: 0002\n") {
				t.Errorf("--build-info does not show patch 0002:\n%s", info)
			}
			if want := "built: " + wantDate; !strings.Contains(info, want) {
				t.Errorf("--build-info: want %q in\n%s", want, info)
			}
			// The plan names the upstream build a source without git history cannot compute.
			if want := fmt.Sprintf("version: %d (000000000)", r.Source.BuildNumber); !strings.Contains(info, want) {
				t.Errorf("--build-info: want %q in\n%s", want, info)
			}
			// No output may name the work directory (ccache's CCACHE_BASEDIR makes compiler
			// paths relative; -ffile-prefix-map covers the rest).
			for _, f := range a.Manifest.Files {
				if b, _ := os.ReadFile(a.Path(f)); f.Link == "" && strings.Contains(string(b), e.work) {
					t.Errorf("%s contains the work directory %s", f.Path, e.work)
				}
			}
			cpu := filepath.Join(a.Dir, "libggml-cpu.so.0.9.4")
			ymm, zmm := countInsns(t, cpu, "ymm"), countInsns(t, cpu, "zmm")
			if ymm == 0 {
				t.Errorf("libggml-cpu has no ymm instructions")
			}
			if got := zmm > 0; got != tt.wantZMM {
				t.Errorf("libggml-cpu zmm instructions = %d, want some: %v", zmm, tt.wantZMM)
			}
			if tt.target == nil {
				if got := runServer(t, a); !strings.Contains(got, "fake llama-server (patched by llbuild): dot(64) = 128.0") {
					t.Errorf("llama-server says %q, want the patched greeting", got)
				}
			}
		})
	}
}

func TestTwoBuildsAreByteIdentical(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	series := fixture.Patches(t, "0001-server-greeting.patch")
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, "", rpathOrigin), series)
	// Separate work, cache and output directories: nothing is shared but the inputs.
	a1 := buildFixture(t, newEnv(t), p, series)
	a2 := buildFixture(t, newEnv(t), p, series)
	if len(a1.Manifest.Files) != len(a2.Manifest.Files) {
		t.Fatalf("file counts differ: %d and %d", len(a1.Manifest.Files), len(a2.Manifest.Files))
	}
	for i, f := range a1.Manifest.Files {
		if g := a2.Manifest.Files[i]; g != f {
			t.Errorf("file %d: first build %+v, second %+v", i, f, g)
		}
	}
	for _, name := range []string{artifacts.ManifestFile, artifacts.ProvenanceFile} {
		b1, _ := os.ReadFile(filepath.Join(a1.Dir, name))
		b2, _ := os.ReadFile(filepath.Join(a2.Dir, name))
		if string(b1) != string(b2) {
			t.Errorf("%s differs between the builds", name)
		}
	}
}

func TestBrokenPatchNamesPatchAndHunkAndLeavesNothing(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	// The broken patch applies to the pristine tree but not after 0001: only checking the
	// series in order finds it.
	series := fixture.Patches(t, "0001-server-greeting.patch", "broken-stale-context.patch")
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, ""), series)
	e := newEnv(t)
	_, err := e.executor(t, fixture.Source(), series).Build(context.Background(), p, e.out)
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("Build() = %v, want a PatchError", err)
	}
	if pe.Patch != "broken-stale-context.patch" || strings.Join(pe.Hunks, ",") != "tools/server/server.cpp:2" {
		t.Errorf("PatchError = patch %s hunks %v, want broken-stale-context.patch at tools/server/server.cpp:2", pe.Patch, pe.Hunks)
	}
	for _, want := range []string{"broken-stale-context.patch", "hunk at tools/server/server.cpp:2 does not apply", "apply patches"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.out, p.Target)); !os.IsNotExist(err) {
		t.Errorf("a failed build left %s (stat: %v)", filepath.Join(e.out, p.Target), err)
	}
	got, _ := os.ReadFile(filepath.Join(e.work, p.Target+"-"+p.ShortHash(), "src", "tools", "server", "server.cpp"))
	want, _ := os.ReadFile(filepath.Join(fixture.Source(), "tools", "server", "server.cpp"))
	if string(got) != string(want) {
		t.Errorf("server.cpp was changed although the series did not apply:\n%s", got)
	}
}

func TestCompilerErrorShowsTailAndLog(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	series := fixture.Patches(t, "broken-compile.patch")
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, ""), series)
	e := newEnv(t)
	_, err := e.executor(t, fixture.Source(), series).Build(context.Background(), p, e.out)
	var ce *CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("Build() = %v, want a CommandError", err)
	}
	if !strings.Contains(ce.Tail, "server.cpp") || !strings.Contains(ce.Tail, "error:") {
		t.Errorf("error tail does not show the compiler's error:\n%s", ce.Tail)
	}
	if n := strings.Count(ce.Tail, "\n") + 1; n > tailLines {
		t.Errorf("tail has %d lines, want at most %d", n, tailLines)
	}
	if _, serr := os.Stat(ce.Log); serr != nil || !strings.Contains(err.Error(), "full log: "+ce.Log) {
		t.Errorf("error names log %s (stat %v): %v", ce.Log, serr, err)
	}
	if _, err := os.Stat(filepath.Join(e.out, p.Target)); !os.IsNotExist(err) {
		t.Errorf("a failed build left artifacts")
	}
}

func TestInterruptKeepsPreviousArtifacts(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git", "sleep")
	series := fixture.Patches(t, "0001-server-greeting.patch")
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, ""), series)
	e := newEnv(t)
	first := buildFixture(t, e, p, series)

	// The fixture's build sleeps $FAKELLAMA_SLEEP seconds; a unique value finds the process.
	const sleep = "97.25"
	t.Setenv("FAKELLAMA_SLEEP", sleep)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if sleeping(sleep) {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	_, err := e.executor(t, fixture.Source(), series).Build(ctx, p, e.out)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Build() = %v, want context.Canceled", err)
	}
	// Signals are delivered asynchronously: allow the killed processes a moment to go.
	for i := 0; sleeping(sleep); i++ {
		if i == 100 {
			out, _ := exec.Command("ps", "-eo", "pid,pgid,ppid,stat,cmd").Output()
			t.Errorf("the build's subprocesses outlived the interrupt by 5s:\n%s", out)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	again, err := artifacts.Open(first.Dir)
	if err != nil {
		t.Fatalf("previous artifacts after an interrupt: %v", err)
	}
	if fmt.Sprint(again.Manifest) != fmt.Sprint(first.Manifest) {
		t.Errorf("artifacts changed by an interrupted build")
	}
	if tmp, _ := filepath.Glob(filepath.Join(e.out, p.Target, ".tmp-*")); len(tmp) > 0 {
		t.Errorf("interrupted build left %v", tmp)
	}
}

// sleeping reports whether a "sleep arg" process is running.
func sleeping(arg string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err == nil && string(b) == "sleep\x00"+arg+"\x00" {
			return true
		}
	}
	return false
}

func TestGitMirrorSource(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	mirror := filepath.Join(t.TempDir(), "fakellama.git")
	work := filepath.Join(t.TempDir(), "checkout")
	gitEnv := append(os.Environ(), "GIT_AUTHOR_DATE=@1784810751 +0000", "GIT_COMMITTER_DATE=@1784810751 +0000",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_NOSYSTEM=1")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, gitEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := copyTree(context.Background(), fixture.Source(), work); err != nil {
		t.Fatal(err)
	}
	git(work, "init", "-q")
	git(work, "add", "-A")
	git(work, "commit", "-qm", "fakellama")
	commit := git(work, "rev-parse", "HEAD")
	// A later commit on the branch: the executor must build the plan's commit, not HEAD.
	os.WriteFile(filepath.Join(work, "tools", "server", "server.cpp"), []byte("this does not compile"), 0o644)
	git(work, "commit", "-qam", "later")
	git(filepath.Dir(mirror), "clone", "-q", "--mirror", work, mirror)

	series := fixture.Patches(t, "0001-server-greeting.patch")
	e := newEnv(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, commit), series)
	dir, err := e.executor(t, mirror, series).Build(context.Background(), p, e.out)
	if err != nil {
		t.Fatalf("Build() from a mirror = %v", err)
	}
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Provenance.Materials.Source.Commit != commit {
		t.Errorf("provenance commit = %s, want %s", a.Provenance.Materials.Source.Commit, commit)
	}
	// The host build did not run in the devel image: only the runtime image is a material.
	if im := a.Provenance.Materials.Images; len(im) != 1 || im[0].Role != "runtime" || im[0].Digest != p.Images.Runtime.Digest {
		t.Errorf("provenance images = %+v, want only the runtime image %s", im, p.Images.Runtime.Ref)
	}

	missing := strings.Repeat("1", 40)
	p2 := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, missing), series)
	_, err = e.executor(t, mirror, series).Build(context.Background(), p2, e.out)
	if err == nil || !strings.Contains(err.Error(), "does not have the plan's commit "+missing) || !strings.HasSuffix(err.Error(), " fetch origin "+missing) {
		t.Errorf("Build() of a commit the mirror lacks = %v, want it to end with the command that fetches it", err)
	}
}

func TestMissingToolsAreNamed(t *testing.T) {
	series := fixture.Patches(t, "0001-server-greeting.patch")
	tests := []struct {
		name   string
		target string
		path   string
		want   []string
	}{
		{"nothing on PATH", "cpu-v3", t.TempDir(), []string{"cmake", "ninja", "git", "a C++ compiler"}},
		{"a CUDA target without nvcc", "h200", os.Getenv("PATH"), []string{"nvcc (the CUDA toolkit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.target == "h200" {
				if _, err := exec.LookPath("nvcc"); err == nil {
					t.Skip("nvcc is installed here")
				}
				if _, err := os.Stat("/usr/local/cuda/bin/nvcc"); err == nil {
					t.Skip("nvcc is installed here")
				}
			}
			t.Setenv("PATH", tt.path)
			t.Setenv("CXX", "")
			p := fixture.Plan(t, tt.target, fixture.Recipe(t, ""), series)
			e := newEnv(t)
			_, err := e.executor(t, fixture.Source(), series).Build(context.Background(), p, e.out)
			if !errors.Is(err, errMissingTools) {
				t.Fatalf("Build() = %v, want missing tools", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestNewRefusesWorkDirInsideSource(t *testing.T) {
	src := t.TempDir()
	_, err := New(Options{Source: src, WorkDir: filepath.Join(src, "build")})
	if err == nil || !strings.Contains(err.Error(), "inside the source") || !inputerr.Is(err) {
		t.Errorf("New() = %v, want a refusal (the caller's mistake: exit 2)", err)
	}
	// the compiler flags that name the work directory split at spaces: refused before a build
	_, err = New(Options{Source: src, WorkDir: filepath.Join(t.TempDir(), "wd sp")})
	if err == nil || !strings.Contains(err.Error(), "holds a space") || !inputerr.Is(err) {
		t.Errorf("New() with a space in the work directory = %v, want a refusal", err)
	}
	// the default, under a $HOME with a space, likewise
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "x y"))
	_, err = New(Options{Source: src})
	if err == nil || !strings.Contains(err.Error(), "give --work-dir a path without spaces") {
		t.Errorf("New() under a cache directory with a space = %v, want a refusal", err)
	}
}

func TestParseApplyError(t *testing.T) {
	tests := []struct {
		name, out string
		want      []string
	}{
		{"one failed hunk", "error: patch failed: tools/server/server.cpp:2\nerror: tools/server/server.cpp: patch does not apply\n", []string{"tools/server/server.cpp:2"}},
		{"two files", "error: patch failed: a.c:10\nerror: a.c: patch does not apply\nerror: patch failed: dir/b.h:7\nerror: dir/b.h: patch does not apply\n", []string{"a.c:10", "dir/b.h:7"}},
		{"a missing file", "error: ggml/x.c: No such file or directory\n", []string{"ggml/x.c (missing)"}},
		{"a corrupt patch", "error: corrupt patch at line 7\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseApplyError(tt.out); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("parseApplyError() = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzParseApplyError(f *testing.F) {
	f.Add("error: patch failed: a.c:10\nerror: a.c: patch does not apply\n")
	f.Add("error: x: No such file or directory\n")
	f.Add("fatal: corrupt")
	f.Fuzz(func(t *testing.T, out string) {
		for _, h := range parseApplyError(out) {
			if h == "" || strings.Contains(h, "\n") {
				t.Errorf("parseApplyError(%q) gave place %q", out, h)
			}
		}
	})
}

// Two builds of one plan from callers with different locales share ccache's entries: the
// second, from a shell without LANG, compiles nothing.
func TestCCacheHitsWhateverTheCallersLocale(t *testing.T) {
	if _, err := exec.LookPath("ccache"); err != nil {
		t.Skip("ccache not found")
	}
	e := newEnv(t)
	series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), series)
	build := func(lang string) {
		t.Helper()
		t.Setenv("LANG", lang)
		t.Setenv("LC_CTYPE", lang)
		ex, err := New(Options{Source: fixture.Source(), WorkDir: t.TempDir(), CacheDir: e.cache, Series: series, Builder: pipeline.Builder{Version: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ex.Build(context.Background(), p, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	build("C.UTF-8")
	before := ccacheStats(t, e.cache)
	build("")
	after := ccacheStats(t, e.cache)
	hits := func(m map[string]int) int { return m["direct_cache_hit"] + m["preprocessed_cache_hit"] }
	if misses := after["cache_miss"] - before["cache_miss"]; misses != 0 || hits(after) == hits(before) {
		t.Errorf("the second build, from another locale: %d new misses, %d new hits; want only hits", misses, hits(after)-hits(before))
	}
}

// A running build logs ninja's progress with the elapsed time, so that a long build is not
// silent (issue 31).
func TestBuildLogsNinjaProgress(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	series := fixture.Patches(t, "0001-server-greeting.patch")
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, "", rpathOrigin), series)
	e := newEnv(t)
	var logs bytes.Buffer
	ex, err := New(Options{Source: fixture.Source(), WorkDir: e.work, CacheDir: e.cache, Series: series, Builder: pipeline.Builder{Version: "test"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), ProgressEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Build(context.Background(), p, e.out); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg=building target=cpu-v3 plan=`+p.ShortHash()+` step=(\d+)/(\d+) elapsed=\S+`).FindAllStringSubmatch(logs.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no progress lines in the log:\n%s", logs.String())
	}
	if last := m[len(m)-1]; last[1] != last[2] {
		t.Errorf("the last progress line says step %s of %s, want the last step", last[1], last[2])
	}
}

// The work directory's lock is inherited by what a build's commands start, so an llbuild killed
// outright (its own file closed, never unlocked) still keeps a second build out of the directory
// while a process the first started, here a grandchild, still runs; once that exits, the lock
// is free.
func TestTheLockOutlivesAKilledBuildUntilItsProcessesExit(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep")
	}
	name := filepath.Join(t.TempDir(), "w.lock")
	held, _, err := lock(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := command{dir: dir, log: filepath.Join(dir, "cmd.log"), args: []string{"sh", "-c", "sleep 2 & exit 0"}, hold: held}
	if err := c.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	held.Close() // llbuild killed: its file closed by the kernel, no LOCK_UN
	if _, unlock, err := lock(name); err == nil {
		unlock()
		t.Fatal("a second build took the lock while the first one's process still ran")
	} else if !strings.Contains(err.Error(), "fuser") {
		t.Errorf("refusal %q does not say how to find the processes", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, unlock, err := lock(name)
		if err == nil {
			unlock()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock was still held 10 s after the last process: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
