package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
)

// TestServerBuildsPinnedLlamaThroughEngine is the main job for real: `llbuild build` with the
// default executor builds the recipe's pinned llama.cpp with the patch series on a real Dagger
// engine, in the stand-in devel image. The server runs, says the plan's build number and commit,
// and has the series in it. scripts/test.sh has built the same plan the same way before the
// suite (LLBUILD_PATCHED_LLAMA_SERVER), so in CI this is the engine's cached answer, and the
// files must be the ones it built; that host and engine builds of one plan are byte-identical
// is TestEngineAndHostBuildTheSameBytes's, on the fixture.
func TestServerBuildsPinnedLlamaThroughEngine(t *testing.T) {
	enginetest.Engine(t)
	devel := enginetest.DevelImage(t)
	src := enginetest.LlamaSource(t)
	out := t.TempDir()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "build", "-t", "cpu-v3", "--source", src, "--base", "devel=oci-archive:"+devel, "--out", out)
	t.Logf("llama.cpp %s with the series through the engine: %s", "cpu-v3", time.Since(start).Round(time.Second))
	if code != 0 {
		t.Fatalf("exit %d; stderr (its end):\n%s", code, tailOf(stderr))
	}
	// stderr is not a terminal here: the engine's log comes without escape sequences
	if i := strings.IndexByte(stderr, 0x1b); i >= 0 {
		t.Errorf("stderr carries escape sequences where it is not a terminal: %q", stderr[max(0, i-40):min(len(stderr), i+40)])
	}
	dir := strings.TrimSpace(stdout)
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	series, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	prov := a.Provenance
	if prov.Builder.Executor != "dagger" {
		t.Errorf("provenance names executor %q, want dagger", prov.Builder.Executor)
	}
	if len(prov.Materials.Patches) != len(series) {
		t.Errorf("provenance lists %d patches, the series has %d", len(prov.Materials.Patches), len(series))
	}

	server := filepath.Join(dir, "llama-server")
	version, verr := exec.Command(server, "--version").CombinedOutput()
	recipe, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	// "version: 10106 (1425386fd)" up to 1425386fd, "version: 0.1.1-dev (build 10470, commit
	// 34af94cd9)" since
	want := fmt.Sprintf("build %d, commit %s", recipe.Source.BuildNumber, recipe.Source.Commit[:9])
	old := fmt.Sprintf("%d (%s)", recipe.Source.BuildNumber, recipe.Source.Commit[:9])
	if verr != nil || !strings.Contains(string(version), want) && !strings.Contains(string(version), old) {
		t.Errorf("llama-server --version: %v\n%s\nwant build %s, the recipe's", verr, version, want)
	}
	help, err := exec.Command(server, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "--prompt-logprobs") {
		t.Errorf("llama-server --help lacks --prompt-logprobs (patch 0002): %v", err)
	}
	// The provisioned build of the same plan, in another session: the same bytes.
	if prev := os.Getenv("LLBUILD_PATCHED_LLAMA_SERVER"); prev != "" {
		sameBuiltFiles(t, a, filepath.Dir(prev))
	}
}

// sameBuiltFiles checks that every file of a's artifacts.json (links aside) is in other with the
// same bytes.
func sameBuiltFiles(t *testing.T, a *artifacts.Artifacts, other string) {
	t.Helper()
	for _, f := range a.Manifest.Files {
		if f.Link != "" {
			continue
		}
		b1, err1 := os.ReadFile(filepath.Join(a.Dir, f.Path))
		b2, err2 := os.ReadFile(filepath.Join(other, f.Path))
		if err1 != nil || err2 != nil || !bytes.Equal(b1, b2) {
			t.Errorf("%s differs between %s and %s (%v, %v)", f.Path, a.Dir, other, err1, err2)
		}
	}
}
