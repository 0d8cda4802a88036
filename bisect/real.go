package bisect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	slashpath "path" // the tests' path() helper takes the package's name
	"path/filepath"
	"slices"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// PlanBuilder builds a commit as llbuild build does: the recipe with its source moved to the
// commit (committer time and build number read from the history), resolved for the target
// with the series, carried out by an executor. Artifacts already built from the same plan are
// reused.
type PlanBuilder struct {
	Repo     string
	Target   *targets.Target
	Recipe   *recipes.Recipe
	Series   []patches.Patch
	Executor pipeline.Executor
	Out      string
	Options  pipeline.Options
	Log      *slog.Logger
}

var _ Builder = (*PlanBuilder)(nil)

// Plan resolves the plan of commit c.
func (b *PlanBuilder) Plan(ctx context.Context, c gitref.Commit) (*pipeline.Plan, error) {
	r, err := b.Recipe.At(ctx, b.Repo, c, "")
	if err != nil {
		return nil, err
	}
	return pipeline.Resolve(b.Target, r, b.Series, nil, b.Options)
}

// Build builds c, or finds its artifacts built already.
func (b *PlanBuilder) Build(ctx context.Context, c gitref.Commit) (*Build, error) {
	p, err := b.Plan(ctx, c)
	if err != nil {
		return nil, err
	}
	dir := artifacts.Dir(b.Out, p.Target, p.Hash)
	if a, err := artifacts.Open(dir); err == nil && a.Provenance.PlanHash == p.Hash {
		return &Build{Dir: dir, PlanHash: p.Hash, Reused: true}, nil
	}
	t0 := time.Now()
	got, err := b.Executor.Build(ctx, p, b.Out)
	if err != nil {
		return nil, err
	}
	return &Build{Dir: got, PlanHash: p.Hash, Seconds: time.Since(t0).Round(time.Second).Seconds()}, nil
}

// ReadLister is an executor that can list the source files a build of a plan it made read
// (the host executor from the build tree ninja left in its work directory, the Dagger executor
// from the list it kept when it built).
type ReadLister interface {
	Reads(ctx context.Context, p *pipeline.Plan) ([]string, error)
}

var _ InertFinder = (*PlanBuilder)(nil)

// Inert reads what the builds of built read (those whose build trees this machine's executor
// still has) and returns the indexes of commits (a campaign's path) whose changes against their parents touch none
// of it, by Inert's rule; nil when the executor cannot list reads or no build tree is here.
func (b *PlanBuilder) Inert(ctx context.Context, commits []gitref.Commit, built []gitref.Commit) (*Inert, error) {
	rl, ok := b.Executor.(ReadLister)
	if !ok {
		return nil, nil
	}
	reads, dirs := map[string]bool{}, map[string]bool{}
	out := &Inert{Commits: []int{}}
	for _, c := range built {
		p, err := b.Plan(ctx, c)
		if err != nil {
			return nil, err
		}
		files, err := rl.Reads(ctx, p)
		if err != nil {
			b.logger().Debug("bisect: no reads for a build", "commit", c.Short(), "err", err)
			continue
		}
		for _, f := range files {
			reads[f] = true
			dirs[slashpath.Dir(f)] = true
		}
		out.From = append(out.From, c.Hash)
	}
	if len(out.From) == 0 {
		return nil, nil
	}
	out.Reads = len(reads)
	for i := 1; i < len(commits); i++ {
		changes, err := gitref.Changes(ctx, b.Repo, commits[i-1].Hash, commits[i].Hash)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(changes, func(ch gitref.Change) bool {
			return reads[ch.Path] || ch.Status == 'A' && dirs[slashpath.Dir(ch.Path)]
		}) {
			out.Commits = append(out.Commits, i)
		}
	}
	return out, nil
}

func (b *PlanBuilder) logger() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}

// Metrics a campaign can judge by; higher is better for each.
const (
	MetricRow0       = "row0"        // row 0's decode tok/s by llama-server's timings
	MetricRow0Client = "row0-client" // row 0's decode tok/s by the bench's clock
	MetricRepeated   = "repeated"    // the mean decode tok/s of rows 1..N-1
)

// Metrics lists the metrics.
var Metrics = []string{MetricRow0, MetricRow0Client, MetricRepeated}

// MetricOf reads a metric from a bench record; ok is false when the run has none.
func MetricOf(metric string, r *bench.Record) (float64, bool) {
	switch metric {
	case MetricRow0:
		return r.Summary.Row0TPS, r.Summary.Row0TPS > 0
	case MetricRow0Client:
		return r.Summary.Row0ClientTPS, r.Summary.Row0ClientTPS > 0
	case MetricRepeated:
		if r.Summary.RepeatedMeanTPS == nil {
			return 0, false
		}
		return *r.Summary.RepeatedMeanTPS, *r.Summary.RepeatedMeanTPS > 0
	}
	return 0, false
}

// BenchMeasurer measures with llbuild bench: each side's artifacts bundled as the template
// bundle is (its models hard-linked, not copied), the two bundles benched interleaved on this
// machine, each run's record kept in the campaign's bench directory.
type BenchMeasurer struct {
	// Dir is the campaign directory: bundles/ holds the bundles made, bench/ the bench's
	// campaign (records.json, runs/).
	Dir      string
	Template string
	Target   *targets.Target
	Protocol bench.Protocol
	Metric   string
	// ReadyTimeout, Log, Progress and Invocation are passed to the bench.
	ReadyTimeout time.Duration
	Log          *slog.Logger
	Progress     io.Writer
	Invocation   []string
}

var _ Bencher = (*BenchMeasurer)(nil)

// BundleDir is where the bundle of a build is made in the campaign.
func (m *BenchMeasurer) BundleDir(s Side) string {
	return filepath.Join(m.Dir, "bundles", s.Commit.Short()+"-"+shortPlan(s.Build.PlanHash))
}

func shortPlan(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Bundle makes (or finds) the bundle of one side.
func (m *BenchMeasurer) Bundle(ctx context.Context, s Side) (*bench.Bundle, error) {
	dir := m.BundleDir(s)
	name := s.Commit.Short()
	if _, err := os.Stat(filepath.Join(dir, manifest.FileName)); err == nil {
		if b, err := bench.OpenBundle(dir, name); err == nil && b.Manifest.Build.PlanHash == s.Build.PlanHash {
			return b, nil
		}
	}
	if err := manifest.RemakeBundle(ctx, m.Template, m.Target, s.Build.Dir, dir, m.Log); err != nil {
		return nil, fmt.Errorf("bundling %s: %w", s.Commit.Short(), err)
	}
	return bench.OpenBundle(dir, name)
}

// Measure benches b against a for rounds interleaved rounds.
func (m *BenchMeasurer) Measure(ctx context.Context, a, b Side, rounds int) (*Measurement, error) {
	ba, err := m.Bundle(ctx, a)
	if err != nil {
		return nil, err
	}
	bb, err := m.Bundle(ctx, b)
	if err != nil {
		return nil, err
	}
	benchDir := filepath.Join(m.Dir, "bench")
	res, err := bench.Run(ctx, []*bench.Bundle{ba, bb}, bench.Options{
		Protocol: m.Protocol, Dir: benchDir, Rounds: rounds, Log: m.Log, Progress: m.Progress,
		ReadyTimeout: m.ReadyTimeout, Invocation: m.Invocation,
	})
	if res == nil {
		return nil, err
	}
	if res.Interrupted {
		return nil, errors.Join(context.Canceled, err)
	}
	out := &Measurement{A: a.Commit.Hash, B: b.Commit.Hash}
	byRound := map[int][2]*bench.Record{}
	for _, r := range res.Runs {
		pair := byRound[r.Round]
		if r.Bundle == ba.Name && pair[0] == nil {
			pair[0] = r
		} else {
			pair[1] = r
		}
		byRound[r.Round] = pair
		if rel, err := filepath.Rel(m.Dir, filepath.Join(r.Dir, "record.json")); err == nil {
			out.Records = append(out.Records, rel)
		}
	}
	for round := 0; round < rounds; round++ {
		pair := byRound[round]
		var vals [2]float64
		ok := true
		for i, r := range pair {
			if r == nil {
				side := []string{a.Commit.Short(), b.Commit.Short()}[i]
				out.Invalid = append(out.Invalid, fmt.Sprintf("%s round %d: not run", side, round))
				ok = false
				continue
			}
			v, has := MetricOf(m.Metric, r)
			vals[i] = v
			if !r.Valid || !r.Complete || !has {
				// a side's bundle is named by its commit (Bundle)
				out.Invalid = append(out.Invalid, bench.InvalidRun(r))
				ok = false
			}
		}
		out.AValue, out.BValue = append(out.AValue, vals[0]), append(out.BValue, vals[1])
		if ok {
			out.Ratios = append(out.Ratios, vals[1]/vals[0])
		}
	}
	out.summarize()
	return out, nil
}
