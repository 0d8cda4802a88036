package preflight

import (
	"strings"
	"testing"

	"github.com/llbuild/llbuild/targets"
)

// backendVerdicts on file facts alone: what ggml would load for each device of the host, or
// why nothing would.
func TestBackendVerdictsProveABackendLoads(t *testing.T) {
	dl := func() *Binary { return &Binary{Path: "lib/libggml.so.0", Needed: []string{"libggml-base.so.0"}} }
	found := func(p string) *Binary { return &Binary{Path: p, GGMLSearch: searchLabel + "bin/llama-server (lib, .)"} }
	variants := func() []*Binary {
		return []*Binary{found("lib/libggml-cpu-x64.so"), found("lib/libggml-cpu-sse42.so"), found("lib/libggml-cpu-haswell.so"), found("lib/libggml-cpu-skylakex.so")}
	}
	v3 := loadTarget(t, "cpu-v3")
	sse42 := targets.Host{CPU: targets.CPU{Features: []targets.Feature{targets.SSE42}}}
	h200 := loadTarget(t, "h200")
	for _, tc := range []struct {
		name string
		host targets.Host
		bins []*Binary
		want []string // per device: status, then a part of the reason
	}{
		{"ggml links its CPU backend", v3, []*Binary{{Path: "lib/libggml.so.0", Needed: []string{"libggml-base.so.0", "libggml-cpu.so.0"}}}, nil},
		{"no backend in the bundle", v3, []*Binary{dl()}, []string{"would fail", "no backends are loaded"}},
		{"the variant the CPU scores highest", v3, append(variants(), dl()), []string{"ok", "lib/libggml-cpu-haswell.so"}},
		{"an SSE4.2 CPU", sse42, append(variants(), dl()), []string{"ok", "lib/libggml-cpu-sse42.so"}},
		{"every variant scores 0", sse42, []*Binary{dl(), found("lib/libggml-cpu-haswell.so")}, []string{"would fail", "every variant scores 0"}},
		{"a pinned variant the CPU can run", v3, []*Binary{dl(), {Path: "lib/p/libggml-cpu-haswell.so", GGMLForced: true}}, []string{"ok", "GGML_BACKEND_PATH"}},
		{"a pinned variant the CPU cannot run", sse42, []*Binary{dl(), {Path: "lib/p/libggml-cpu-haswell.so", GGMLForced: true}}, []string{"would fail", "no CPU backend"}},
		{"a backend outside the searched directories", v3, []*Binary{dl(), found("lib/libggml-rpc.so"), {Path: "elsewhere/libggml-cpu-haswell.so"}}, []string{"would fail", "no CPU backend"}},
		{"a CUDA build on an H200", h200, append(variants(), dl(), found("lib/libggml-cuda.so")), []string{"ok", "haswell", "ok", "lib/libggml-cuda.so"}},
		{"a CUDA build without its backend", h200, append(variants(), dl(), &Binary{Path: "lib/libggml-base.so.0", Needed: []string{"libcudart.so.12"}}), []string{"ok", "haswell", "would fail", "on the CPU alone"}},
		{"a CPU build on an H200", h200, append(variants(), dl()), []string{"ok", "haswell", "ok", "leaves unused"}},
	} {
		var choices []GGMLChoice
		choices = ggmlChoices(tc.bins, tc.host.CPU.FeatureSet())
		got := backendVerdicts(tc.host, tc.bins, choices)
		if len(got)*2 != len(tc.want) {
			t.Errorf("%s: %d verdicts %+v, want %d", tc.name, len(got), got, len(tc.want)/2)
			continue
		}
		for i, v := range got {
			if string(v.Status) != tc.want[2*i] || !strings.Contains(v.Reason, tc.want[2*i+1]) {
				t.Errorf("%s: %s: %s, %q; want %s with %q", tc.name, v.Subject, v.Status, v.Reason, tc.want[2*i], tc.want[2*i+1])
			}
		}
	}
}
