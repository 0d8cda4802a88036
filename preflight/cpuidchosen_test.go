package preflight

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/targets"
)

const (
	// randomDeviceSrc uses std::random_device, whose RDRAND/RDSEED entropy functions
	// libstdc++ picks by CPUID at run time.
	randomDeviceSrc = `#include <random>
extern "C" unsigned seed_me() { std::random_device rd; return rd(); }
`
	// ownRdrandSrc calls RDRAND from the file's own code, with no CPUID test.
	ownRdrandSrc = `
extern "C" __attribute__((target("rdrnd"))) unsigned own_rdrand() { unsigned v = 0; __builtin_ia32_rdrand32_step(&v); return v; }
`
)

// gxxBuild compiles a C++ shared library from src with g++ and the given flags into dir/out.
func gxxBuild(t *testing.T, dir, out, src string, flags ...string) string {
	t.Helper()
	return compileSrc(t, "g++", ".cpp", dir, out, src, append([]string{"-shared", "-fPIC"}, flags...)...)
}

// TestRandomDeviceLinkedInIsDispatched: with libstdc++ linked statically (as a toolchain with
// only libstdc++.a links it, or -static-libstdc++), std::random_device's RDRAND and RDSEED
// functions sit in the file (ggml's libggml-base.so in such builds), but libstdc++ takes them
// only after its own CPUID test. On an x86-64-v3 host without RDRAND/RDSEED that is
// "dispatched at run time", not a SIGILL; the same instruction in the file's own code, or in
// a stripped file where nothing names libstdc++'s functions, still would fail.
func TestRandomDeviceLinkedInIsDispatched(t *testing.T) {
	dir := t.TempDir()
	v3 := loadTarget(t, "cpu-v3")
	withRand := targets.Host{CPU: targets.CPU{Features: append(append([]targets.Feature{}, v3.CPU.Features...), targets.RDRAND, targets.RDSEED)}}
	static := []string{"-static-libstdc++"}
	for _, c := range []struct {
		name, src string
		flags     []string
		strip     bool
		host      targets.Host
		want      Status
		function  string // named in the evidence
	}{
		{"random_device linked in", randomDeviceSrc, static, false, v3, Dispatched, "_ZNSt12_GLOBAL__N_112__x86_rdrandEPv"},
		{"random_device linked in, host with RDRAND and RDSEED", randomDeviceSrc, static, false, withRand, OK, ""},
		{"random_device linked in and RDRAND in the file's own code", randomDeviceSrc + ownRdrandSrc, static, false, v3, Fail, "own_rdrand"},
		{"random_device linked in, stripped", randomDeviceSrc, static, true, v3, Fail, ""},
		{"random_device from the shared libstdc++", randomDeviceSrc, nil, false, v3, OK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(strings.ReplaceAll(c.name, " ", "-"), "libt.so")
			os.MkdirAll(filepath.Join(dir, filepath.Dir(out)), 0o755)
			p := gxxBuild(t, dir, out, c.src, c.flags...)
			if c.strip {
				if b, err := exec.Command("strip", "--strip-all", p).CombinedOutput(); err != nil {
					llamatest.Unavailable(t, "strip: "+err.Error()+": "+string(b))
				}
			}
			bins, err := ReadFiles(context.Background(), []string{p})
			if err != nil {
				t.Fatal(err)
			}
			if c.flags != nil && !c.strip && len(bins[0].Code.CPUIDChosen) == 0 {
				llamatest.Unavailable(t, "this toolchain's libstdc++.a has no CPUID-picked RDRAND/RDSEED functions to test with")
			}
			r := Check(c.host, "host", Input{Name: p, Binaries: bins})
			v := verdictFor(r, CheckCPU, p)
			if v == nil {
				t.Fatalf("no cpu verdict in %+v", r.Verdicts)
			}
			if v.Status != c.want {
				t.Fatalf("cpu verdict = %s %q, want %s", v.Status, v.Reason, c.want)
			}
			if c.want != OK && !strings.Contains(v.Reason, "RDRAND") {
				t.Errorf("reason %q does not name RDRAND", v.Reason)
			}
			if c.want == Dispatched && !strings.Contains(v.Reason, "std::random_device") {
				t.Errorf("reason %q does not say what picks the functions", v.Reason)
			}
			if c.function != "" && !strings.Contains(strings.Join(v.Evidence, "\n"), " in "+c.function) {
				t.Errorf("evidence = %q, want the instructions attributed to %s", v.Evidence, c.function)
			}
			if want := map[Status]int{Dispatched: 0, Fail: 1, OK: 0}[c.want]; r.ExitCode() != want {
				t.Errorf("ExitCode = %d, want %d", r.ExitCode(), want)
			}
		})
	}
}
