package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/enginetest"
)

// TestServerOnARemoteEngine: a build box as users have one, a Dagger engine on another machine
// reached over TCP (scripts/remote-engine.sh: the engine in its own network namespace, at
// tcp://10.201.0.2:1234 over a veth pair). Two targets with --jobs 2 build there from this
// machine's source and base image; once the engine is gone, the same command fails at once and
// says what to check.
func TestServerOnARemoteEngine(t *testing.T) {
	enginetest.Engine(t)
	devel := enginetest.DevelImage(t)
	if os.Getuid() != 0 {
		enginetest.SkipUnlessCI(t, "not root: a network namespace for the remote engine cannot be made")
	}
	start := exec.Command("bash", "scripts/remote-engine.sh", "start")
	out, err := start.Output()
	if err != nil {
		t.Fatalf("remote-engine.sh start: %v\n%s", err, exitStderr(err))
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if out, err := exec.Command("bash", "scripts/remote-engine.sh", "stop").CombinedOutput(); err != nil {
				t.Errorf("remote-engine.sh stop: %v\n%s", err, out)
			}
		}
	}
	t.Cleanup(stop)
	addr := strings.TrimPrefix(strings.TrimSpace(string(out)), "LLBUILD_REMOTE_ENGINE=")
	if !strings.HasPrefix(addr, "tcp://") {
		t.Fatalf("remote-engine.sh printed %q", out)
	}
	// Only --engine names the engine: the local one's address is out of the environment.
	t.Setenv(enginetest.RunnerHostEnv, "")
	os.Unsetenv(enginetest.RunnerHostEnv)

	// a second CPU target: cpu-v3 under another name
	cpu, err := os.ReadFile(filepath.Join("targets", "cpu-v3.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "buildbox-v3.yaml")
	if err := os.WriteFile(file, bytes.Replace(cpu, []byte("name: cpu-v3"), []byte("name: buildbox-v3"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"build", "--target", "cpu-v3", "--target-file", file, "--jobs", "2", "--engine", addr,
		"--source", fixtureCopy(t), "--series", filepath.Join("pipeline", "testdata", "patches", "demo.series"),
		"--base", "devel=oci-archive:" + devel, "--out", t.TempDir()}
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("llbuild build on %s: exit %d\n%s", addr, code, tailOf(stderr))
	}
	dirs := strings.Fields(stdout)
	if len(dirs) != 2 || !strings.Contains(dirs[0], "cpu-v3") || !strings.Contains(dirs[1], "buildbox-v3") {
		t.Fatalf("stdout = %q, want the two targets' artifact directories in order", stdout)
	}
	for _, d := range dirs {
		cmd := exec.Command(filepath.Join(d, "llama-server"))
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+d)
		if got, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(got), "patched by llbuild") {
			t.Errorf("%s/llama-server (built on the remote engine): %v %s", d, err, got)
		}
	}

	// The build box is up, but no engine listens on the port given: said at once.
	for i, a := range args {
		if a == addr {
			args[i] = strings.Replace(addr, ":1234", ":1235", 1)
		}
	}
	code, _, stderr = runCLI(t, args...)
	if code == 0 || !strings.Contains(stderr, "nothing answers at --engine tcp://10.201.0.2:1235") || !strings.Contains(stderr, "connection refused") || !strings.Contains(stderr, "listens on that address") {
		t.Errorf("with no engine on the port: exit %d, stderr:\n%s\nwant a failure that names the address and what to check", code, stderr)
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
