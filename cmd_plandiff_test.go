package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish/publishtest"
	"github.com/llbuild/llbuild/targets"
)

func TestPlanDiffGroupsChangesAndChecksTheDriverCap(t *testing.T) {
	_, out, _ := runCLI(t, "plan", "--target", "olares-one", "--json")
	var p pipeline.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	// B moves the pin, drops a patch, and moves to a CUDA 13.3 image as upstream's did: the
	// target's driver (CUDA 13.1) cannot start it.
	pinned := p.Source.Commit
	p.Source.Commit = strings.Repeat("b", 40)
	removed := p.Patches[0].Name
	p.Patches = p.Patches[1:]
	p.CUDA.RequireCUDA = "cuda>=13.3"
	p.Runtime.Env["NVIDIA_REQUIRE_CUDA"] = "cuda>=13.3"
	p.Hash = strings.Repeat("c", 64)
	b, _ := json.Marshal(&p)
	file := filepath.Join(t.TempDir(), "b.json")
	os.WriteFile(file, b, 0o644)

	code, out, stderr := runCLI(t, "plan", "diff", "olares-one", file)
	if code != 1 || !strings.Contains(stderr, "B would not start") {
		t.Errorf("exit code = %d, stderr %q; want 1 and why B would not start", code, stderr)
	}
	for _, want := range []string{
		"source commit:\n  commit: " + pinned + " -> " + p.Source.Commit,
		"patches:\n  removed " + removed,
		"runtime env:\n  NVIDIA_REQUIRE_CUDA: cuda>=13.1 -> cuda>=13.3",
		"A needs cuda>=13.1: holds",
		"B needs cuda>=13.3: DOES NOT HOLD",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan diff printed\n%s\nwant it to contain %q", out, want)
		}
	}

	code, out, _ = runCLI(t, "plan", "diff", "--json", "rtx3090", "olares-one")
	var d struct {
		Groups []struct {
			Name    string
			Changes []struct{ What, A, B string }
		}
		Drivers []struct{ Holds bool }
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	groups := map[string]bool{}
	for _, g := range d.Groups {
		groups[g.Name] = true
	}
	if !groups[pipeline.GroupCUDA] || !groups[pipeline.GroupCMake] || groups[pipeline.GroupSource] || groups[pipeline.GroupPatches] {
		t.Errorf("rtx3090 vs olares-one groups = %v, want CUDA and CMake changes and the same source and patches", groups)
	}
	if len(d.Drivers) != 4 {
		t.Errorf("driver checks = %d, want 4 (each target's driver against each plan)", len(d.Drivers))
	}

	if code, _, stderr := runCLI(t, "plan", "diff", "nosuchtarget", "cpu-v3"); code != 2 || !strings.Contains(stderr, "built-in target") {
		t.Errorf("an unknown target: exit %d, stderr %q; want 2 naming the targets", code, stderr)
	}
	// input that cannot be read is exit 2, never 1 (B would not start), and names the file
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "manifest.json"), []byte("{"), 0o644)
	emptyTarget := filepath.Join(t.TempDir(), "box.yaml")
	os.WriteFile(emptyTarget, nil, 0o644)
	for _, arg := range []string{broken, emptyTarget} {
		if code, _, stderr := runCLI(t, "plan", "diff", "cpu-v3", arg); code != 2 || !strings.Contains(stderr, filepath.Base(arg)) {
			t.Errorf("plan diff cpu-v3 %s: exit %d, stderr %q; want 2 naming it", arg, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "plan", "diff", "cpu-v3", broken); !strings.Contains(stderr, "manifest.json") {
		t.Errorf("a bundle's broken manifest: exit %d, stderr %q does not name manifest.json", code, stderr)
	}
	if code, out, _ := runCLI(t, "plan", "diff", "cpu-v3", "cpu-v3"); code != 0 || !strings.Contains(out, "no differences") {
		t.Errorf("a plan against itself: exit %d\n%s", code, out)
	}
}

// imageOf assembles the runtime image of tg's server plan onto base from stand-in artifacts.
func imageOf(t *testing.T, base v1.Image, tg *targets.Target) (v1.Image, *pipeline.Plan) {
	t.Helper()
	p, err := resolvePlan("", publishtest.TargetFile(t, t.TempDir(), tg), "server", false)
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Assemble(base, publishtest.ServerArtifacts(t, t.TempDir(), p))
	if err != nil {
		t.Fatal(err)
	}
	return img, p
}

func TestPlanDiffReadsImagesFromArchivesLayoutsAndRegistries(t *testing.T) {
	base := imagetest.BaseImage(t)
	imgA, pA := imageOf(t, base, publishtest.Target(t, "olares-one", base, nil))
	// B is the image upstream moved to: CUDA 13.3, which olares-one's driver cannot start.
	imgB, _ := imageOf(t, base, publishtest.Target(t, "olares-one", base, func(tg *targets.Target) {
		tg.Name = "olares-one-cuda133"
		tg.Build.CUDA.Toolkit = "13.3.0"
		tg.Host.Driver.Version, tg.Host.Driver.CUDA = "610.43.02", "13.3"
	}))
	archive := filepath.Join(t.TempDir(), "a.oci.tar")
	if err := image.WriteOCI(archive, imgA, "llama-server:olares-one"); err != nil {
		t.Fatal(err)
	}
	layoutDir := t.TempDir() + "/"
	if err := image.WriteOCI(layoutDir, imgA, ""); err != nil {
		t.Fatal(err)
	}
	reg := publishtest.Memory(t, nil)
	refB := reg.Host + "/llbuild/llama-server:olares-one-cuda133"
	if err := image.Push(context.Background(), imgB, []string{refB}); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := runCLI(t, "plan", "diff", archive, refB)
	if code != 1 || !strings.Contains(stderr, "B would not start") {
		t.Errorf("archive vs registry: exit %d, stderr %q; want 1 and why B would not start", code, stderr)
	}
	for _, want := range []string{
		"A: " + archive + " (target olares-one, plan " + pA.ShortHash() + ")",
		"runtime env:\n  NVIDIA_REQUIRE_CUDA: cuda>=13.1 -> cuda>=13.3",
		"target olares-one, driver", "A needs cuda>=13.1: holds", "B needs cuda>=13.3: DOES NOT HOLD",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan diff %s %s printed\n%s\nwant it to contain %q", archive, refB, out, want)
		}
	}
	if strings.Contains(out, "only source") {
		t.Errorf("an image side was reported as partial:\n%s", out)
	}
	// named as --base and bundle --image name images, it reads the same
	if code, out, stderr := runCLI(t, "plan", "diff", "oci-archive:"+archive, "oci-layout:"+layoutDir); code != 0 || !strings.Contains(out, "A: oci-archive:"+archive) {
		t.Errorf("plan diff oci-archive: oci-layout:: exit %d\n%s%s", code, out, stderr)
	}
	// The image's plan is the plan itself: against the target it was built for, nothing differs.
	if code, out, stderr := runCLI(t, "plan", "diff", layoutDir, pA.Target); code == 2 || !strings.Contains(out, "A: "+layoutDir) {
		t.Errorf("layout vs target: exit %d\n%s%s", code, out, stderr)
	}

	// An image from an earlier llbuild records only the plan hash.
	cf, _ := imgA.ConfigFile()
	cf = cf.DeepCopy()
	delete(cf.Config.Labels, image.LabelPlan)
	old, err := mutate.ConfigFile(imgA, cf)
	if err != nil {
		t.Fatal(err)
	}
	oldRef := reg.Host + "/llbuild/llama-server:old"
	if err := image.Push(context.Background(), old, []string{oldRef}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "plan", "diff", oldRef, archive)
	if code != 2 || !strings.Contains(stderr, "only its plan's hash "+pA.Hash) || !strings.Contains(stderr, "provenance.json") {
		t.Errorf("an image without %s: exit %d, stderr %q; want 2 naming the plan hash and what to do", image.LabelPlan, code, stderr)
	}
	// Neither a tag the registry lacks nor a registry that does not answer says B would not
	// start (exit 1): nothing was compared (exit 2, preflight's "could not check").
	if code, _, stderr := runCLI(t, "plan", "diff", reg.Host+"/llbuild/none:x", archive); code != 2 || !strings.Contains(stderr, "none:x") {
		t.Errorf("a tag the registry lacks: exit %d, stderr %q; want 2 naming it", code, stderr)
	}
	down := "127.0.0.1:1/llbuild/llama-server:h200"
	if code, out, stderr := runCLI(t, "plan", "diff", archive, down); code != 2 || !strings.Contains(stderr, down) || strings.Contains(out, "would not start") {
		t.Errorf("a registry that does not answer: exit %d, stdout %q, stderr %q; want 2 naming it", code, out, stderr)
	}
}

// bundleOf bundles in's model with stand-in server files recorded as built from plan p, and
// returns the bundle directory; extra are more bundle flags (--archive FILE).
func bundleOf(t *testing.T, in bundleInputs, p *pipeline.Plan, extra ...string) string {
	t.Helper()
	art := stubArtifacts(t, p)
	dir := filepath.Join(t.TempDir(), "bundle")
	if code, _, stderr := runCLI(t, append([]string{"bundle", "--target", p.Target, "--artifacts", art, "--model", in.Model, "--quiet", "-o", dir}, extra...)...); code != 0 {
		t.Fatalf("bundle: exit %d\n%s", code, stderr)
	}
	return dir
}

// stubArtifacts writes an artifact directory of stand-in server files (/bin/true and a system
// library) recorded as built from plan p, and returns it.
func stubArtifacts(t *testing.T, p *pipeline.Plan) string {
	t.Helper()
	lib := systemLib(t)
	art, err := artifacts.Write(t.TempDir(), artifacts.Input{
		Target: p.Target, PlanHash: p.Hash,
		Files: []artifacts.InputFile{
			{Path: "bin/llama-server", From: "/bin/true", Kind: artifacts.KindExecutable},
			{Path: "bin/" + filepath.Base(lib), From: lib, Kind: artifacts.KindLibrary},
		},
		Provenance: pipeline.ProvenanceOf(p, pipeline.Builder{Version: "test", Executor: "host"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return art
}

// cpuPlans: cpu-v3's plan, and a copy of it with AVX-512 on and CFLAGS=-O3 (hash c…c).
func cpuPlans(t *testing.T) (*pipeline.Plan, *pipeline.Plan) {
	t.Helper()
	a, err := resolvePlan("cpu-v3", "", "server", false)
	if err != nil {
		t.Fatal(err)
	}
	var b pipeline.Plan
	if err := json.Unmarshal(a.JSON(), &b); err != nil {
		t.Fatal(err)
	}
	b.Configure = append(b.Configure, "-DGGML_AVX512=ON")
	b.Env["CFLAGS"] = "-O3"
	b.Hash = strings.Repeat("c", 64)
	return a, &b
}

func TestPlanDiffComparesTheWholePlanOfBundles(t *testing.T) {
	in := newBundleInputs(t)
	pA, pB := cpuPlans(t)
	archive := filepath.Join(t.TempDir(), "b.tar.zst")
	a, b := bundleOf(t, in, pA), bundleOf(t, in, pB, "--archive", archive)

	code, out, stderr := runCLI(t, "plan", "diff", a, b)
	if code != 0 {
		t.Fatalf("plan diff of two bundles: exit %d\n%s%s", code, out, stderr)
	}
	// the bundle's archive records the same plan as its directory
	if code, aout, stderr := runCLI(t, "plan", "diff", archive, b); code != 0 || !strings.Contains(aout, "B: "+b) || !strings.Contains(aout, "no differences") {
		t.Errorf("plan diff of a bundle archive against its directory: exit %d\n%s%s", code, aout, stderr)
	}
	if code, _, stderr := runCLI(t, "plan", "diff", a, filepath.Join(t.TempDir(), "x.tar.gz")); code != 2 {
		t.Errorf("plan diff of a missing archive: exit %d, %s", code, stderr)
	}
	// an archive that is no bundle's (a source tarball) is said to be so
	notBundle := filepath.Join(t.TempDir(), "src.tar.gz")
	if err := exec.Command("tar", "-czf", notBundle, "-C", t.TempDir(), ".").Run(); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "plan", "diff", a, notBundle); code != 2 || !strings.Contains(stderr, "has no manifest.json") {
		t.Errorf("plan diff of a tarball that is no bundle: exit %d, %s", code, stderr)
	}
	for _, want := range []string{
		"A: " + a + " (target cpu-v3, plan " + pA.ShortHash() + ")\n",
		"cmake arguments:\n  -DGGML_AVX512: OFF -> ON",
		"environment:\n  CFLAGS: + -O3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan diff printed\n%s\nwant it to contain %q", out, want)
		}
	}
	if strings.Contains(out, "only its source") {
		t.Errorf("a bundle that records its plan was compared in part:\n%s", out)
	}
	// The bundle's plan is the plan it was built from: against it, nothing differs.
	if code, out, _ := runCLI(t, "plan", "diff", a, "cpu-v3"); code != 0 || !strings.Contains(out, "no differences") {
		t.Errorf("bundle vs its target: exit %d\n%s", code, out)
	}

	// A bundle from an earlier llbuild (manifest.json version 1, no build.plan) is still read,
	// in part, and the diff says so.
	mfile := filepath.Join(b, manifest.FileName)
	m, err := manifest.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	m.SchemaVersion, m.Build.Plan = 1, nil
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mfile, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "plan", "diff", a, b)
	if code != 0 || !strings.Contains(out, "B: "+b+" (target cpu-v3, plan cccccccccccc) — a bundle from an earlier llbuild (manifest.json version 1): only its source") {
		t.Errorf("against a version 1 bundle: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(out, "cmake arguments") {
		t.Errorf("a version 1 bundle's CMake arguments were compared:\n%s", out)
	}
}

// A target whose images float (b70's are tags) is diffed by name with --allow-floating, as the
// refusal without it says; it is refused without.
func TestPlanDiffTakesAFloatingTargetWithAllowFloating(t *testing.T) {
	code, _, stderr := runCLI(t, "plan", "diff", "cpu-v3", "b70")
	if code != exitUsage || !strings.Contains(stderr, "or pass --allow-floating") {
		t.Fatalf("plan diff cpu-v3 b70: exit %d %s, want 2 naming --allow-floating", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "plan", "diff", "--allow-floating", "cpu-v3", "b70")
	if code != exitOK || !strings.Contains(stdout, "io.llbuild.target: cpu-v3 -> b70") {
		t.Errorf("plan diff --allow-floating cpu-v3 b70: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
