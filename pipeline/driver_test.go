package pipeline

import (
	"os"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// TestDriverChecksEvaluateAsNvidiaContainerCLI: a plan's NVIDIA_REQUIRE_CUDA is evaluated against
// a target's driver and GPUs by nvidia-container-cli's rules (preflight/cudareq), the one
// evaluation preflight uses too. Before, plan resolution and plan diff compared the version after
// "cuda>=" alone, and took whatever did not parse as a version for a requirement that holds:
// the rows whose before differs from holds are the inputs the two answers disagreed on.
func TestDriverChecksEvaluateAsNvidiaContainerCLI(t *testing.T) {
	// olares-one: driver 590.44.01 runs CUDA 13.1, one GeForce GPU of compute capability 12.0.
	host, err := targets.Load("olares-one")
	if err != nil {
		t.Fatal(err)
	}
	noBrand := *host
	noBrand.Host.GPUs = append([]targets.GPU(nil), host.Host.GPUs...)
	noBrand.Host.GPUs[0].Brand = ""
	tests := []struct {
		name    string
		host    *targets.Target
		require string
		// before is what the version comparison answered.
		before, holds bool
		reason        string
	}{
		{"the driver's own CUDA version", host, "cuda>=13.1", true, true, ""},
		{"a newer CUDA", host, "cuda>=13.3", false, false, "would need cuda>=13.3"},
		{"an alternative for another brand and driver branch", host, "cuda>=13.3 brand=tesla,driver>=470,driver<471", true, false, "would need cuda>=13.3 brand=tesla"},
		{"an alternative this GPU's brand and driver meet", host, "cuda>=13.3 brand=geforce,driver>=590,driver<591", true, true, ""},
		{"an alternative an unknown brand decides", &noBrand, "cuda>=13.3 brand=geforce,driver>=590,driver<591", true, true, "undecided: whether cuda>=13.3 (or its other terms) holds depends on GPU 0's brand"},
		{"a driver condition in the same term", host, "cuda>=13.1,driver>=600", true, false, "would need cuda>=13.1,driver>=600"},
		{"keys are case-insensitive", host, "CUDA>=13.3", true, false, "would need CUDA>=13.3"},
		{"a strict comparison", host, "cuda>13.1", true, false, "would need cuda>13.1"},
		{"an expression nvidia-container-cli rejects", host, "cuda>=abc", true, false, "invalid expression"},
		{"a major version alone", host, "cuda>=13", true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plan{CUDA: &CUDAPlan{RequireCUDA: tt.require}}
			checks := DriverChecks([2]*Plan{p, p}, [2]*targets.Target{tt.host, nil})
			if len(checks) != 2 {
				t.Fatalf("DriverChecks() = %d checks, want 2", len(checks))
			}
			got := checks[0]
			if got.Holds != tt.holds {
				t.Errorf("DriverChecks(%q).Holds = %v (%s), want %v (before: %v)", tt.require, got.Holds, got.Reason, tt.holds, tt.before)
			}
			if tt.reason == "" && got.Reason != "" || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("DriverChecks(%q).Reason = %q, want it to contain %q", tt.require, got.Reason, tt.reason)
			}
		})
	}
}

// TestRequirementOfAToolkitGivenByItsMajor: the plan's requirement and the target's own
// validation read a toolkit of one number as MAJOR.0, as the NVIDIA container toolkit reads
// CUDA_VERSION. Before, validation checked cuda>=13.0 and the plan required nothing.
func TestRequirementOfAToolkitGivenByItsMajor(t *testing.T) {
	data, err := os.ReadFile("../targets/rtx3090.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := targets.Parse("rtx3090-cuda13.yaml", []byte(strings.Replace(string(data), "toolkit: 13.1.1", "toolkit: \"13\"", 1)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(tg, r, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.CUDA.RequireCUDA, "cuda>=13.0"; got != want {
		t.Errorf("Resolve().CUDA.RequireCUDA = %q, want %q", got, want)
	}
}
