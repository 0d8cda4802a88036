package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/manifest"
)

// SweepOptions are a sweep's: the screen's options (its protocol in screen mode) and the full
// run's protocol; Next is how many of the screen's runners-up the leader meets in full mode.
type SweepOptions struct {
	Options
	Full Protocol
	Next int
}

// SweepResult is a sweep: the screen of every variant (the defaults among them), its ranking,
// and the full run where the judge compared the screen's leader with the defaults and with the
// next ones.
type SweepResult struct {
	Screen *Result `json:"screen"`
	// Ranking is the screen's order: variants by their median valid row 0, best first. It only
	// chooses what the full run measures; it is no verdict.
	Ranking []Ranked `json:"ranking"`
	Full    *Result  `json:"full,omitempty"`
	// Leader is the screen's best variant other than the defaults; Verdicts its comparisons in
	// the full run, leader over each other (the defaults first), by the judge.
	Leader   string        `json:"leader,omitempty"`
	Verdicts []*Comparison `json:"verdicts,omitempty"`
	// Winner is the leader when the judge says it is faster than the defaults and slower than
	// none of the next ones; empty otherwise. Conclusion says the outcome in a sentence.
	Winner     string `json:"winner,omitempty"`
	Conclusion string `json:"conclusion"`
	// WinnerDir is the winner's bundle directory (under the campaign's sweep/), to serve or
	// bench as it is; empty without a winner.
	WinnerDir string `json:"winnerDir,omitempty"`
	// SameAsDefaults are the grid's variants that would set what the bundle already does (a
	// switch swept off that it leaves off, a value it gives): not made and not measured.
	SameAsDefaults []string `json:"sameAsDefaults,omitempty"`

	// bundle is the swept bundle as the user named it (SweepBundle), variants how many were made.
	bundle   string
	variants int
	noPair   bool // the full run measured no valid pair of the defaults and the leader
}

// Ranked is a variant's place in the screen.
type Ranked struct {
	Bundle string  `json:"bundle"`
	Row0   float64 `json:"medianRow0TokPerSec"`
	Valid  int     `json:"validRuns"`
}

// Sweep screens base and its variants interleaved, then benches the screen's leader against the
// defaults (base) and the next best in full mode, interleaved, and lets the judge say whether
// any setting is faster than the defaults.
func Sweep(ctx context.Context, base *Bundle, variants []*Bundle, o SweepOptions) (*SweepResult, error) {
	if len(variants) == 0 {
		return nil, errors.New("a sweep needs variants")
	}
	if o.Judge == (Judge{}) {
		o.Judge = DefaultJudge()
	}
	if o.Next <= 0 {
		o.Next = 2
	}
	all := append([]*Bundle{base}, variants...)
	screen := o.Options
	screen.Protocol.Mode = ModeScreen
	if screen.Rounds == 0 {
		screen.Rounds = 1
	}
	sres, err := Run(ctx, all, screen)
	out := &SweepResult{Screen: sres, bundle: base.Name, variants: len(variants)}
	if sres == nil || err != nil || sres.Interrupted {
		return out, err
	}
	out.Ranking = rank(all, sres.Runs)
	var leader *Bundle
	var next []*Bundle
	for _, r := range out.Ranking {
		b := all[slices.IndexFunc(all, func(b *Bundle) bool { return b.Name == r.Bundle })]
		switch {
		case b == base || r.Valid == 0:
		case leader == nil:
			leader = b
		case len(next) < o.Next:
			next = append(next, b)
		}
	}
	if leader == nil {
		out.Conclusion = "no variant's screen was valid: nothing to send to a full run"
		return out, nil
	}
	out.Leader = leader.Name
	full := o.Options
	full.Protocol = o.Full
	full.Rounds = max(o.Rounds, RoundsNeeded(o.Judge.Alpha))
	fres, err := Run(ctx, append([]*Bundle{base, leader}, next...), full)
	out.Full = fres
	if fres == nil || err != nil || fres.Interrupted {
		return out, err
	}
	for _, other := range append([]*Bundle{base}, next...) {
		out.Verdicts = append(out.Verdicts, fres.Compare(o.Judge, other.Name, leader.Name))
	}
	vs := out.Verdicts[0].Verdict
	if vs.Rounds == 0 {
		out.Conclusion = fmt.Sprintf("the full run has no round in which both the defaults and %s ran validly: nothing was compared (the table says which runs failed)", leader.Name)
		out.noPair = true
		return out, nil
	}
	beaten := ""
	for i, c := range out.Verdicts[1:] {
		if c.Verdict.Kind == Slower {
			beaten = next[i].Name
		}
	}
	switch {
	case vs.Kind == Faster && beaten == "":
		out.Winner, out.WinnerDir = leader.Name, leader.Dir
		out.Conclusion = fmt.Sprintf("%s is faster than the defaults: %s", leader.Name, vs.Text)
	case vs.Kind == Faster:
		out.Conclusion = fmt.Sprintf("%s is faster than the defaults (%s) but slower than %s in full mode: sweep again around both", leader.Name, vs.Text, beaten)
	case vs.Kind == NotEnoughRounds:
		out.Conclusion = fmt.Sprintf("%s against the defaults: %s", leader.Name, vs.Text)
	default:
		out.Conclusion = fmt.Sprintf("no setting is faster than the defaults: the screen's leader %s against them is %s", leader.Name, vs.Text)
	}
	for _, r := range fres.Runs {
		if l := r.Summary.Loop; l != nil {
			out.Conclusion += fmt.Sprintf("; but row 0's output loops (%s: a %d-token cycle from token %d), so settings that change the drafts were measured on that cycle, not on text", r.Bundle, l.Period, l.From)
			break
		}
	}
	return out, nil
}

// SweepBundle sweeps the bundle the user named name (a directory, or an archive that unpack
// unpacks for the sweep's time) over sweeps, each SETTING=V1,V2,... (manifest.Grid): it makes a
// variant of the bundle for each combination of their values (manifest.Variant: files
// hard-linked, under o.Dir/sweep/, each named by the bundle and its settings) and hands them to
// Sweep with the bundle itself as "defaults". Settings that cannot be read, a bundle that
// cannot be opened or a variant that cannot be made is an error with no result, before
// anything runs.
func SweepBundle(ctx context.Context, name string, unpack Unpacker, sweeps []string, o SweepOptions) (*SweepResult, error) {
	grid, err := manifest.Grid(sweeps)
	if err != nil {
		return nil, err
	}
	dir, cleanup, err := unpack(ctx, name)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	base, err := OpenBundle(dir, "defaults")
	if err != nil {
		return nil, err
	}
	if err := dirOutsideBundles(o.Dir, []*Bundle{{Dir: base.Dir, Name: name}}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the campaign directory: %w", err)
	}
	release, err := holdCampaign(o.Dir)
	if err != nil {
		return nil, err
	}
	defer release()
	o.holding = true
	stem := filepath.Base(strings.TrimSuffix(strings.TrimSuffix(filepath.Clean(name), ".tar.zst"), ".tar.gz"))
	var variants []*Bundle
	var same []string
	for _, g := range grid {
		var parts []string
		for _, s := range g {
			parts = append(parts, strings.TrimLeft(s.Name, "-")+"="+s.Value)
		}
		vname := stem + "-" + strings.Join(parts, "-")
		vdir := filepath.Join(o.Dir, "sweep", vname)
		vm, err := base.Manifest.With(g)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", vname, err)
		}
		if vm.SameServerSettings(base.Manifest) {
			// the bundle's own settings: measuring it would only be the defaults again
			same = append(same, vname)
			continue
		}
		if err := manifest.WriteVariant(ctx, dir, vdir, vm); err != nil {
			return nil, fmt.Errorf("variant %s: %w", vname, err)
		}
		b, err := OpenBundle(vdir, vname)
		if err != nil {
			return nil, err
		}
		variants = append(variants, b)
	}
	if len(variants) == 0 {
		return nil, inputerr.Errorf("every variant of the sweep (%s) sets what %s already does: sweep other values", strings.Join(same, ", "), name)
	}
	res, err := Sweep(ctx, base, variants, o)
	if res != nil {
		res.bundle, res.SameAsDefaults = name, same
	}
	return res, err
}

// Err says how the sweep ended, given the error sweepErr that came with it: an
// InterruptedError (joined with sweepErr) when the screen or the full run was stopped,
// sweepErr, or the conclusion as an error when no variant led the screen or the full run has no
// valid pair of the defaults and the leader; nil when the judge could compare the leader.
func (s *SweepResult) Err(sweepErr error) error {
	for _, r := range []*Result{s.Screen, s.Full} {
		if r != nil && r.Interrupted {
			return errors.Join(sweepErr, &InterruptedError{RecordsFile: r.RecordsFile})
		}
	}
	if sweepErr != nil {
		return sweepErr
	}
	if s.Leader == "" || s.noPair {
		return errors.New(s.Conclusion)
	}
	return nil
}

// rank orders bundles by the median of their valid runs' row 0, best first; bundles without a
// valid run last, in their order.
func rank(bundles []*Bundle, runs []*Record) []Ranked {
	var out []Ranked
	for _, b := range bundles {
		var xs []float64
		for _, r := range runs {
			if r.Bundle == b.Name && counts(r) && r.Valid {
				xs = append(xs, r.Summary.Row0TPS)
			}
		}
		_, med, _ := Spread(xs)
		out = append(out, Ranked{Bundle: b.Name, Row0: med, Valid: len(xs)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Row0 > out[j].Row0 })
	return out
}

// Compare is bundle b against bundle a (by name) over the rounds of this result, judged: the
// same comparison Run makes of each bundle with the first, for any pair.
func (res *Result) Compare(j Judge, a, b string) *Comparison {
	rounds := 0
	for _, r := range res.Runs {
		rounds = max(rounds, r.Round+1)
	}
	as, bs := make([]*Record, rounds), make([]*Record, rounds)
	for _, r := range res.Runs {
		switch r.Bundle {
		case a:
			as[r.Round] = r
		case b:
			bs[r.Round] = r
		}
	}
	return compare(j, a, b, as, bs)
}

// WriteTables writes the sweep as llbuild bench --sweep prints it: the records file, the
// screen's table, the full run's table when there was one, then the outcome (WriteText).
// A sweep stopped before its screen had a result writes nothing.
func (s *SweepResult) WriteTables(w io.Writer) error {
	if s.Screen == nil {
		return nil
	}
	fmt.Fprintf(w, "records: %s\n\nsweep of %s, %d variants and the defaults, screened:\n", s.Screen.RecordsFile, s.bundle, s.variants)
	if len(s.SameAsDefaults) > 0 {
		fmt.Fprintf(w, "not made, the bundle's own settings (the defaults): %s\n", strings.Join(s.SameAsDefaults, ", "))
	}
	if err := s.Screen.WriteTable(w); err != nil {
		return err
	}
	if s.Full != nil {
		fmt.Fprintf(w, "\nfull mode: the screen's leader %s against the defaults and the next ones:\n", s.Leader)
		if err := s.Full.WriteTable(w); err != nil {
			return err
		}
	}
	return s.WriteText(w)
}

// WriteText writes the sweep's outcome: the ranking, each verdict and the conclusion.
func (s *SweepResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "\nscreen ranking (median row 0 of valid runs; it only picks what the full run measures):\n")
	for i, r := range s.Ranking {
		fmt.Fprintf(w, "  %d. %s  %.2f tok/s (%d valid)\n", i+1, r.Bundle, r.Row0, r.Valid)
	}
	for _, c := range s.Verdicts {
		fmt.Fprintf(w, "\n%s / %s, full mode, %d rounds: %s\n", c.B, c.A, len(c.Ratios), c.Verdict.Text)
	}
	if _, err := fmt.Fprintf(w, "\nsweep: %s\n", s.Conclusion); err != nil || s.WinnerDir == "" {
		return err
	}
	var differs []string
	if len(s.Verdicts) > 0 {
		differs = s.Verdicts[0].Differs
	}
	_, err := fmt.Fprintf(w, "the winner's bundle: %s (%s; serve it with llbuild serve %s)\n", s.WinnerDir,
		strings.Join(differs, "; "), s.WinnerDir)
	return err
}
