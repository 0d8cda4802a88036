package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/pipeline"
)

func TestPlanDiffGroupsChangesAndChecksTheDriverCap(t *testing.T) {
	_, out, _ := runCLI(t, "plan", "--target", "olares-one", "--json")
	var p pipeline.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	// B moves the pin, drops a patch, and moves to a CUDA 13.3 image as upstream's did: the
	// target's driver (CUDA 13.1) cannot start it.
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
		"source commit:\n  commit: 1425386fd996511e1f3295e7366c38289a92a271 -> " + p.Source.Commit,
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
	if code, out, _ := runCLI(t, "plan", "diff", "cpu-v3", "cpu-v3"); code != 0 || !strings.Contains(out, "no differences") {
		t.Errorf("a plan against itself: exit %d\n%s", code, out)
	}
}
