package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

// Gate admits an image for publishing only with the bench judge's verdict for that image's
// digest against a reference bundle: benched now (the image's artifacts bundled as the reference
// is, the two interleaved on this machine), or a verdict recorded for the same digest, reference
// and settings. It refuses on a slower verdict, on too few rounds to decide, on a run that is not
// valid, and when the two servers ran with different per-slot contexts.
type Gate struct {
	// Reference is the bundle the new servers must not be slower than; ReferenceDir its
	// directory, as RemakeBundle reads it.
	Reference    *bench.Bundle
	ReferenceDir string
	// Out is the artifacts' root (artifacts.Dir); Targets the target of each plan, by hash.
	Out     string
	Targets map[string]*targets.Target
	// Dir keeps the gate's bundles, bench campaign and verdicts.
	Dir          string
	Rounds       int
	Protocol     bench.Protocol
	Judge        bench.Judge
	ReadyTimeout time.Duration
	Log          *slog.Logger
	Progress     io.Writer
	Invocation   []string

	mu       sync.Mutex
	verdicts map[string]*GateVerdict
}

var _ Admitter = (*Gate)(nil)

// GateVerdict is what the gate decided for one image, kept in DIR/verdicts/ by the image's
// digest and the reference's manifest, and as DIR/gate-TARGET.json (the target's latest).
type GateVerdict struct {
	Target string `json:"target"`
	Plan   string `json:"plan"`
	// Digest is the image judged: the only one this verdict lets out.
	Digest    string `json:"digest"`
	Reference struct {
		Bundle         string `json:"bundle"`
		ManifestSHA256 string `json:"manifestSha256"`
		PlanHash       string `json:"planHash,omitempty"`
		Image          string `json:"image,omitempty"`
	} `json:"reference"`
	Candidate string `json:"candidate"`
	// Settings is what the measurement was taken and judged with: a recorded verdict stands
	// for a later publish only with the same.
	Settings string        `json:"settings"`
	Verdict  bench.Verdict `json:"verdict"`
	Ratios   []float64     `json:"ratios"`
	// SlotContext is each side's per-slot context as its servers reported it (old, new).
	SlotContext [2]int `json:"slotContext"`
	Pass        bool   `json:"pass"`
	Reason      string `json:"reason"`
	Records     string `json:"records,omitempty"`
	// Recorded says the verdict was read from an earlier publish, not benched now.
	Recorded bool `json:"recorded,omitempty"`
	// Ref is where the image was pushed or its tags moved; empty when refused or failed.
	Ref  string    `json:"ref,omitempty"`
	Time time.Time `json:"time"`
}

func (g *Gate) settings() string {
	j := g.Judge
	return fmt.Sprintf("%s rounds=%d test=%s alpha=%g min-step=%g", g.Protocol.Key(), g.Rounds, j.Test, j.Alpha, j.MinStep)
}

func (g *Gate) store(d string) string {
	return filepath.Join(g.Dir, "verdicts", strings.TrimPrefix(d, "sha256:")+"-"+short(g.Reference.ManifestSHA256)+".json")
}

func short(s string) string { return s[:min(16, len(s))] }

// Verdict is the gate's verdict for a target in this publish, nil when it judged none.
func (g *Gate) Verdict(target string) *GateVerdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verdicts[target]
}

// Admit judges the image of p with this digest: nil when it may be pushed and its tags moved.
func (g *Gate) Admit(ctx context.Context, p *pipeline.Plan, digest string) error {
	v, err := g.verdict(ctx, p, digest)
	if err != nil {
		return fmt.Errorf("the gate could not judge it: %w", err)
	}
	g.mu.Lock()
	if g.verdicts == nil {
		g.verdicts = map[string]*GateVerdict{}
	}
	g.verdicts[p.Target] = v
	g.mu.Unlock()
	if err := g.write(v); err != nil {
		return err
	}
	level := slog.LevelInfo
	if !v.Pass {
		level = slog.LevelWarn
	}
	g.logger().Log(ctx, level, "gate: "+v.Reason, "target", p.Target, "digest", digest, "pass", v.Pass, "recorded", v.Recorded)
	if !v.Pass {
		return fmt.Errorf("%s (gate verdict in %s)", v.Reason, g.store(digest))
	}
	return nil
}

func (g *Gate) logger() *slog.Logger {
	if g.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Log
}

// verdict reads the recorded verdict for the digest, reference and settings, or benches.
func (g *Gate) verdict(ctx context.Context, p *pipeline.Plan, d string) (*GateVerdict, error) {
	if b, err := os.ReadFile(g.store(d)); err == nil {
		var v GateVerdict
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", g.store(d), err)
		}
		if v.Digest == d && v.Reference.ManifestSHA256 == g.Reference.ManifestSHA256 && v.Settings == g.settings() {
			v.Recorded = true
			return &v, nil
		}
		g.logger().Info("gate: a verdict for this image was taken with other settings; benching again", "was", v.Settings, "now", g.settings())
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	t := g.Targets[p.Hash]
	if t == nil {
		return nil, fmt.Errorf("no target for plan %s", p.ShortHash())
	}
	cand := filepath.Join(g.Dir, "bundles", p.Target+"-"+p.ShortHash())
	if err := manifest.RemakeBundle(ctx, g.ReferenceDir, t, artifacts.Dir(g.Out, p.Target, p.Hash), cand, g.Log); err != nil {
		return nil, fmt.Errorf("bundling the new server as %s is: %w", g.ReferenceDir, err)
	}
	nb, err := bench.OpenBundle(cand, "new")
	if err != nil {
		return nil, err
	}
	g.logger().Info("gate: benching the new server against the reference", "target", p.Target, "reference", g.ReferenceDir, "candidate", cand, "rounds", g.Rounds)
	res, err := bench.Run(ctx, []*bench.Bundle{g.Reference, nb}, bench.Options{Protocol: g.Protocol, Dir: filepath.Join(g.Dir, "bench"), Rounds: g.Rounds,
		Judge: g.Judge, ReadyTimeout: g.ReadyTimeout, Log: g.Log, Progress: g.Progress, Invocation: g.Invocation})
	if res == nil {
		return nil, err
	}
	if res.Interrupted {
		return nil, errors.Join(context.Canceled, err)
	}
	v := &GateVerdict{Target: p.Target, Plan: p.Hash, Digest: d, Candidate: cand, Settings: g.settings(), Records: res.RecordsFile,
		Time: time.Now().UTC().Truncate(time.Second)}
	v.Reference.Bundle, v.Reference.ManifestSHA256, v.Reference.PlanHash = g.ReferenceDir, g.Reference.ManifestSHA256, g.Reference.Manifest.Build.PlanHash
	if im := g.Reference.Manifest.Build.Image; im != nil {
		v.Reference.Image = im.Ref + "@" + im.Digest
	}
	var invalid []string
	for _, r := range res.Runs {
		side := 0
		if r.Bundle == nb.Name {
			side = 1
		}
		if v.SlotContext[side] == 0 {
			v.SlotContext[side] = r.Server.SlotContext
		}
		if !r.Valid || !r.Complete {
			invalid = append(invalid, bench.InvalidRun(r))
		}
	}
	var cmp *bench.Comparison
	if len(res.Comparisons) > 0 {
		cmp = res.Comparisons[0]
		v.Verdict, v.Ratios = cmp.Verdict, cmp.Ratios
	}
	v.Pass, v.Reason = GateDecision(cmp, invalid, v.SlotContext)
	return v, nil
}

// GateDecision says whether a new server may go out: every run valid, both sides at the same
// per-slot context, and a judge's verdict that is not slower. Too few rounds to decide refuses:
// "not slower" is a verdict, not the absence of one.
func GateDecision(cmp *bench.Comparison, invalid []string, slotContext [2]int) (bool, string) {
	switch {
	case len(invalid) > 0:
		return false, "a run is not valid, so the speed cannot be judged and the new server may be broken: " + strings.Join(invalid, "; ")
	case slotContext[0] != slotContext[1]:
		return false, fmt.Sprintf("the two servers ran with different per-slot contexts (old %d tokens, new %d): their figures are not comparable; bundle the reference with explicit --ctx-size and --parallel", slotContext[0], slotContext[1])
	case cmp == nil || len(cmp.Ratios) == 0:
		return false, "no round measured both servers"
	}
	v := cmp.Verdict
	switch v.Kind {
	case bench.Slower:
		return false, "new/old is " + v.Text
	case bench.NotEnoughRounds:
		return false, "new/old: " + v.Text + "; raise --gate-rounds"
	case bench.Faster, bench.NoDifference:
		return true, "not slower: new/old " + v.Text
	}
	return false, "no verdict: " + v.Text
}

// Pushed records where each admitted image went, beside its verdict.
func (g *Gate) Pushed(results []Result) error {
	var errs []error
	for _, r := range results {
		v := g.Verdict(r.Target)
		if v == nil {
			continue
		}
		if r.Err == nil && v.Pass && r.Digest == v.Digest {
			v.Ref = r.Ref
		}
		errs = append(errs, g.write(v))
	}
	return errors.Join(errs...)
}

func (g *Gate) write(v *GateVerdict) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := os.MkdirAll(filepath.Join(g.Dir, "verdicts"), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(g.store(v.Digest), b, 0o644); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(g.Dir, "gate-"+v.Target+".json"), b, 0o644)
}
