package publish

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/imagebundle"
	"github.com/llbuild/llbuild/internal/digest"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

// GateOptions is what the speed gate is asked: the reference the new servers must not be
// slower than, how to bundle it when it is an image, and the bench's protocol, rounds and judge.
type GateOptions struct {
	// Reference is a bundle (directory or archive) or an image (imagebundle.IsImageRef).
	Reference string
	// Model, Draft, CtxSize and Parallel bundle an image Reference as bundle --image does; a
	// bundle brings its own.
	Model, Draft      string
	CtxSize, Parallel int
	// Dir keeps the gate's bundles, bench campaign and verdicts; absolute.
	Dir string
	// Rounds is how many interleaved A/B rounds are benched; 0 means the fewest the judge can
	// decide with.
	Rounds     int
	Protocol   bench.Protocol
	Judge      bench.Judge
	Log        *slog.Logger
	Progress   io.Writer
	Invocation []string
}

// Validate says what is wrong with o, as an inputerr.Error: the caller's to fix.
func (o GateOptions) Validate() error {
	if err := o.Protocol.Validate(); err != nil {
		return &inputerr.Error{Err: err}
	}
	if o.Rounds < 0 {
		return inputerr.Errorf("--gate-rounds %d: want 1 or more", o.Rounds)
	}
	if !imagebundle.IsImageRef(o.Reference) {
		return nil
	}
	if o.Model == "" {
		return inputerr.Errorf("--not-slower-than %s is an image: give --gate-model FILE.gguf, the model both sides serve", o.Reference)
	}
	if o.CtxSize < 1 || o.Parallel < 1 {
		return inputerr.Errorf("--gate-ctx-size and --gate-parallel must be 1 or more")
	}
	return nil
}

// OpenGate makes the gate for the plans of target, their artifacts under out: the reference
// bundle found, unpacked, or made from its image for that target. Without options there is no
// gate: nil and a cleanup that does nothing. Errors the caller can fix (a plan of another
// target, a reference that is no bundle or of another target) are inputerr.Errors. cleanup
// removes what was unpacked.
func OpenGate(ctx context.Context, opts *GateOptions, out string, plans []*pipeline.Plan, target *targets.Target) (g *Gate, cleanup func(), err error) {
	if opts == nil {
		return nil, func() {}, nil
	}
	o := *opts
	byPlan := map[string]*targets.Target{}
	for _, p := range plans {
		if p.Target != target.Name {
			return nil, nil, inputerr.Errorf("--not-slower-than judges one target; publish %s and %s separately, each with its own reference", target.Name, p.Target)
		}
		byPlan[p.Hash] = target
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, cleanup := "", func() {}
	if imagebundle.IsImageRef(o.Reference) {
		if dir, err = bundleImage(ctx, o, target, log); err != nil {
			return nil, nil, err
		}
	} else if dir, cleanup, err = manifest.OpenDir(ctx, o.Reference); err != nil {
		return nil, nil, &inputerr.Error{Err: err}
	}
	ref, err := bench.OpenBundle(dir, "old")
	if err != nil {
		cleanup()
		return nil, nil, inputerr.Errorf("--not-slower-than %s: %v", o.Reference, err)
	}
	if ref.Manifest.Target.Name != target.Name {
		cleanup()
		return nil, nil, inputerr.Errorf("--not-slower-than %s is a bundle for target %s; target %s cannot be judged against it: publish %s alone, or gate each target with its own bundle", o.Reference, ref.Manifest.Target.Name, target.Name, ref.Manifest.Target.Name)
	}
	rounds := o.Rounds
	if rounds == 0 {
		rounds = bench.RoundsNeeded(o.Judge.Alpha)
	}
	return &Gate{Reference: ref, ReferenceDir: dir, Out: out, Targets: byPlan, Dir: o.Dir, Rounds: rounds, Protocol: o.Protocol,
		Judge: o.Judge, Log: o.Log, Progress: o.Progress, Invocation: o.Invocation}, cleanup, nil
}

// bundleImage makes the reference bundle of an image, as bundle --image does, in the gate's
// directory (kept: the verdicts name it), with explicit --ctx-size and --parallel so that both
// sides have the same per-slot context.
func bundleImage(ctx context.Context, o GateOptions, t *targets.Target, log *slog.Logger) (string, error) {
	dir := filepath.Join(o.Dir, "reference", digest.SHA256Hex([]byte(o.Reference + "\x00" + o.Model + "\x00" + o.Draft + fmt.Sprint(o.CtxSize, o.Parallel)))[:16])
	server, cleanup, err := imagebundle.Server(ctx, log, o.Reference, filepath.Dir(dir), t)
	if err != nil {
		return "", fmt.Errorf("--not-slower-than: %w", err)
	}
	defer cleanup()
	ctxSize, parallel := o.CtxSize, o.Parallel
	in := manifest.BundleInput{Target: t, Server: server, Model: o.Model, Draft: o.Draft, Env: map[string]string{},
		Knobs: manifest.ServerKnobs{CtxSize: &ctxSize, Parallel: &parallel, ScoresAlone: false}}
	plan, err := manifest.PlanBundle(in)
	if err != nil {
		return "", fmt.Errorf("bundling --not-slower-than %s: %w", o.Reference, err)
	}
	if _, err := manifest.WriteBundle(ctx, plan, manifest.BundleOutput{Dir: dir, Force: true, Link: true, Log: log}); err != nil {
		return "", fmt.Errorf("bundling --not-slower-than %s: %w", o.Reference, err)
	}
	return dir, nil
}

// Admitter is g as Options.Gate takes it: nil for no gate, not an Admitter holding a nil *Gate.
func (g *Gate) Admitter() Admitter {
	if g == nil {
		return nil
	}
	return g
}
