package publish

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

func TestGateOptionsValidateNamesWhatIsMissing(t *testing.T) {
	screen, err := bench.DefaultProtocol(bench.ModeScreen)
	if err != nil {
		t.Fatal(err)
	}
	image := GateOptions{Reference: "ghcr.io/you/llama-server:cpu-v3", Model: "m.gguf", CtxSize: 4096, Parallel: 1, Protocol: screen}
	bundle := GateOptions{Reference: t.TempDir(), Protocol: screen}
	for _, tc := range []struct {
		name string
		o    GateOptions
		want string
	}{
		{"an image with its model", image, ""},
		{"a bundle brings its own model", bundle, ""},
		{"an image without a model", with(image, func(o *GateOptions) { o.Model = "" }), "give --gate-model"},
		{"no per-slot context", with(image, func(o *GateOptions) { o.Parallel = 0 }), "must be 1 or more"},
		{"negative rounds", with(bundle, func(o *GateOptions) { o.Rounds = -1 }), "--gate-rounds -1"},
		{"a protocol that measures nothing", with(bundle, func(o *GateOptions) { o.Protocol.Generate = 1 }), "generate 1"},
	} {
		err := tc.o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !inputerr.Is(err)):
			t.Errorf("%s: Validate() = %v, want an inputerr.Error with %q", tc.name, err, tc.want)
		}
	}
}

func with(o GateOptions, f func(*GateOptions)) GateOptions {
	f(&o)
	return o
}

func TestOpenGateRefusesWhatItCannotJudge(t *testing.T) {
	cpu := &targets.Target{Name: "cpu-v3"}
	plans := []*pipeline.Plan{{Target: "cpu-v3", Hash: "a"}, {Target: "rtx3090", Hash: "b"}}
	o := &GateOptions{Reference: filepath.Join(t.TempDir(), "no-such-bundle"), Dir: t.TempDir()}
	if _, _, err := OpenGate(t.Context(), o, t.TempDir(), plans, cpu); err == nil || !inputerr.Is(err) || !strings.Contains(err.Error(), "publish cpu-v3 and rtx3090 separately") {
		t.Errorf("OpenGate(two targets) = %v, want an inputerr.Error naming both", err)
	}
	if _, _, err := OpenGate(t.Context(), o, t.TempDir(), plans[:1], cpu); err == nil || !inputerr.Is(err) {
		t.Errorf("OpenGate(a missing bundle) = %v, want an inputerr.Error", err)
	}
	g, cleanup, err := OpenGate(t.Context(), nil, t.TempDir(), plans, cpu)
	if g != nil || err != nil {
		t.Fatalf("OpenGate(no options) = %v, %v; want no gate and no error", g, err)
	}
	cleanup()
	if a := g.Admitter(); a != nil {
		t.Errorf("no gate's Admitter() = %#v, want a nil interface", a)
	}
}
