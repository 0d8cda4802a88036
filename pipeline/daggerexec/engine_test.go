package daggerexec

// The executor against a real Dagger engine (internal/enginetest) on the fixture project: what
// the recording fake cannot show, that the engine runs what the queries describe. Every test
// skips without the engine's environment and fails under CI=true.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/internal/pybuild"
	"github.com/llbuild/llbuild/internal/testwriter"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/hostexec"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
	"github.com/llbuild/llbuild/targets"
)

// engineOptions are the options of a build on the real engine: the stand-in devel image, the
// fixture source and series, and a log of the engine's progress whose end the test shows when
// it fails. It skips the test (fails it in CI) without the engine.
func engineOptions(t *testing.T, series []patches.Patch) (Options, *testwriter.Buffer) {
	t.Helper()
	enginetest.Engine(t)
	log := &testwriter.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the engine's progress, last lines:\n%s", lastLines(strings.TrimRight(log.String(), "\n"), 60))
		}
	})
	return Options{
		Source:    fixture.Source(),
		Devel:     "oci-archive:" + enginetest.DevelImage(t),
		Series:    series,
		Builder:   pipeline.Builder{Version: "test"},
		LogOutput: log,
		ReadsDir:  t.TempDir(),
	}, log
}

func newEngineExecutor(t *testing.T, opts Options) *Executor {
	t.Helper()
	ex, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// sourceCopy copies the fixture source into a new directory, with a file of random content
// beside the project's that the build never reads: the engine keys its cache on the source's
// content, so a build of the copy runs configure, compile and link again instead of returning
// an earlier result. edit, when given, changes the copy.
func sourceCopy(t *testing.T, edit func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fakellama")
	if err := os.CopyFS(dir, os.DirFS(fixture.Source())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llbuild-test-nonce"), []byte(rand.Text()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(dir)
	}
	return dir
}

// archiveDigest is the digest of the one image in an OCI archive.
func archiveDigest(t *testing.T, archive string) string {
	t.Helper()
	m, err := ocitar.IndexManifest(archive)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ocitar.OnlyDigest(m)
	if err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	return d
}

// standInTarget is cpu-v3 with the stand-in runtime archive as its runtime image, pinned by
// the archive's digest, so that the image package accepts the archive as the plan's base.
func standInTarget(t *testing.T, runtimeArchive string) *targets.Target {
	t.Helper()
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	tg.Build.Images.Runtime = "llbuild-standin-runtime:bookworm@" + archiveDigest(t, runtimeArchive)
	return tg
}

func openArtifacts(t *testing.T, dir string) *artifacts.Artifacts {
	t.Helper()
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatalf("artifacts.Open(%s) = %v", dir, err)
	}
	return a
}

// imageDigest assembles the runtime image from the artifacts as `llbuild build` does, on the
// runtime base archive, and returns its digest.
func imageDigest(t *testing.T, a *artifacts.Artifacts, runtimeArchive string) string {
	t.Helper()
	p, err := image.PlanOf(a)
	if err != nil {
		t.Fatal(err)
	}
	base, err := image.LoadBase(context.Background(), "oci-archive:"+runtimeArchive, p.Images.Runtime)
	if err != nil {
		t.Fatalf("image.LoadBase() = %v", err)
	}
	img, err := image.Assemble(base, a)
	if err != nil {
		t.Fatalf("image.Assemble() = %v", err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func runBuilt(t *testing.T, a *artifacts.Artifacts, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(a.Dir, "llama-server"), args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+a.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("llama-server %v (built in the engine, run here): %v\n%s", args, err, out)
	}
	return string(out)
}

func TestEngineBuildsTheFixture(t *testing.T) {
	series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	opts, _ := engineOptions(t, series)
	runtime := enginetest.RuntimeImage(t)
	p := fixture.PlanFor(t, standInTarget(t, runtime), fixture.Recipe(t, ""), series)
	out := t.TempDir()
	dir, err := newEngineExecutor(t, opts).Build(context.Background(), p, out)
	if err != nil {
		t.Fatalf("Build() = %v", err)
	}
	a := openArtifacts(t, dir)

	t.Run("artifacts and provenance are written", func(t *testing.T) {
		kinds := map[string]string{}
		for _, f := range a.Manifest.Files {
			kinds[f.Path] = f.Kind
		}
		for name, kind := range map[string]string{
			"llama-server": artifacts.KindExecutable, "libllama.so": artifacts.KindLibrary,
			"libggml-base.so.0": artifacts.KindLibrary, "libggml-cpu.so.0.9.4": artifacts.KindLibrary,
		} {
			if kinds[name] != kind {
				t.Errorf("artifacts.json: %s is %q, want %q (all: %v)", name, kinds[name], kind, kinds)
			}
		}
		if a.Manifest.Target != p.Target || a.Manifest.PlanHash != p.Hash {
			t.Errorf("artifacts.json = target %s plan %s, want %s %s", a.Manifest.Target, a.Manifest.PlanHash, p.Target, p.Hash)
		}
		if a.Provenance.Builder.Executor != pipeline.ExecutorDagger || a.Provenance.PlanHash != p.Hash {
			t.Errorf("provenance.json = executor %q plan %s, want dagger %s", a.Provenance.Builder.Executor, a.Provenance.PlanHash, p.Hash)
		}
		var applied []string
		for _, pp := range a.Provenance.Materials.Patches {
			applied = append(applied, pp.Name)
		}
		if got, want := strings.Join(applied, " "), "0001-server-greeting.patch 0002-ggml-cpu-build-info.patch"; got != want {
			t.Errorf("provenance.json patches = %s, want %s", got, want)
		}
		if left, _ := filepath.Glob(filepath.Join(out, ".export-*")); len(left) > 0 {
			t.Errorf("export directories left: %v", left)
		}
	})

	t.Run("the patches are in the binaries", func(t *testing.T) {
		// The stand-in devel image is Debian bookworm, like this machine: its binaries run here.
		if got, want := runBuilt(t, a), "fake llama-server (patched by llbuild): dot(64) = 128.0\n"; got != want {
			t.Errorf("llama-server says %q, want %q (0001's greeting)", got, want)
		}
		info := runBuilt(t, a, "--build-info")
		// The plan's ISA, and __DATE__/__TIME__ from the plan's SOURCE_DATE_EPOCH.
		wantDate := "built: " + time.Unix(fixture.Epoch, 0).UTC().Format("Jan _2 2006 15:04:05")
		for _, want := range []string{"patched: 0002\n", "isa: SSE42 AVX AVX2 FMA F16C BMI2\n", " GGML_AVX512=OFF", wantDate} {
			if !strings.Contains(info, want) {
				t.Errorf("--build-info lacks %q:\n%s", want, info)
			}
		}
		if strings.Contains(info, "server: /") {
			t.Errorf("__FILE__ names the container's source directory:\n%s", info)
		}
	})

	t.Run("a second session gives the same bytes and image", func(t *testing.T) {
		dir2, err := newEngineExecutor(t, opts).Build(context.Background(), p, t.TempDir())
		if err != nil {
			t.Fatalf("second Build() = %v", err)
		}
		a2 := openArtifacts(t, dir2)
		sameFiles(t, a, a2, artifacts.ManifestFile, artifacts.ProvenanceFile)
		if d1, d2 := imageDigest(t, a, runtime), imageDigest(t, a2, runtime); d1 != d2 {
			t.Errorf("runtime images = %s and %s, want one digest", d1, d2)
		}
	})

	t.Run("a rebuild past the engine's cache gives the same bytes and image", func(t *testing.T) {
		// The engine answers a second build of the same inputs from its cache: only a source
		// it has not seen makes it configure, compile and link again.
		opts2, log2 := engineOptions(t, series)
		opts2.Source = sourceCopy(t, nil)
		dir2, err := newEngineExecutor(t, opts2).Build(context.Background(), p, t.TempDir())
		if err != nil {
			t.Fatalf("second Build() = %v", err)
		}
		if !strings.Contains(log2.String(), "Linking CXX executable bin/llama-server") {
			t.Errorf("the second build did not link llama-server: the engine answered from its cache")
		}
		a2 := openArtifacts(t, dir2)
		sameFiles(t, a, a2, artifacts.ManifestFile)
		// Provenance records the plain-directory source's content hash, which the copy's extra
		// file changes; everything else in it is the same.
		t1, t2 := a.Provenance.Materials.Source.Tree, a2.Provenance.Materials.Source.Tree
		if t1 == "" || t1 == t2 {
			t.Errorf("provenance source trees = %q and %q, want two different hashes", t1, t2)
		}
		pv1, pv2 := a.Provenance, a2.Provenance
		pv1.Materials.Source.Tree, pv2.Materials.Source.Tree = "", ""
		if j1, j2 := mustJSON(t, pv1), mustJSON(t, pv2); j1 != j2 {
			t.Errorf("provenance differs beyond the source tree:\n%s\n%s", j1, j2)
		}
		if d1, d2 := imageDigest(t, a, runtime), imageDigest(t, a2, runtime); d1 != d2 {
			t.Errorf("runtime images = %s and %s, want one digest", d1, d2)
		}
	})
}

// sameFiles checks that two artifact directories hold the same files, byte for byte: the
// named ones and every file artifacts.json lists.
func sameFiles(t *testing.T, a, b *artifacts.Artifacts, names ...string) {
	t.Helper()
	if len(a.Manifest.Files) != len(b.Manifest.Files) {
		t.Fatalf("the builds wrote %d and %d files", len(a.Manifest.Files), len(b.Manifest.Files))
	}
	for _, f := range a.Manifest.Files {
		if f.Link == "" {
			names = append(names, f.Path)
		}
	}
	for _, name := range names {
		b1, err1 := os.ReadFile(filepath.Join(a.Dir, name))
		b2, err2 := os.ReadFile(filepath.Join(b.Dir, name))
		if err1 != nil || err2 != nil {
			t.Errorf("reading %s: %v, %v", name, err1, err2)
		} else if !bytes.Equal(b1, b2) {
			t.Errorf("%s differs between the builds (sha256 %x and %x)", name, sha256.Sum256(b1), sha256.Sum256(b2))
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEnginePatchErrorNamesPatchAndHunk(t *testing.T) {
	// The broken patch applies to the pristine tree but not after 0001.
	series := fixture.Patches(t, "0001-server-greeting.patch", "broken-stale-context.patch")
	opts, _ := engineOptions(t, series)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, ""), series)
	parent := t.TempDir()
	out := filepath.Join(parent, "out") // made by the build, and so removed by a failed one
	_, err := newEngineExecutor(t, opts).Build(context.Background(), p, out)
	var pe *PatchError
	if !errors.As(err, &pe) {
		t.Fatalf("Build() = %v, want a PatchError", err)
	}
	if pe.Patch != "broken-stale-context.patch" || strings.Join(pe.Hunks, ",") != "tools/server/server.cpp:2" {
		t.Errorf("PatchError = patch %s hunks %v, want broken-stale-context.patch at tools/server/server.cpp:2", pe.Patch, pe.Hunks)
	}
	for _, want := range []string{"target cpu-v3", "hunk at tools/server/server.cpp:2 does not apply", "error: tools/server/server.cpp: patch does not apply"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(parent, "*")); len(m) > 0 {
		t.Errorf("a failed build left %v", m)
	}
}

func TestEngineCompileErrorShowsCommandAndTail(t *testing.T) {
	series := fixture.Patches(t, "0001-server-greeting.patch")
	opts, _ := engineOptions(t, series)
	opts.Source = sourceCopy(t, func(dir string) {
		f := filepath.Join(dir, "tools", "server", "server.cpp")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, append(b, "int llbuild_broken = ;\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, ""), series)
	out := t.TempDir()
	_, err := newEngineExecutor(t, opts).Build(context.Background(), p, out)
	var ee *ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("Build() = %v, want an ExecError", err)
	}
	if got, want := strings.Join(ee.Cmd, " "), "cmake --build /build --target llama-server"; got != want || ee.ExitCode != 1 {
		t.Errorf("ExecError = %q exit %d, want %q exit 1", got, ee.ExitCode, want)
	}
	for _, want := range []string{"server.cpp:20:", "error: expected primary-expression", "llbuild_broken", "ninja: build stopped: subcommand failed."} {
		if !strings.Contains(ee.Tail, want) {
			t.Errorf("the tail lacks %q:\n%s", want, ee.Tail)
		}
	}
	if n := len(strings.Split(ee.Tail, "\n")); n > tailLines {
		t.Errorf("the tail has %d lines, want at most %d", n, tailLines)
	}
	if !strings.Contains(err.Error(), "target cpu-v3") || !strings.Contains(err.Error(), "exited with 1 in the engine") {
		t.Errorf("error = %v, want the target and the exit code", err)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*")); len(m) > 0 {
		t.Errorf("a failed build left %v", m)
	}
}

// countingCLI puts a wrapper around the dagger CLI that the SDK starts for each engine
// session (`dagger session`), and returns the file where each start is written: the number of
// sessions is seen from outside the executor, not read back from its fields.
func countingCLI(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(enginetest.CLIBinEnv)
	if bin == "" {
		bin = "dagger"
	}
	real, err := exec.LookPath(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	wrapper := filepath.Join(dir, "dagger")
	script := "#!/bin/sh\necho \"$*\" >> '" + starts + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(enginetest.CLIBinEnv, wrapper)
	return starts
}

// Two builds side by side (BuildAll with 2 jobs) each run in an engine session of their own, so
// each build's progress is read from its own log (issue 31: on one shared session each build's
// progress followed both ninjas, its step going back and forth), and the engine's log says
// which build each line is from.
func TestEngineBuildsSideBySideEachInItsOwnSession(t *testing.T) {
	series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	opts, engineLog := engineOptions(t, series)
	starts := countingCLI(t)
	// Both builds really run, side by side: a source copy the engine has not seen.
	opts.Source = sourceCopy(t, nil)
	var logs testwriter.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	opts.ProgressEvery = 5 * time.Millisecond
	v4, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	v4.Name = "cpu-v4"
	v4.Build.ISA["GGML_AVX512"] = true
	r := fixture.Recipe(t, "")
	plans := []*pipeline.Plan{fixture.Plan(t, "cpu-v3", r, series), fixture.PlanFor(t, v4, r, series)}

	ex := newEngineExecutor(t, opts)
	res := pipeline.BuildAll(context.Background(), ex, plans, t.TempDir(), 2)
	cpuLibs := map[string]string{}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", plans[i].Target, r.Err)
		}
		a := openArtifacts(t, r.Dir)
		if r.Plan != plans[i] || a.Manifest.Target != plans[i].Target || a.Manifest.PlanHash != plans[i].Hash {
			t.Errorf("result %d = %s of plan %s, want %s of %s", i, a.Manifest.Target, a.Manifest.PlanHash, plans[i].Target, plans[i].Hash)
		}
		for _, f := range a.Manifest.Files {
			if f.Path == "libggml-cpu.so.0.9.4" {
				cpuLibs[plans[i].Target] = f.SHA256
			}
		}
	}
	if len(cpuLibs) != 2 || cpuLibs["cpu-v3"] == cpuLibs["cpu-v4"] {
		t.Errorf("libggml-cpu sha256 by target = %v, want two different builds", cpuLibs)
	}
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatalf("the dagger CLI was never started: %v", err)
	}
	var sessions []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(l, "session") {
			sessions = append(sessions, l)
		}
	}
	if len(sessions) != 2 {
		t.Errorf("engine sessions started = %d (%q), want one for each build", len(sessions), sessions)
	}
	// Each build's progress: ninja's steps of that build only, so never going back.
	step := regexp.MustCompile(`msg=building target=(\S+) plan=\S+ step=(\d+)/(\d+)`)
	last := map[string]int{}
	for _, l := range strings.Split(logs.String(), "\n") {
		m := step.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if n < last[m[1]] {
			t.Errorf("%s's progress went back from step %d to %s: %q", m[1], last[m[1]], m[2], l)
		}
		last[m[1]] = n
	}
	if len(last) != 2 {
		t.Errorf("progress lines of %d builds, want 2:\n%s", len(last), logs.String())
	}
	// The engine's log: every line headed by its build, and each build's export is in its
	// own lines only.
	unlabelled := 0
	for _, l := range strings.Split(strings.TrimRight(engineLog.String(), "\n"), "\n") {
		own, _, ok := strings.Cut(l, " | ")
		if !ok || (own != "cpu-v3" && own != "cpu-v4") {
			if unlabelled++; unlabelled == 1 {
				t.Errorf("an engine log line without its build: %q", l)
			}
			continue
		}
		for _, p := range plans {
			if strings.Contains(l, ".export-"+p.Target+"-") && p.Target != own {
				t.Errorf("%s's export in a line of %s: %q", p.Target, own, l)
			}
		}
	}
	if unlabelled > 1 {
		t.Errorf("%d engine log lines without their build", unlabelled)
	}
}

// layerTime is the mtime of the files in the test's layers.
var layerTime = time.Unix(fixture.Epoch, 0).UTC()

// sitePackages is where Debian's python3 finds Debian's Python packages.
const sitePackages = "usr/lib/python3/dist-packages"

// distInfoVersions reads name-version.dist-info directory names in a site-packages directory.
func distInfoVersions(t *testing.T, site string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(site)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]string{}
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".dist-info"); ok {
			name, ver, _ := strings.Cut(n, "-")
			v[strings.ReplaceAll(strings.ToLower(name), "_", "-")] = ver
		}
	}
	return v
}

// develWithPythonTools is the stand-in devel image with Debian sid's python-build,
// scikit-build-core and what they need (internal/pybuild) added as one layer in its
// dist-packages: an image that carries the pinned build tools, as an air-gapped user's would.
// The layer replaces the image's older copies (bookworm's build 0.9.0 and packaging 23.0):
// their directories are made opaque and their .dist-info whited out, so that one version of
// each is left for Python and importlib.metadata to find. The archive is kept in pybuild's
// cache, keyed by the devel image's digest and the packages.
func develWithPythonTools(t *testing.T, devel, site string) string {
	t.Helper()
	pkgs, err := os.ReadFile(filepath.Join(site, "..", "..", "..", "..", "packages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	key := sha256.Sum256([]byte(archiveDigest(t, devel) + "\n" + string(pkgs)))
	cached := filepath.Join(pybuild.CacheDir(), "devel-"+hex.EncodeToString(key[:8])+".tar")
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	dir := t.TempDir()
	if err := ocitar.Untar(devel, dir); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	base, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	layer := pythonToolsLayer(t, site, baseSitePackages(t, base))
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.WriteOCI(cached, img, "llbuild-standin-devel:bookworm-pytools"); err != nil {
		t.Fatal(err)
	}
	return cached
}

// baseSitePackages lists the top-level entries of the image's dist-packages (name -> is a
// directory).
func baseSitePackages(t *testing.T, img v1.Image) map[string]bool {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	top := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return top
		}
		if err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(strings.TrimPrefix(h.Name, "./"), sitePackages+"/")
		if !ok || rel == "" {
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimSuffix(rel, "/"), "/")
		top[name] = top[name] || rest != "" || h.Typeflag == tar.TypeDir
	}
}

// pythonToolsLayer is a layer of site's files under dist-packages: whiteouts for the base's
// other versions of the same distributions first, then every file, sorted, owned by root, at
// time zero.
func pythonToolsLayer(t *testing.T, site string, base map[string]bool) v1.Layer {
	t.Helper()
	ents, err := os.ReadDir(site)
	if err != nil {
		t.Fatal(err)
	}
	project := func(name string) string {
		n := strings.TrimSuffix(strings.TrimSuffix(name, ".dist-info"), ".egg-info")
		p, _, _ := strings.Cut(n, "-")
		return strings.ReplaceAll(strings.ToLower(p), "-", "_")
	}
	adds, projects := map[string]bool{}, map[string]bool{}
	for _, e := range ents {
		adds[e.Name()] = true
		if strings.HasSuffix(e.Name(), ".dist-info") {
			projects[project(e.Name())] = true
		}
	}
	var whiteouts []string
	for name, isDir := range base {
		switch {
		case adds[name] && isDir:
			whiteouts = append(whiteouts, name+"/.wh..wh..opq")
		case !adds[name] && (strings.HasSuffix(name, ".dist-info") || strings.HasSuffix(name, ".egg-info")) && projects[project(name)]:
			whiteouts = append(whiteouts, ".wh."+name)
		}
	}
	sort.Strings(whiteouts)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(h *tar.Header) {
		h.Name = sitePackages + "/" + h.Name
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = layerTime, layerTime, layerTime
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	var dirs []string
	for _, w := range whiteouts {
		if d, ok := strings.CutSuffix(w, "/.wh..wh..opq"); ok && !slices.Contains(dirs, d) {
			// The opaque marker's directory first: the directory then holds only this layer's files.
			hdr(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755})
			dirs = append(dirs, d)
		}
		hdr(&tar.Header{Name: w, Typeflag: tar.TypeReg, Mode: 0o644})
	}
	err = filepath.WalkDir(site, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == site {
			return err
		}
		rel, _ := filepath.Rel(site, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			if !slices.Contains(dirs, rel) {
				hdr(&tar.Header{Name: rel + "/", Typeflag: tar.TypeDir, Mode: 0o755})
			}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			hdr(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))})
			if _, err := tw.Write(b); err != nil {
				return err
			}
		default:
			t.Fatalf("%s: not a file or directory", p)
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// engineWheelPlan is the wheel recipe for cpu-v3 on the fake llama-cpp-python, with fakellama
// vendored.
func engineWheelPlan(t *testing.T, series []patches.Patch) *pipeline.WheelPlan {
	t.Helper()
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	// The stand-in devel image is bookworm: its python3 is 3.11.
	return fixture.WheelPlan(t, tg, series, "3.11")
}

func newEngineWheel(t *testing.T, opts Options) *WheelExecutor {
	t.Helper()
	ex, err := NewWheel(WheelOptions{Options: opts, Package: filepath.Join(fixture.Dir(), "fakewheel")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

func TestEngineWheelWithoutBuildToolsSaysWhatToDo(t *testing.T) {
	// The stand-in devel image has bookworm's build 0.9.0 and no scikit-build-core, and the
	// engine cannot reach PyPI: neither way to the tools works.
	series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	opts, _ := engineOptions(t, series)
	_, err := newEngineWheel(t, opts).BuildWheel(context.Background(), engineWheelPlan(t, series), t.TempDir())
	var ee *ExecError
	if !errors.As(err, &ee) || ee.ExitCode != 4 {
		t.Fatalf("BuildWheel() = %v, want the python tools step to exit with 4", err)
	}
	for _, want := range []string{
		"llbuild: the devel image has build 0.9.0 (pinned: 1.5.1), scikit-build-core missing (pinned: 0.12.2)",
		"no python build tools: the devel image ubuntu:24.04@sha256:",
		"does not carry build==1.5.1 scikit-build-core==0.12.2 for python3.11",
		"use a devel image that has them",
	} {
		if !strings.Contains(ee.Tail, want) {
			t.Errorf("the tail lacks %q:\n%s", want, ee.Tail)
		}
	}
}

var probeRefused = regexp.MustCompile(`the devel image has [A-Za-z0-9_.-]+ ([0-9]|missing)`)

func TestEngineWheelUsesTheImagesBuildTools(t *testing.T) {
	series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	opts, log := engineOptions(t, series)
	site := pybuild.Need(t)
	// The image must carry exactly the pins; when Debian sid moves on, the pins follow it.
	have := distInfoVersions(t, site)
	for _, pin := range PythonBuildTools {
		name, want, _ := strings.Cut(pin, "==")
		if have[name] != want {
			t.Fatalf("Debian %s now has %s %s, PythonBuildTools pins %s: move the pin (or the test's packages) so they agree", pybuild.Suite, name, have[name], pin)
		}
	}
	opts.Devel = "oci-archive:" + develWithPythonTools(t, enginetest.DevelImage(t), site)

	wp := engineWheelPlan(t, series)
	dir, err := newEngineWheel(t, opts).BuildWheel(context.Background(), wp, t.TempDir())
	if err != nil {
		t.Fatalf("BuildWheel() = %v", err)
	}
	a := openArtifacts(t, dir)
	const name = "llama_cpp_python-0.3.99+cpu.avx2-py3-none-linux_x86_64.whl"
	if len(a.Manifest.Files) != 1 || a.Manifest.Files[0].Path != name || a.Manifest.Files[0].Kind != artifacts.KindWheel || a.Manifest.PlanHash != wp.Hash {
		t.Fatalf("artifacts = %+v of plan %s, want %s of plan %s", a.Manifest.Files, a.Manifest.PlanHash, name, wp.Hash)
	}
	// The engine cannot reach PyPI: a wheel at all means the image's tools built it. Where it
	// can, the probe's answer shows in the log when the step ran (a cached step shows nothing).
	// The log also holds the probe's source, so match its answer ("has build 0.9.0 (pinned…"),
	// not the text of the program.
	if probeRefused.MatchString(log.String()) {
		t.Errorf("the devel image's build tools were not accepted:\n%s", lastLines(log.String(), 40))
	}
	m := a.Provenance.Materials
	if !m.Source.Unverified || m.Source.Tree == "" || m.Vendor == nil || !m.Vendor.Unverified || m.Vendor.Tree == "" {
		t.Errorf("provenance sources = %+v, vendor %+v; want both plain directories unverified with tree hashes", m.Source, m.Vendor)
	}
	for _, im := range m.Images {
		if im.Role == "devel" && (!im.Substituted || im.Planned == nil || !strings.HasPrefix(im.Digest, "sha256:")) {
			t.Errorf("provenance devel image = %+v; want the stand-in by digest, marked substituted for the plan's", im)
		}
	}
	whl := filepath.Join(dir, name)
	z, err := zip.OpenReader(whl)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	generator := ""
	for _, f := range z.File {
		if strings.HasSuffix(f.Name, ".dist-info/WHEEL") {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			generator = string(b)
		}
	}
	if !strings.Contains(generator, "Generator: scikit-build-core 0.12.2") {
		t.Errorf("WHEEL = %q, want it generated by the pinned scikit-build-core 0.12.2", generator)
	}

	// The package loads the libraries built in the engine, with the patches in them.
	pkg := t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "-m", "zipfile", "-e", whl, pkg).CombinedOutput(); err != nil {
		t.Fatalf("unzipping the wheel: %v\n%s", err, out)
	}
	run := exec.Command("/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import llama_cpp as l; print(l.__version__); print(l.llama_dot(8)); print(l.llama_print_system_info().decode())", pkg)
	run.Env = append(os.Environ(), "LD_LIBRARY_PATH=")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("importing the wheel's package: %v\n%s", err, out)
	}
	for _, want := range []string{"0.3.99+cpu.avx2\n", "16.0\n", "GGML_AVX2=ON", "GGML_AVX512=OFF", "patched: 0002"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the package printed %q, want %q in it", out, want)
		}
	}
}

// TestEngineAndHostBuildTheSameBytes: one plan built by the host executor on this machine and
// through the engine in the stand-in devel image (Debian bookworm, as this machine) gives the
// same files, byte for byte: the plan, not the executor, decides what is built. (The suite's
// llama.cpp builds all go through the engine, so this is where the two executors meet.)
func TestEngineAndHostBuildTheSameBytes(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	series := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	opts, _ := engineOptions(t, series)
	opts.Source = sourceCopy(t, nil)
	p := fixture.PlanFor(t, standInTarget(t, enginetest.RuntimeImage(t)), fixture.Recipe(t, ""), series)
	engine := newEngineExecutor(t, opts)
	engineDir, err := engine.Build(context.Background(), p, t.TempDir())
	if err != nil {
		t.Fatalf("engine Build() = %v", err)
	}
	host, err := hostexec.New(hostexec.Options{Source: opts.Source, WorkDir: t.TempDir(), CacheDir: t.TempDir(), Series: series, Builder: pipeline.Builder{Version: "test", Executor: pipeline.ExecutorHost}})
	if err != nil {
		t.Fatal(err)
	}
	hostDir, err := host.Build(context.Background(), p, t.TempDir())
	if err != nil {
		t.Fatalf("host Build() = %v", err)
	}
	a, b := openArtifacts(t, engineDir), openArtifacts(t, hostDir)
	sameFiles(t, a, b, artifacts.ManifestFile)
	// both say what the build read from the source tree, the same files (a bisect campaign's
	// inert commits), the sources and headers compiled, the CMake files and nothing built
	engineReads, err := engine.Reads(context.Background(), p)
	if err != nil {
		t.Fatalf("engine Reads() = %v", err)
	}
	hostReads, err := host.Reads(context.Background(), p)
	if err != nil {
		t.Fatalf("host Reads() = %v", err)
	}
	if !slices.Equal(engineReads, hostReads) {
		t.Errorf("the engine's build read %v, the host's %v: want the same files", engineReads, hostReads)
	}
	for _, want := range []string{"CMakeLists.txt", "tools/server/server.cpp", "ggml/include/ggml.h"} {
		if !slices.Contains(engineReads, want) {
			t.Errorf("the engine's build read %v: want %s among them", engineReads, want)
		}
	}
	// both keep the patches they applied, byte for byte
	for _, dir := range []string{engineDir, hostDir} {
		for _, pt := range series {
			got, err := os.ReadFile(filepath.Join(dir, "patches", pt.Name))
			if err != nil || !bytes.Equal(got, pt.Data) {
				t.Errorf("%s: patches/%s = %d bytes (%v), want the %d bytes applied", dir, pt.Name, len(got), err, len(pt.Data))
			}
		}
	}
}
