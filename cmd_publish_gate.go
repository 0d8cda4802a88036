package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/publish"
	"github.com/llbuild/llbuild/targets"
)

// gateFlags are publish's flags for the speed gate.
func gateFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "not-slower-than", Usage: "push a new image only when its server is not slower than the one in `BUNDLE` (make it of the image you run with bundle --image): the new artifacts are bundled as BUNDLE is (its models, arguments, environment) and benched against it, interleaved, on this machine"},
		&cli.Float64Flag{Name: "gate-ratio", Value: 0.98, Usage: "the gate refuses when every round's new/old row-0 ratio is below `R` (0.98: 2% slower in every round; above 1 asks for a speedup)"},
		&cli.IntFlag{Name: "gate-rounds", Value: 3, Usage: "interleaved A/B `ROUNDS` of the gate"},
		&cli.StringFlag{Name: "gate-mode", Value: bench.ModeScreen, Usage: "the gate's bench `MODE`: screen or full"},
		&cli.IntFlag{Name: "gate-canaries", Usage: "canary checks per run (`N`; default: the mode's)"},
		&cli.IntFlag{Name: "gate-generate", Usage: "tokens each measured row generates (`N`; default: the mode's)"},
		&cli.StringFlag{Name: "gate-dir", Value: "gate", Usage: "`DIR` for the gate's bundles, bench records and verdicts (gate-TARGET.json)"},
	}
}

// gate benches each new server against a reference bundle before its image is pushed.
type gate struct {
	ref       *bench.Bundle
	refDir    string
	target    string
	dir       string
	ratio     float64
	rounds    int
	protocol  bench.Protocol
	log       *slog.Logger
	progress  io.Writer
	invoke    []string
	mu        sync.Mutex
	verdicts  map[string]*gateVerdict
	targetsOf map[string]*targets.Target
}

// gateVerdict is what the gate decided for one target, kept in DIR/gate-TARGET.json beside the
// digest it pushed.
type gateVerdict struct {
	Target    string `json:"target"`
	Plan      string `json:"plan"`
	Reference struct {
		Bundle         string `json:"bundle"`
		ManifestSHA256 string `json:"manifestSha256"`
		PlanHash       string `json:"planHash,omitempty"`
		Image          string `json:"image,omitempty"`
	} `json:"reference"`
	Candidate string    `json:"candidate"`
	Ratio     float64   `json:"gateRatio"`
	Ratios    []float64 `json:"ratios"`
	Median    float64   `json:"median"`
	Min       float64   `json:"min"`
	Max       float64   `json:"max"`
	Verdict   string    `json:"verdict"`
	Pass      bool      `json:"pass"`
	Reason    string    `json:"reason"`
	Records   string    `json:"records"`
	// Digest and Ref are the image pushed; empty when the gate refused or the push failed.
	Digest string    `json:"digest,omitempty"`
	Ref    string    `json:"ref,omitempty"`
	Time   time.Time `json:"time"`
}

// newGate reads the flags; nil when --not-slower-than is not given.
func newGate(c *cli.Context) (*gate, error) {
	ref := c.String("not-slower-than")
	if ref == "" {
		for _, f := range []string{"gate-ratio", "gate-rounds", "gate-mode", "gate-canaries", "gate-generate", "gate-dir"} {
			if c.IsSet(f) {
				return nil, usagef("--%s needs --not-slower-than BUNDLE", f)
			}
		}
		return nil, nil
	}
	b, err := bench.OpenBundle(ref, "old")
	if err != nil {
		return nil, usagef("--not-slower-than %s: %v", ref, err)
	}
	p, err := bench.DefaultProtocol(c.String("gate-mode"))
	if err != nil {
		return nil, usagef("--gate-mode: %v", err)
	}
	if c.IsSet("gate-canaries") {
		p.Canaries = c.Int("gate-canaries")
	}
	if c.IsSet("gate-generate") {
		p.Generate = c.Int("gate-generate")
	}
	if err := p.Validate(); err != nil {
		return nil, usageError{err}
	}
	if c.Int("gate-rounds") < 1 {
		return nil, usagef("--gate-rounds must be at least 1")
	}
	if r := c.Float64("gate-ratio"); r <= 0 {
		return nil, usagef("--gate-ratio %g: want a ratio above 0 (0.98: refuse what is 2%% slower in every round)", r)
	}
	dir, err := filepath.Abs(c.String("gate-dir"))
	if err != nil {
		return nil, err
	}
	return &gate{ref: b, refDir: ref, target: b.Manifest.Target.Name, dir: dir, ratio: c.Float64("gate-ratio"), rounds: c.Int("gate-rounds"),
		protocol: p, log: loggerOf(c), progress: stderrOf(c), invoke: os.Args, verdicts: map[string]*gateVerdict{}, targetsOf: map[string]*targets.Target{}}, nil
}

// checkPlans refuses, before anything is built, plans the reference bundle cannot judge.
func (g *gate) checkPlans(specs []targetSpec, plans []*pipeline.Plan) error {
	for i, p := range plans {
		if p.Target != g.target {
			return usagef("--not-slower-than %s is a bundle for target %s; target %s cannot be judged against it: publish %s alone, or gate each target with its own bundle", g.refDir, g.target, p.Target, g.target)
		}
		t, err := loadTarget(specs[i].name, specs[i].file)
		if err != nil {
			return err
		}
		g.targetsOf[p.Hash] = t
	}
	return nil
}

// images wraps an ImageFunc: each image made is pushed only if its server passes the gate.
func (g *gate) images(next publish.ImageFunc, out string) publish.ImageFunc {
	return func(ctx context.Context, plans []*pipeline.Plan) []publish.Built {
		built := next(ctx, plans)
		for i, p := range plans {
			if i >= len(built) || built[i].Err != nil {
				continue
			}
			v, err := g.judge(ctx, p, artifacts.Dir(out, p.Target, p.Hash))
			switch {
			case err != nil:
				built[i].Err = fmt.Errorf("the gate could not judge target %s: %w; nothing pushed", p.Target, err)
			case !v.Pass:
				built[i].Err = fmt.Errorf("target %s not pushed: %s (gate verdict in %s)", p.Target, v.Reason, g.verdictFile(p.Target))
			}
		}
		return built
	}
}

func (g *gate) verdictFile(target string) string {
	return filepath.Join(g.dir, "gate-"+target+".json")
}

// judge bundles the artifacts as the reference bundle is and benches the two interleaved.
func (g *gate) judge(ctx context.Context, p *pipeline.Plan, arts string) (*gateVerdict, error) {
	t := g.targetsOf[p.Hash]
	if t == nil {
		return nil, fmt.Errorf("no target for plan %s", p.ShortHash())
	}
	cand := filepath.Join(g.dir, "bundles", p.Target+"-"+p.ShortHash())
	if err := manifest.RemakeBundle(ctx, g.refDir, t, arts, cand, g.log); err != nil {
		return nil, fmt.Errorf("bundling the new server as %s is: %w", g.refDir, err)
	}
	nb, err := bench.OpenBundle(cand, "new")
	if err != nil {
		return nil, err
	}
	g.log.Info("gate: benching the new server against the reference", "target", p.Target, "reference", g.refDir, "candidate", cand, "rounds", g.rounds)
	benchDir := filepath.Join(g.dir, "bench")
	res, err := bench.Run(ctx, []*bench.Bundle{g.ref, nb}, bench.Options{Protocol: g.protocol, Dir: benchDir, Rounds: g.rounds,
		Log: g.log, Progress: g.progress, Invocation: g.invoke})
	if res == nil {
		return nil, err
	}
	if res.Interrupted {
		return nil, errors.Join(context.Canceled, err)
	}
	v := &gateVerdict{Target: p.Target, Plan: p.Hash, Candidate: cand, Ratio: g.ratio, Records: res.RecordsFile, Time: time.Now().UTC().Truncate(time.Second)}
	v.Reference.Bundle, v.Reference.ManifestSHA256, v.Reference.PlanHash = g.refDir, g.ref.ManifestSHA256, g.ref.Manifest.Build.PlanHash
	if im := g.ref.Manifest.Build.Image; im != nil {
		v.Reference.Image = im.Ref + "@" + im.Digest
	}
	var invalid []string
	for _, r := range res.Runs {
		if !r.Valid || !r.Complete {
			why := strings.Join(r.Invalid, ", ")
			if r.Error != "" {
				why += " " + r.Error
			}
			invalid = append(invalid, fmt.Sprintf("%s round %d: %s", r.Bundle, r.Round, strings.TrimSpace(why)))
		}
	}
	var cmp *bench.Comparison
	if len(res.Comparisons) > 0 {
		cmp = res.Comparisons[0]
	}
	v.Pass, v.Reason = gateDecision(cmp, invalid, g.ratio)
	if cmp != nil {
		v.Ratios, v.Median, v.Min, v.Max, v.Verdict = cmp.Ratios, cmp.Median, cmp.Min, cmp.Max, cmp.Verdict
	}
	g.mu.Lock()
	g.verdicts[p.Target] = v
	g.mu.Unlock()
	if err := g.write(v); err != nil {
		return nil, err
	}
	level := slog.LevelInfo
	if !v.Pass {
		level = slog.LevelWarn
	}
	g.log.Log(ctx, level, "gate: "+v.Reason, "target", p.Target, "pass", v.Pass)
	return v, nil
}

// gateDecision says whether a new server may be pushed: every run valid, and not below ratio in
// every round (the spread rule the bench's verdicts use: one round at or above it is within the
// rounds' own spread).
func gateDecision(cmp *bench.Comparison, invalid []string, ratio float64) (bool, string) {
	if len(invalid) > 0 {
		return false, "a run is not valid, so the speed cannot be judged and the new server may be broken: " + strings.Join(invalid, "; ")
	}
	if cmp == nil || len(cmp.Ratios) == 0 {
		return false, "no round measured both servers"
	}
	summary := fmt.Sprintf("new/old row 0 median %.3f (%.3f-%.3f, %d rounds)", cmp.Median, cmp.Min, cmp.Max, len(cmp.Ratios))
	if slices.ContainsFunc(cmp.Ratios, func(r float64) bool { return r >= ratio }) {
		return true, fmt.Sprintf("not slower: %s; not below %.3f in every round", summary, ratio)
	}
	return false, fmt.Sprintf("slower: %s; below %.3f in every round", summary, ratio)
}

func (g *gate) write(v *gateVerdict) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(g.verdictFile(v.Target), append(b, '\n'), 0o644)
}

// pushed records the digest each gated image was pushed as, beside its verdict.
func (g *gate) pushed(results []publish.Result) error {
	var errs []error
	for _, r := range results {
		g.mu.Lock()
		v := g.verdicts[r.Target]
		g.mu.Unlock()
		if v == nil {
			if r.Existing {
				g.log.Info("gate: the image was published before; not benched again", "target", r.Target, "ref", r.Ref)
			}
			continue
		}
		if r.Err == nil && v.Pass {
			v.Digest, v.Ref = r.Digest, r.Ref
		}
		errs = append(errs, g.write(v))
	}
	return errors.Join(errs...)
}
