package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/imagebundle"
	"github.com/llbuild/llbuild/internal/digest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish"
	"github.com/llbuild/llbuild/targets"
)

// gateFlags are publish's flags for the speed gate.
func gateFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "not-slower-than", Usage: "push a new image, or move a tag to one the registry holds, only when the judge says its server is not slower than `REF`'s: a bundle directory or archive, or an image (" + image.SpecForms + ") bundled as bundle --image does with --gate-model. The image's artifacts are bundled as the reference is and benched against it, interleaved, on this machine"},
		&cli.StringFlag{Name: "gate-model", Usage: "with an image as --not-slower-than: the model `FILE.gguf` both sides serve"},
		&cli.StringFlag{Name: "gate-draft", Usage: "with an image as --not-slower-than: a draft model `FILE.gguf`"},
		&cli.IntFlag{Name: "gate-ctx-size", Value: 4096, Usage: "with an image as --not-slower-than: llama-server --ctx-size `N` of both sides"},
		&cli.IntFlag{Name: "gate-parallel", Value: 1, Usage: "with an image as --not-slower-than: llama-server --parallel `N` of both sides (so both have the same per-slot context)"},
		&cli.IntFlag{Name: "gate-rounds", Usage: "interleaved A/B `ROUNDS` of the gate (default: the fewest the judge can decide with, 6 at --alpha 0.05)"},
		&cli.StringFlag{Name: "gate-mode", Value: bench.ModeScreen, Usage: "the gate's bench `MODE`: screen or full"},
		&cli.IntFlag{Name: "gate-canaries", Usage: "canary checks per run (`N`; default: the mode's)"},
		&cli.IntFlag{Name: "gate-generate", Usage: "tokens each measured row generates (`N`; default: the mode's)"},
		&cli.BoolFlag{Name: "gate-chat", Usage: "send the rows' prompt as a chat turn (bench --chat)"},
		&cli.StringFlag{Name: "gate-dir", Value: "gate", Usage: "`DIR` for the gate's bundles, bench records and verdicts (verdicts/DIGEST-REFERENCE.json, gate-TARGET.json)"},
		&cli.Float64Flag{Name: "gate-ratio", Hidden: true},
	}, judgeFlags()...)
}

// gateOptions is what the gate was asked, read from the flags; open makes the gate.
type gateOptions struct {
	Ref          string
	Model, Draft string
	CtxSize      int
	Parallel     int
	Dir          string
	Rounds       int
	Protocol     bench.Protocol
	Judge        bench.Judge
}

// gateOptionsOf reads the flags; nil when --not-slower-than is not given.
func gateOptionsOf(c *cli.Context) (*gateOptions, error) {
	if c.IsSet("gate-ratio") {
		return nil, usagef("--gate-ratio is gone: the gate asks the bench's judge (Wilcoxon's signed-rank test at --alpha, differences under --min-step ignored) whether the new server is slower")
	}
	ref := c.String("not-slower-than")
	if ref == "" {
		for _, f := range []string{"gate-model", "gate-draft", "gate-ctx-size", "gate-parallel", "gate-rounds", "gate-mode", "gate-canaries", "gate-generate", "gate-chat", "gate-dir", "alpha", "min-step"} {
			if c.IsSet(f) {
				return nil, usagef("--%s needs --not-slower-than REF", f)
			}
		}
		return nil, nil
	}
	o := &gateOptions{Ref: ref, Model: c.String("gate-model"), Draft: c.String("gate-draft"), CtxSize: c.Int("gate-ctx-size"),
		Parallel: c.Int("gate-parallel"), Rounds: c.Int("gate-rounds")}
	var err error
	if o.Judge, err = judgeOf(c); err != nil {
		return nil, err
	}
	if o.Protocol, err = bench.DefaultProtocol(c.String("gate-mode")); err != nil {
		return nil, usagef("--gate-mode: %v", err)
	}
	if c.IsSet("gate-canaries") {
		o.Protocol.Canaries = c.Int("gate-canaries")
	}
	if c.IsSet("gate-generate") {
		o.Protocol.Generate = c.Int("gate-generate")
	}
	o.Protocol.Chat = c.Bool("gate-chat")
	if err := o.Protocol.Validate(); err != nil {
		return nil, usageError{err}
	}
	if o.Rounds < 0 {
		return nil, usagef("--gate-rounds %d: want 1 or more", o.Rounds)
	}
	if o.Rounds == 0 {
		o.Rounds = bench.RoundsNeeded(o.Judge.Alpha)
	}
	if o.Dir, err = filepath.Abs(c.String("gate-dir")); err != nil {
		return nil, err
	}
	if isImageRef(ref) {
		if o.Model == "" {
			return nil, usagef("--not-slower-than %s is an image: give --gate-model FILE.gguf, the model both sides serve", ref)
		}
		if o.CtxSize < 1 || o.Parallel < 1 {
			return nil, usagef("--gate-ctx-size and --gate-parallel must be 1 or more")
		}
		return o, nil
	}
	for _, f := range []string{"gate-model", "gate-draft", "gate-ctx-size", "gate-parallel"} {
		if c.IsSet(f) {
			return nil, usagef("--%s is for an image as --not-slower-than; bundle %s brings its own", f, ref)
		}
	}
	return o, nil
}

// isImageRef says a --not-slower-than names an image: one of image.Open's prefixed forms, or,
// where no such path exists here, a reference with a tag or a registry host (ghcr.io/o/r,
// localhost:5000/r, repo:tag). Anything else is a bundle path, and a missing one says so.
func isImageRef(ref string) bool {
	for _, p := range []string{"oci-archive:", "oci-layout:", "docker-archive:"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	if _, err := os.Stat(ref); err == nil {
		return false
	}
	first, _, _ := strings.Cut(ref, "/")
	return strings.Contains(ref, ":") || strings.Contains(ref, "@") || strings.ContainsAny(first, ".:") && strings.Contains(ref, "/")
}

// open makes the gate for the plans: the reference bundle found, unpacked or made from its image
// for their one target. cleanup removes what was unpacked.
func (o *gateOptions) open(ctx context.Context, specs []targetSpec, plans []*pipeline.Plan, out string, s streams) (*publish.Gate, func(), error) {
	log := s.Log
	ts := map[string]*targets.Target{}
	var target *targets.Target
	for i, p := range plans {
		t, err := loadTarget(specs[i].name, specs[i].file)
		if err != nil {
			return nil, nil, err
		}
		if target != nil && t.Name != target.Name {
			return nil, nil, usagef("--not-slower-than judges one target; publish %s and %s separately, each with its own reference", target.Name, t.Name)
		}
		ts[p.Hash], target = t, t
	}
	dir, cleanup := "", func() {}
	if isImageRef(o.Ref) {
		var err error
		if dir, err = o.bundleImage(ctx, target, log); err != nil {
			return nil, nil, err
		}
	} else {
		var err error
		if dir, cleanup, err = bundleDir(ctx, o.Ref); err != nil {
			return nil, nil, err
		}
	}
	ref, err := bench.OpenBundle(dir, "old")
	if err != nil {
		cleanup()
		return nil, nil, usagef("--not-slower-than %s: %v", o.Ref, err)
	}
	if ref.Manifest.Target.Name != target.Name {
		cleanup()
		return nil, nil, usagef("--not-slower-than %s is a bundle for target %s; target %s cannot be judged against it: publish %s alone, or gate each target with its own bundle", o.Ref, ref.Manifest.Target.Name, target.Name, ref.Manifest.Target.Name)
	}
	return &publish.Gate{Reference: ref, ReferenceDir: dir, Out: out, Targets: ts, Dir: o.Dir, Rounds: o.Rounds, Protocol: o.Protocol,
		Judge: o.Judge, Log: log, Progress: s.Stderr, Invocation: os.Args}, cleanup, nil
}

// bundleImage makes the reference bundle of an image, as bundle --image does, in the gate's
// directory (kept: the verdicts name it), with explicit --ctx-size and --parallel.
func (o *gateOptions) bundleImage(ctx context.Context, t *targets.Target, log *slog.Logger) (string, error) {
	dir := filepath.Join(o.Dir, "reference", digest.SHA256Hex([]byte(o.Ref + "\x00" + o.Model + "\x00" + o.Draft + fmt.Sprint(o.CtxSize, o.Parallel)))[:16])
	server, cleanup, err := imagebundle.Server(ctx, log, o.Ref, filepath.Dir(dir), t)
	if err != nil {
		return "", usageOf(fmt.Errorf("--not-slower-than: %w", err))
	}
	defer cleanup()
	ctxSize, parallel := o.CtxSize, o.Parallel
	in := manifest.BundleInput{Target: t, Server: server, Model: o.Model, Draft: o.Draft, Env: map[string]string{},
		Knobs: manifest.ServerKnobs{CtxSize: &ctxSize, Parallel: &parallel, ScoresAlone: false}}
	plan, err := manifest.PlanBundle(in)
	if err != nil {
		return "", usageOf(fmt.Errorf("bundling --not-slower-than %s: %w", o.Ref, err))
	}
	if _, err := manifest.WriteBundle(ctx, plan, manifest.BundleOutput{Dir: dir, Force: true, Link: true, Log: log}); err != nil {
		return "", fmt.Errorf("bundling --not-slower-than %s: %w", o.Ref, err)
	}
	return dir, nil
}
