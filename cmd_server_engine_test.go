package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/patches"
)

// TestServerBuildsPinnedLlamaThroughEngine is the main job for real: `llbuild server` with the
// default executor builds the recipe's pinned llama.cpp with the patch series on a real Dagger
// engine, in the stand-in devel image. The server runs, says the plan's build number and commit,
// and has the series in it. Where the suite's host build of the same plan is given
// (LLBUILD_PATCHED_LLAMA_SERVER, which scripts/test.sh builds), every built file is compared
// with it: the same plan, compiler and flags give the same bytes on either executor.
func TestServerBuildsPinnedLlamaThroughEngine(t *testing.T) {
	enginetest.Engine(t)
	devel := enginetest.DevelImage(t)
	src := enginetest.LlamaSource(t)
	out := t.TempDir()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "server", "-t", "cpu-v3", "--source", src, "--base", "devel=oci-archive:"+devel, "--out", out)
	t.Logf("llama.cpp %s with the series through the engine: %s", "cpu-v3", time.Since(start).Round(time.Second))
	if code != 0 {
		t.Fatalf("exit %d; stderr (its end):\n%s", code, tailOf(stderr))
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
	version, err := exec.Command(server, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(version), "10106 (1425386fd)") {
		t.Errorf("llama-server --version: %v\n%s\nwant build 10106 (1425386fd), the recipe's", err, version)
	}
	help, err := exec.Command(server, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "--prompt-logprobs") {
		t.Errorf("llama-server --help lacks --prompt-logprobs (patch 0002): %v", err)
	}

	host := os.Getenv("LLBUILD_PATCHED_LLAMA_SERVER")
	if host == "" {
		t.Log("LLBUILD_PATCHED_LLAMA_SERVER is not set: not compared with a host build")
		return
	}
	if filepath.Base(filepath.Dir(host)) != filepath.Base(dir) {
		t.Fatalf("the host build %s is of another plan than %s", host, dir)
	}
	var same, differ []string
	for _, f := range a.Manifest.Files {
		engine, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		hostb, err := os.ReadFile(filepath.Join(filepath.Dir(host), f.Path))
		if err != nil {
			t.Errorf("the host build lacks %s: %v", f.Path, err)
			continue
		}
		if bytes.Equal(engine, hostb) {
			same = append(same, f.Path)
		} else {
			differ = append(differ, f.Path)
		}
	}
	if len(differ) > 0 {
		t.Errorf("the engine's and the host's builds of one plan differ in %v (identical: %v)", differ, same)
	}
}
