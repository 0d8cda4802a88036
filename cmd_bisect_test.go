package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llbuild/llbuild/bisect"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/daggerexec"
	"github.com/llbuild/llbuild/pipeline/hostexec"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// upstreamHistory makes a git history of the fixture tree, upstream's shape: twelve commits
// after the first, one a day, subjects ending in their PR number. Commit 6 breaks the build and
// 7 mends it; commit 8 (PR 8008) puts the server on a "slow path", the change the bisect must
// find. docs/ops/big.csv is in every commit but its blob is deleted, as the mirrors of upstream
// lack vocabulary files: a checkout fails, an archive without it builds.
func upstreamHistory(t *testing.T) (dir string, commits []string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "llama.cpp")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(gitfixture.Root(), "pipeline", "testdata", "fakellama"))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "docs", "ops"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit := func(name, old, new string) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("%s lacks %q (%v)", name, old, err)
		}
		write(name, strings.Replace(string(b), old, new, 1))
	}
	write("docs/ops/big.csv", strings.Repeat("op,backend,supported\n", 100))
	git := func(when int64, args ...string) string { return gitfixture.Git(t, dir, when, args...) }
	git(0, "init", "--quiet", "--initial-branch=master")
	for i := 0; i <= 12; i++ {
		subject := fmt.Sprintf("docs : note %d (#%d)", i, 8000+i)
		write("docs/notes.md", strings.Repeat("note\n", i+1))
		switch i {
		case 6:
			edit("ggml/src/ggml.c", "#include", "#error upstream broke the build for a day\n#include")
			subject = "ggml : refactor (#8006)"
		case 7:
			edit("ggml/src/ggml.c", "#error upstream broke the build for a day\n", "")
			subject = "ggml : fix the build (#8007)"
		case 8:
			edit("tools/server/server.cpp", `"fake llama-server"`, `"fake llama-server (slow path)"`)
			subject = "server : take the slow path (#8008)"
		}
		git(0, "add", "-A")
		git(1700000000+int64(i)*86400, "commit", "--quiet", "-m", subject)
		commits = append(commits, git(0, "rev-parse", "HEAD"))
	}
	git(0, "tag", "b100", commits[0])
	blob := git(0, "rev-parse", "HEAD:docs/ops/big.csv")
	if err := os.Remove(filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatalf("removing the blob of docs/ops/big.csv: %v", err)
	}
	return dir, commits
}

// cpuServerRecipe is what a campaign builds its probes from here: the cpu-v3 target and the
// built-in server recipe.
func cpuServerRecipe(t *testing.T) (*targets.Target, *recipes.Recipe) {
	t.Helper()
	tgt, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	recipe, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	return tgt, recipe
}

// bisectTemplate builds the good end (b100) of the fixture history with ex as the campaign in
// camp builds it (so the campaign reuses it) and bundles it with a tiny model as the template;
// it returns an empty series file (the probes carry no patch) and the template.
func bisectTemplate(t *testing.T, repo, camp string, ex pipeline.Executor) (empty, template string) {
	t.Helper()
	empty = filepath.Join(t.TempDir(), "none.series")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tgt, recipe := cpuServerRecipe(t)
	good, err := gitref.Resolve(context.Background(), repo, "b100")
	if err != nil {
		t.Fatal(err)
	}
	pb := &bisect.PlanBuilder{Repo: repo, Target: tgt, Recipe: recipe, Series: []patches.Patch{}, Executor: ex, Out: filepath.Join(camp, "artifacts")}
	built, err := pb.Build(context.Background(), good)
	if err != nil {
		t.Fatalf("building the good end: %v", err)
	}
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	template = filepath.Join(t.TempDir(), "template")
	if code, _, stderr := runCLI(t, "bundle", "-t", "cpu-v3", "--artifacts", built.Dir, "--model", model, "-o", template,
		"--threads", "2", "--server-arg=--no-warmup", "--env", "GGML_CUDA_DISABLE_GRAPHS=1"); code != exitOK {
		t.Fatalf("bundling the template: exit %d\n%s", code, stderr)
	}
	return empty, template
}

// useTreeBencher has the test's campaigns measure with the treeBencher it returns.
func useTreeBencher(t *testing.T) *treeBencher {
	t.Helper()
	fake := &treeBencher{rng: rand.New(rand.NewSource(7))}
	old := bisectBencher
	t.Cleanup(func() { bisectBencher = old })
	bisectBencher = func(m *bisect.BenchMeasurer) bisect.Bencher {
		fake.m = m
		return fake
	}
	return fake
}

// treeBencher stands for the GPU bench where no model can show a speed step: each side is
// bundled from the template as the real bench bundles it, and its llama-server (the fixture's)
// is run; a server that says it takes the slow path reads 80 tok/s, any other 100, each run
// with ±1% noise.
type treeBencher struct {
	m   *bisect.BenchMeasurer
	mu  sync.Mutex
	rng *rand.Rand
	ran []string
}

func (f *treeBencher) Measure(ctx context.Context, a, b bisect.Side, rounds int) (*bisect.Measurement, error) {
	speed := map[string]float64{}
	for _, s := range []bisect.Side{a, b} {
		bundle, err := f.m.Bundle(ctx, s)
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, filepath.Join(bundle.Dir, "bin", "llama-server"))
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(bundle.Dir, "lib"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("running %s's server: %v: %s", s.Commit.Short(), err, out)
		}
		speed[s.Commit.Hash] = 100
		if strings.Contains(string(out), "slow path") {
			speed[s.Commit.Hash] = 80
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, b.Commit.Short())
	m := &bisect.Measurement{A: a.Commit.Hash, B: b.Commit.Hash}
	for r := 0; r < rounds; r++ {
		av := speed[a.Commit.Hash] * (1 + 0.01*(2*f.rng.Float64()-1))
		bv := speed[b.Commit.Hash] * (1 + 0.01*(2*f.rng.Float64()-1))
		m.AValue, m.BValue, m.Ratios = append(m.AValue, av), append(m.BValue, bv), append(m.Ratios, bv/av)
	}
	return m, nil
}

// A real bisect end to end: a generated upstream history built by the host executor at each
// probe, each bundled from a template bundle; the measurement is read from the built tree.
// Stopped after two measurements and resumed, it names commit 8 and its PR, skips the commit
// whose build fails, and keeps its log.
func TestBisectFindsTheCommitInABuiltHistory(t *testing.T) {
	needDemoTools(t)
	repo, commits := upstreamHistory(t)
	camp, work := filepath.Join(t.TempDir(), "campaign"), t.TempDir()
	ex, err := hostexec.New(hostexec.Options{Source: repo, WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	empty, template := bisectTemplate(t, repo, camp, ex)
	fake := useTreeBencher(t)
	common := []string{"--dir", camp, "--source", repo, "--executor", "host", "--work-dir", work}
	code, stdout, stderr := runCLI(t, append([]string{"bisect", "run", "--good", "b100", "--bad", "master", "-t", "cpu-v3",
		"--template", template, "--series", empty, "--max-probes", "2"}, common...)...)
	if code != exitOK || !strings.Contains(stdout, "probing: ") {
		t.Fatalf("first part: exit %d, want 0 and the campaign still probing\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "lacks some files") || !strings.Contains(stderr, "docs/ops/big.csv") {
		t.Errorf("the missing blob was not named on stderr:\n%s", stderr)
	}
	// Resumed as on another machine would be: only --dir and --source.
	code, stdout, stderr = runCLI(t, append([]string{"bisect", "run", "--json"}, common...)...)
	if code != exitOK {
		t.Fatalf("resumed: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var sum struct {
		Inert   *bisect.Inert
		Phase   string
		Culprit *gitref.Commit
		Probes  []bisect.Probe
		Confirm *bisect.Probe
		Ends    *bisect.Probe
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if sum.Phase != bisect.PhaseDone || sum.Culprit == nil || sum.Culprit.Hash != commits[8] || sum.Culprit.PR != 8008 {
		t.Fatalf("phase %s culprit %+v, want done at commit 8 (%s, PR 8008)\n%s", sum.Phase, sum.Culprit, commits[8], stdout)
	}
	if sum.Confirm == nil || sum.Confirm.Verdict != bisect.Bad || sum.Confirm.Against != commits[7] {
		t.Errorf("confirmation %+v, want commit 8 bad against commit 7", sum.Confirm)
	}
	if sum.Ends == nil || sum.Ends.Measurement.Median > 0.85 || sum.Ends.Measurement.Median < 0.75 {
		t.Errorf("ends %+v, want bad/good near 0.8", sum.Ends)
	}
	verdicts := map[string]string{}
	for _, p := range sum.Probes {
		verdicts[p.Commit.Hash] = p.Verdict
		if p.Commit.Hash == commits[6] && (p.Verdict != bisect.Skip || !strings.Contains(p.Reason, "upstream broke the build")) {
			t.Errorf("commit 6: %s %q, want skipped with the compiler's error", p.Verdict, p.Reason)
		}
	}
	// Commits 1-5 and 9-12 change docs/notes.md alone, which no build reads: never built, and
	// the bad end builds as commit 8 does, so 8 is named without a probe of its own.
	if verdicts[commits[6]] != bisect.Skip || verdicts[commits[7]] != bisect.Good || len(verdicts) != 2 {
		t.Errorf("verdicts %v, want commit 6 skipped and 7 good, nothing else probed", verdicts)
	}
	if sum.Inert == nil || fmt.Sprint(sum.Inert.Commits) != "[1 2 3 4 5 9 10 11 12]" || sum.Inert.Reads < 10 {
		t.Errorf("inert %+v, want commits 1-5 and 9-12 from the builds' reads", sum.Inert)
	}
	// Each probe's bundle is the template re-made: the same arguments and environment.
	for _, want := range []string{"--threads", "--no-warmup"} {
		matches, _ := filepath.Glob(filepath.Join(camp, "bundles", commits[8][:9]+"-*", "manifest.json"))
		if len(matches) != 1 {
			t.Fatalf("bundles of commit 8: %v", matches)
		}
		m, _ := os.ReadFile(matches[0])
		if !strings.Contains(string(m), want) || !strings.Contains(string(m), "GGML_CUDA_DISABLE_GRAPHS") {
			t.Errorf("commit 8's bundle lacks the template's %s or its environment", want)
		}
	}
	// The log reads back the same, as text too.
	code, text, _ := runCLI(t, "bisect", "log", camp)
	t.Logf("llbuild bisect log:\n%s", text)
	if code != exitOK || !strings.Contains(text, "culprit:   "+commits[8]+" server : take the slow path (#8008)") || !strings.Contains(text, "confirm:") || !strings.Contains(text, "inert:     9 of 12 commits") {
		t.Errorf("bisect log: exit %d\n%s", code, text)
	}
	// A log carried apart from its campaign, under another name, reads the same.
	copied := filepath.Join(t.TempDir(), "ds.log")
	if b, err := os.ReadFile(filepath.Join(camp, "bisect.log")); err != nil || os.WriteFile(copied, b, 0o644) != nil {
		t.Fatalf("copying the log: %v", err)
	}
	if code, fromFile, stderr := runCLI(t, "bisect", "log", copied); code != exitOK || fromFile != text {
		t.Errorf("bisect log FILE: exit %d, and the text differs from the campaign's:\n%s\n%s", code, fromFile, stderr)
	}
	// --next names a commit the source must hold.
	if code, _, stderr := runCLI(t, append([]string{"bisect", "run", "--next", "nonesuch"}, common...)...); code != exitUsage || !strings.Contains(stderr, "--next") {
		t.Errorf("--next nonesuch: exit %d, want %d naming --next\n%s", code, exitUsage, stderr)
	}
	// A campaign done does nothing more when run again.
	n := len(fake.ran)
	if code, _, stderr := runCLI(t, append([]string{"bisect", "run"}, common...)...); code != exitOK || len(fake.ran) != n {
		t.Errorf("run after done: exit %d, %d more measurements\n%s", code, len(fake.ran)-n, stderr)
	}
}

func TestBisectUsage(t *testing.T) {
	repo, _ := upstreamHistory(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no source", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host"}, "needs --source"},
		{"not a repository", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", t.TempDir()}, "is not a git repository"},
		{"nothing to resume", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", repo}, "--good is needed"},
		{"bad metric and rounds", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", repo, "--good", "b100", "--bad", "master", "-t", "cpu-v3", "--template", t.TempDir(), "--metric", "speed", "--rounds", "1"}, "--metric \"speed\""},
		{"reversed range", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", repo, "--good", "master", "--bad", "b100", "-t", "cpu-v3", "--template", t.TempDir()}, "is not an ancestor"},
		{"unknown commit", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", repo, "--good", "b99", "--bad", "master", "-t", "cpu-v3", "--template", t.TempDir()}, "has no commit \"b99\""},
		{"negative threshold", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", repo, "--good", "b100", "--bad", "master", "-t", "cpu-v3", "--template", t.TempDir(), "--threshold", "-3"}, "--threshold -3: give a probe/good ratio above 0 and not 1"},
		{"threshold of 1", []string{"bisect", "run", "--dir", t.TempDir(), "--executor", "host", "--source", repo, "--good", "b100", "--bad", "master", "-t", "cpu-v3", "--template", t.TempDir(), "--threshold", "1"}, "--threshold 1: give"},
		{"log of nothing", []string{"bisect", "log", t.TempDir()}, "has no bisect.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d stdout %q stderr %q; want exit 2 saying %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// The Dagger executor's builds name the same inert commits as the host executor's: the good end
// of the fixture history built by each, what each build read, and the commits of the range that
// change none of it (every docs-only commit; not 6, 7 and 8, which edit sources the build read).
func TestBisectInertWithTheEngine(t *testing.T) {
	needDemoTools(t)
	enginetest.Engine(t)
	repo, commits := upstreamHistory(t)
	ctx := context.Background()
	path, err := gitref.Path(ctx, repo, commits[0], commits[len(commits)-1])
	if err != nil {
		t.Fatal(err)
	}
	tgt, recipe := cpuServerRecipe(t)
	engine, err := daggerexec.New(daggerexec.Options{Source: repo, Devel: "oci-archive:" + enginetest.DevelImage(t), Series: []patches.Patch{},
		Builder: pipeline.Builder{Version: "test"}, ReadsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	host, err := hostexec.New(hostexec.Options{Source: repo, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	inert := map[string][]int{}
	for name, ex := range map[string]pipeline.Executor{"engine": engine, "host": host} {
		pb := &bisect.PlanBuilder{Repo: repo, Target: tgt, Recipe: recipe, Series: []patches.Patch{}, Executor: ex, Out: t.TempDir()}
		if _, err := pb.Build(ctx, path[0]); err != nil {
			t.Fatalf("%s: building the good end: %v", name, err)
		}
		in, err := pb.Inert(ctx, path, path[:1])
		if err != nil || in == nil {
			t.Fatalf("%s: Inert = %v, %v: want the commits that change nothing its build read", name, in, err)
		}
		inert[name] = in.Commits
	}
	if want := []int{1, 2, 3, 4, 5, 9, 10, 11, 12}; !slices.Equal(inert["engine"], want) || !slices.Equal(inert["host"], want) {
		t.Errorf("inert commits: engine %v, host %v; want %v (the docs-only ones)", inert["engine"], inert["host"], want)
	}
}

// The same campaign through the Dagger executor, the default one, in one run: each probe built
// by the engine in the stand-in devel image, what the builds read listed in their containers,
// so that the docs-only commits are never built; it names commit 8.
func TestBisectThroughTheEngine(t *testing.T) {
	needDemoTools(t)
	enginetest.Engine(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the engine's builds keep what they read
	repo, commits := upstreamHistory(t)
	camp := filepath.Join(t.TempDir(), "campaign")
	devel := "oci-archive:" + enginetest.DevelImage(t)
	engine, err := daggerexec.New(daggerexec.Options{Source: repo, Devel: devel, Series: []patches.Patch{}, Builder: pipeline.Builder{Version: version}})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	empty, template := bisectTemplate(t, repo, camp, engine)
	useTreeBencher(t)
	code, stdout, stderr := runCLI(t, "bisect", "run", "--good", "b100", "--bad", "master", "-t", "cpu-v3", "--template", template,
		"--series", empty, "--dir", camp, "--source", repo, "--executor", "dagger", "--base", "devel="+devel, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var sum struct {
		Inert   *bisect.Inert
		Phase   string
		Culprit *gitref.Commit
		Probes  []bisect.Probe
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if sum.Phase != bisect.PhaseDone || sum.Culprit == nil || sum.Culprit.Hash != commits[8] {
		t.Fatalf("phase %s culprit %+v, want done at commit 8 (%s)\n%s", sum.Phase, sum.Culprit, commits[8], stdout)
	}
	if sum.Inert == nil || fmt.Sprint(sum.Inert.Commits) != "[1 2 3 4 5 9 10 11 12]" {
		t.Errorf("inert %+v, want commits 1-5 and 9-12 from what the engine's builds read", sum.Inert)
	}
	var probed []string
	for _, p := range sum.Probes {
		probed = append(probed, p.Commit.Short()+" "+p.Verdict)
	}
	if want := []string{commits[6][:9] + " " + bisect.Skip, commits[7][:9] + " " + bisect.Good}; !slices.Equal(probed, want) {
		t.Errorf("probes %v, want %v: commit 6 does not build, 7 is good, nothing else probed", probed, want)
	}
}
