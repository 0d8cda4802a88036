package bisect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/llbuild/llbuild/internal/gitref"
)

// Builder builds one commit for the campaign's target and series; the same commit built
// twice on one machine is expected to come back from its artifacts, by plan hash.
type Builder interface {
	Build(ctx context.Context, c gitref.Commit) (*Build, error)
}

// Side is one side of a measurement: a commit and its build.
type Side struct {
	Commit gitref.Commit
	Build  *Build
}

// Bencher measures b against a: rounds runs of each, interleaved (a b a b ...) on one device,
// each run's metric and the records kept in the campaign.
type Bencher interface {
	Measure(ctx context.Context, a, b Side, rounds int) (*Measurement, error)
}

// Options configure Run.
type Options struct {
	// Dir is the campaign directory: the log, and whatever the bencher keeps there.
	Dir string
	// Settings and Path start a new campaign; with a log already in Dir, Settings (when set)
	// must equal the log's.
	Settings *Settings
	Path     []gitref.Commit
	Builder  Builder
	Bencher  Bencher
	// MaxProbes stops the run after that many measured commits (ends and confirmation
	// included), 0 for none: a GPU machine lent for a while does a part and the log goes on.
	MaxProbes int
	// Machine names where this run measures, written with each event.
	Machine string
	Log     *slog.Logger
	now     func() time.Time
}

// ErrSettingsDiffer is wrapped when a resumed run is given other settings than its log's.
var ErrSettingsDiffer = errors.New("the settings differ from the campaign's")

// Open reads the campaign of o.Dir, or starts one from o.Settings and o.Path.
func Open(o Options) (*Log, error) {
	l, err := ReadLog(o.Dir)
	switch {
	case errors.Is(err, ErrNoLog):
		if o.Settings == nil || len(o.Path) < 2 {
			return nil, fmt.Errorf("%s holds no campaign to resume: start one with --source, --good, --bad, --target and --template", o.Dir)
		}
		l = &Log{Dir: o.Dir}
		if err := l.Append(Event{Kind: EventStart, Time: o.time(), Machine: o.Machine, Settings: o.Settings, Path: o.Path}); err != nil {
			return nil, err
		}
		return l, nil
	case err != nil:
		return nil, err
	}
	if o.Settings != nil {
		if diff := compareSettings(l.Start().Settings, o.Settings); diff != "" {
			return nil, fmt.Errorf("%s is a campaign with other settings (%s): %w; resume it without them, or give another --dir", o.Dir, diff, ErrSettingsDiffer)
		}
	}
	return l, nil
}

func compareSettings(a, b *Settings) string {
	switch {
	case a.Good.Hash != b.Good.Hash:
		return fmt.Sprintf("good %s, not %s", a.Good.Short(), b.Good.Short())
	case a.Bad.Hash != b.Bad.Hash:
		return fmt.Sprintf("bad %s, not %s", a.Bad.Short(), b.Bad.Short())
	case a.Target != b.Target:
		return fmt.Sprintf("target %s, not %s", a.Target, b.Target)
	case fmt.Sprint(a.SeriesPatches) != fmt.Sprint(b.SeriesPatches):
		return fmt.Sprintf("series %s %v, not %s %v", a.Series, a.SeriesPatches, b.Series, b.SeriesPatches)
	case a.TemplateIdentity != b.TemplateIdentity:
		return fmt.Sprintf("template %s (%s), not %s (%s)", a.Template, a.TemplateIdentity, b.Template, b.TemplateIdentity)
	case a.Mode != b.Mode || a.Rounds != b.Rounds || a.MaxRounds != b.MaxRounds || a.Metric != b.Metric:
		return fmt.Sprintf("--mode %s --rounds %d --max-rounds %d --metric %s, not %s %d %d %s", a.Mode, a.Rounds, a.MaxRounds, a.Metric, b.Mode, b.Rounds, b.MaxRounds, b.Metric)
	case fmt.Sprint(deref(a.Threshold)) != fmt.Sprint(deref(b.Threshold)) || a.MinStep != b.MinStep:
		return fmt.Sprintf("--threshold %v --min-step %v, not %v %v", deref(a.Threshold), a.MinStep, deref(b.Threshold), b.MinStep)
	}
	return ""
}

func deref(p *float64) any {
	if p == nil {
		return "midpoint"
	}
	return *p
}

func (o *Options) time() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now().UTC()
}

// Run carries the campaign on from where its log stands until the first bad commit is named
// and confirmed, the ends show no step, only skipped commits remain, MaxProbes commits were
// measured, or ctx is done. Every verdict is in the log before the next probe starts.
func Run(ctx context.Context, o Options) (*State, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l, err := Open(o)
	if err != nil {
		return nil, err
	}
	set := l.Start().Settings
	measured := 0
	for {
		st, err := Replay(l.Events)
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		switch st.Phase {
		case PhaseEnds, PhaseProbing, PhaseConfirm:
		default:
			return st, nil
		}
		if o.MaxProbes > 0 && measured >= o.MaxProbes {
			return st, nil
		}
		measured++
		var e Event
		switch st.Phase {
		case PhaseEnds:
			e, err = o.ends(ctx, st, set)
		case PhaseProbing:
			e, err = o.probe(ctx, st, set, st.Next)
		case PhaseConfirm:
			e, err = o.confirm(ctx, st, set)
		}
		if err != nil {
			return st, err
		}
		e.Time, e.Machine = o.time(), o.Machine
		if err := l.Append(e); err != nil {
			return st, err
		}
		o.Log.Info("bisect: "+e.Kind, "commit", e.Probe.Commit.String(), "verdict", e.Probe.Verdict, "reason", e.Probe.Reason)
	}
}

// build builds a commit; a failure is returned, not logged, for the ends (the campaign cannot go
// on without them) and becomes a skip for a probe.
func (o *Options) build(ctx context.Context, c gitref.Commit) (*Build, error) {
	o.Log.Info("bisect: building", "commit", c.String())
	t0 := time.Now()
	b, err := o.Builder.Build(ctx, c)
	if err != nil {
		return nil, err
	}
	if !b.Reused && b.Seconds == 0 {
		b.Seconds = time.Since(t0).Round(time.Second).Seconds()
	}
	return b, nil
}

func (o *Options) ends(ctx context.Context, st *State, set *Settings) (Event, error) {
	good, bad := st.Path[0], st.Path[len(st.Path)-1]
	gb, err := o.build(ctx, good)
	if err != nil {
		return Event{}, fmt.Errorf("building the good end %s: %w", good.Short(), err)
	}
	bb, err := o.build(ctx, bad)
	if err != nil {
		return Event{}, fmt.Errorf("building the bad end %s: %w", bad.Short(), err)
	}
	m, err := o.Bencher.Measure(ctx, Side{good, gb}, Side{bad, bb}, set.Rounds)
	if err != nil {
		return Event{}, fmt.Errorf("measuring the ends: %w", err)
	}
	m.summarize()
	p := &Probe{Commit: bad, Index: len(st.Path) - 1, Against: good.Hash, Build: bb, Measurement: m}
	p.Verdict, p.Reason, p.Threshold = judgeEnds(m, set)
	return Event{Kind: EventEnds, Probe: p}, nil
}

func (o *Options) probe(ctx context.Context, st *State, set *Settings, i int) (Event, error) {
	good, c := st.Path[0], st.Path[i]
	gb, err := o.build(ctx, good)
	if err != nil {
		return Event{}, fmt.Errorf("building the good end %s: %w", good.Short(), err)
	}
	p := &Probe{Commit: c, Index: i, Against: good.Hash, Threshold: st.Threshold}
	cb, err := o.build(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			return Event{}, ctx.Err()
		}
		p.Verdict, p.Reason = Skip, "the build failed: "+err.Error()
		return Event{Kind: EventProbe, Probe: p}, nil
	}
	p.Build = cb
	slower := st.Direction == "slower"
	m := &Measurement{}
	for rounds := set.Rounds; rounds > 0; {
		more, err := o.Bencher.Measure(ctx, Side{good, gb}, Side{c, cb}, rounds)
		if err != nil {
			return Event{}, fmt.Errorf("measuring %s: %w", c.Short(), err)
		}
		m.merge(more)
		var undecided bool
		p.Verdict, p.Reason, undecided = judgeProbe(m, st.Threshold, slower)
		have := len(m.AValue)
		if !undecided || have >= set.MaxRounds {
			if undecided {
				p.Reason += fmt.Sprintf(" after %d rounds", have)
			}
			break
		}
		rounds = min(set.Rounds, set.MaxRounds-have)
		o.Log.Info("bisect: not significant yet, measuring more rounds", "commit", c.Short(), "rounds", rounds)
	}
	p.Measurement = m
	return Event{Kind: EventProbe, Probe: p}, nil
}

func (o *Options) confirm(ctx context.Context, st *State, set *Settings) (Event, error) {
	parent, c := st.Path[st.Good], st.Path[st.Bad]
	pb, err := o.build(ctx, parent)
	if err != nil {
		return Event{}, fmt.Errorf("building the culprit's parent %s: %w", parent.Short(), err)
	}
	cb, err := o.build(ctx, c)
	if err != nil {
		return Event{}, fmt.Errorf("building the culprit %s: %w", c.Short(), err)
	}
	m, err := o.Bencher.Measure(ctx, Side{parent, pb}, Side{c, cb}, set.Rounds)
	if err != nil {
		return Event{}, fmt.Errorf("measuring the culprit against its parent: %w", err)
	}
	m.summarize()
	p := &Probe{Commit: c, Index: st.Bad, Against: parent.Hash, Build: cb, Measurement: m}
	slower := st.Direction == "slower"
	switch {
	case len(m.Ratios) < 2:
		p.Verdict, p.Reason = Skip, "too few comparable rounds to confirm: "+ratioText(m)
	case slower && m.Max < 1, !slower && m.Min > 1:
		p.Verdict, p.Reason = Bad, fmt.Sprintf("confirmed: culprit/parent %s, %s in every round", ratioText(m), st.Direction)
	case slower && m.Min > 1, !slower && m.Max < 1:
		p.Verdict, p.Reason = Good, fmt.Sprintf("not confirmed: culprit/parent %s goes the other way; the step may be spread over several commits", ratioText(m))
	default:
		p.Verdict, p.Reason = Skip, fmt.Sprintf("not confirmed: culprit/parent %s lies on both sides of 1; the step may be spread over several commits, or smaller than the noise", ratioText(m))
	}
	return Event{Kind: EventConfirm, Probe: p}, nil
}
