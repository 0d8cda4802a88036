package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/publish/publishtest"
)

// TestShellScriptsPassShellcheck lints the repository's shell scripts: the test command, the CI
// entry point and the benchmarks that run only on GPU machines (which no test executes).
func TestShellScriptsPassShellcheck(t *testing.T) {
	shellcheck := publishtest.NeedCommand(t, "shellcheck", "shellcheck")
	scripts, err := filepath.Glob("scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	scripts = append(scripts, ".ci/run")
	if len(scripts) < 2 {
		t.Fatalf("found only %v", scripts)
	}
	for _, s := range scripts {
		if out, err := exec.Command(shellcheck, "--shell=bash", s).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", s, err, out)
		}
	}
}
