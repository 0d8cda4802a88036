package bisect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/llbuild/llbuild/internal/gitref"
)

// Builder builds one commit for the campaign's target and series; the same commit built
// twice on one machine is expected to come back from its artifacts, by plan hash.
type Builder interface {
	Build(ctx context.Context, c gitref.Commit) (*Build, error)
}

// InertFinder is a Builder that can tell, from what the builds it made on this machine read,
// which commits of a path change none of those files (Inert's rule). It returns nil when none
// of built has a build tree here to read.
type InertFinder interface {
	Inert(ctx context.Context, path []gitref.Commit, built []gitref.Commit) (*Inert, error)
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
	// First, a full commit hash, is probed before the commit the search would choose: a suspect
	// (a PR the changelog points at). It must be left to probe; it is used once.
	First string
	// Machine names where this run measures, written with each event.
	Machine string
	Log     *slog.Logger
	now     func() time.Time
	built   []gitref.Commit // the commits this run built or found built, in order
	looked  int             // how many of built the last inert event had read
}

// ErrNotLeft is wrapped when Options.First is not a commit left to probe.
var ErrNotLeft = errors.New("not left to probe")

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
	if l.Torn != "" {
		o.Log.Warn("bisect: " + l.Torn + "; the probe it was writing is measured again")
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
	case fmt.Sprint(deref(a.Threshold)) != fmt.Sprint(deref(b.Threshold)) || a.MinStep != b.MinStep || a.alpha() != b.alpha():
		return fmt.Sprintf("--threshold %v --min-step %v --alpha %v, not %v %v %v", deref(a.Threshold), a.MinStep, a.alpha(), deref(b.Threshold), b.MinStep, b.alpha())
	case b.Test != "" && a.test() != b.test():
		// a resumed run that does not name a test takes the log's
		return fmt.Sprintf("--test %s, not %s", a.test(), b.test())
	case a.Generate != b.Generate || a.Rows != b.Rows || a.Canaries != b.Canaries:
		return fmt.Sprintf("--generate %d --rows %d --canaries %d, not %d %d %d", a.Generate, a.Rows, a.Canaries, b.Generate, b.Rows, b.Canaries)
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
		if st.Phase == PhaseProbing {
			if e := o.inert(ctx, st); e != nil {
				if err := l.Append(*e); err != nil {
					return st, err
				}
				o.Log.Info("bisect: commits that change nothing the builds read", "inert", len(e.Inert.Commits), "reads", e.Inert.Reads, "from", len(e.Inert.From))
				continue
			}
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
			next := st.Next
			if o.First != "" {
				i := slices.IndexFunc(st.Path, func(c gitref.Commit) bool { return c.Hash == o.First })
				if !st.CanProbe(i) {
					return st, fmt.Errorf("%s is %w: the first probe must lie between the last good commit %s and the first bad one %s and not be probed already", gitref.Commit{Hash: o.First}.Short(), ErrNotLeft, st.Path[st.Good].Short(), st.Path[st.Bad].Short())
				}
				next, o.First = i, ""
			}
			e, err = o.probe(ctx, st, set, next)
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
	if !slices.ContainsFunc(o.built, func(x gitref.Commit) bool { return x.Hash == c.Hash }) {
		o.built = append(o.built, c)
	}
	return b, nil
}

// inert returns a new inert event when this run built a commit whose build the campaign's
// inert set has not yet taken into account, and the set changes: the commits inert by every
// build read so far (the log's earlier event included, whose build trees may be gone).
func (o *Options) inert(ctx context.Context, st *State) *Event {
	f, ok := o.Builder.(InertFinder)
	if !ok || o.looked == len(o.built) {
		return nil
	}
	o.looked = len(o.built)
	from := map[string]bool{}
	var prev []int
	if st.Inert != nil {
		for _, h := range st.Inert.From {
			from[h] = true
		}
		prev = st.Inert.Commits
	}
	var fresh []gitref.Commit
	for _, c := range o.built {
		if !from[c.Hash] {
			fresh = append(fresh, c)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	got, err := f.Inert(ctx, st.Path, o.built)
	if err != nil {
		o.Log.Warn("bisect: cannot tell which commits change nothing the builds read; probing every commit", "err", err)
		return nil
	}
	if got == nil {
		return nil
	}
	if st.Inert != nil {
		got.Commits = slices.DeleteFunc(got.Commits, func(i int) bool { return !slices.Contains(prev, i) })
		for h := range from {
			if !slices.Contains(got.From, h) {
				got.From = append(got.From, h)
			}
		}
	}
	slices.Sort(got.From)
	if st.Inert != nil && slices.Equal(got.Commits, prev) && slices.Equal(got.From, st.Inert.From) {
		return nil
	}
	return &Event{Kind: EventInert, Time: o.time(), Machine: o.Machine, Inert: got}
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
	p := &Probe{Commit: bad, Index: len(st.Path) - 1, Against: good.Hash, Build: bb}
	p.Measurement, err = o.measure(ctx, Side{good, gb}, Side{bad, bb}, set, func(m *Measurement) (string, string, bool) {
		v, r, _, undecided := judgeEnds(m, set)
		return v, r, undecided
	})
	if err != nil {
		return Event{}, fmt.Errorf("measuring the ends: %w", err)
	}
	p.Verdict, p.Reason, p.Threshold = judgeEndsOf(p.Measurement, set)
	return Event{Kind: EventEnds, Probe: p}, nil
}

// judgeConfirm says whether the culprit's rounds against its parent show the ends' step
// (direction "slower" or "faster").
func judgeConfirm(m *Measurement, direction string, set *Settings) (string, string, bool) {
	if len(m.Ratios) < 2 && len(m.Invalid) > 0 {
		return Skip, "too few comparable rounds to confirm: " + ratioText(m) + "; " + strings.Join(m.Invalid, "; "), len(m.Ratios) == 1
	}
	v := set.judge().Against(m.Ratios, 1)
	switch {
	case !v.Decided():
		return Skip, fmt.Sprintf("not confirmed: culprit/parent %s; the step may be spread over several commits, or smaller than the noise", v.Text), true
	case v.Kind == direction:
		return Bad, "confirmed: culprit/parent " + v.Text, false
	}
	return Good, fmt.Sprintf("not confirmed: culprit/parent %s, the other way; the step may be spread over several commits", v.Text), false
}

func judgeEndsOf(m *Measurement, set *Settings) (string, string, float64) {
	v, r, th, undecided := judgeEnds(m, set)
	if undecided && v == Skip {
		r += fmt.Sprintf(" after %d rounds", len(m.AValue))
	}
	return v, r, th
}

// measure benches b against a for set.Rounds rounds, then more, up to set.MaxRounds in all,
// while judge says the rounds so far cannot tell.
func (o *Options) measure(ctx context.Context, a, b Side, set *Settings, judge func(*Measurement) (string, string, bool)) (*Measurement, error) {
	m := &Measurement{}
	for rounds := set.Rounds; rounds > 0; {
		more, err := o.Bencher.Measure(ctx, a, b, rounds)
		if err != nil {
			return nil, err
		}
		m.merge(more)
		_, _, undecided := judge(m)
		have := len(m.AValue)
		if !undecided || have >= set.MaxRounds {
			break
		}
		rounds = min(set.Rounds, set.MaxRounds-have)
		o.Log.Info("bisect: not significant yet, measuring more rounds", "commit", b.Commit.Short(), "rounds", rounds)
	}
	return m, nil
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
	judge := func(m *Measurement) (string, string, bool) { return judgeProbe(m, st.Threshold, slower, set) }
	if p.Measurement, err = o.measure(ctx, Side{good, gb}, Side{c, cb}, set, judge); err != nil {
		return Event{}, fmt.Errorf("measuring %s: %w", c.Short(), err)
	}
	var undecided bool
	p.Verdict, p.Reason, undecided = judge(p.Measurement)
	if undecided {
		p.Reason += fmt.Sprintf(" after %d rounds", len(p.Measurement.AValue))
	}
	return Event{Kind: EventProbe, Probe: p}, nil
}

func (o *Options) confirm(ctx context.Context, st *State, set *Settings) (Event, error) {
	parent, c := st.Path[st.Bad-1], st.Path[st.Bad]
	pb, err := o.build(ctx, parent)
	if err != nil {
		return Event{}, fmt.Errorf("building the culprit's parent %s: %w", parent.Short(), err)
	}
	cb, err := o.build(ctx, c)
	if err != nil {
		return Event{}, fmt.Errorf("building the culprit %s: %w", c.Short(), err)
	}
	judge := func(m *Measurement) (string, string, bool) { return judgeConfirm(m, st.Direction, set) }
	m, err := o.measure(ctx, Side{parent, pb}, Side{c, cb}, set, judge)
	if err != nil {
		return Event{}, fmt.Errorf("measuring the culprit against its parent: %w", err)
	}
	p := &Probe{Commit: c, Index: st.Bad, Against: parent.Hash, Build: cb, Measurement: m}
	var undecided bool
	p.Verdict, p.Reason, undecided = judge(m)
	if undecided {
		p.Reason += fmt.Sprintf(" after %d rounds", len(m.AValue))
	}
	return Event{Kind: EventConfirm, Probe: p}, nil
}
