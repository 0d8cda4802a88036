package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/manifest"
)

// Result is what one invocation measured: its runs round by round, each round's in the
// bundles' order (without GPUs they ran A B, then B A, alternately), and, with several
// bundles, each one's comparison with the first.
type Result struct {
	Dir         string        `json:"dir"`
	RecordsFile string        `json:"recordsFile"`
	Runs        []*Record     `json:"runs"`
	Comparisons []*Comparison `json:"comparisons,omitempty"`
	// Interrupted says the invocation was stopped before every run was done.
	Interrupted bool `json:"interrupted"`
	// SharedDevices, with --gpus, are the devices (by id) that runs given different entries
	// were loaded on alike, with those entries: the lanes shared a GPU, so their figures are
	// not independent (a list that names one device twice, or CUDA_VISIBLE_DEVICES already set).
	SharedDevices map[string][]string `json:"sharedDevices,omitempty"`
	// Continuing is what the bench found of the campaign before its first run: the runs, the
	// incomplete ones, those adopted from a bench that was killed.
	Continuing *Continuing `json:"continuing,omitempty"`
	// Records are the campaign's decisions of this invocation's pending runs against the
	// standing records, by the judge (one per bundle that had any).
	Records []Judgement `json:"records,omitempty"`
	// PreviousPatches are the patches of these bundles that the campaign tried before and did
	// not keep, by sha256, whatever tree or flags carried them.
	PreviousPatches []PatchFate `json:"previousPatches,omitempty"`
	// Previous are the campaign's negative results for a bundle benched again (Records.Previous).
	Previous []Entry `json:"previous,omitempty"`
	// Devices are the control bundle's row 0 on each device (--control), and Spread how much
	// the devices' means differ: (max - min) / min.
	Devices []DeviceFigure `json:"devices,omitempty"`
}

// DeviceFigure is the control bundle's row 0 on one device, round by round.
type DeviceFigure struct {
	GPU  string    `json:"gpu"`
	Row0 []float64 `json:"row0TokPerSec"`
	Mean float64   `json:"mean"`
	// Spread is (max - min) / min of the devices' means, the same on every entry.
	Spread float64 `json:"spread"`
}

// deviceFigures are the control's figures per device, in the order of gpus.
func deviceFigures(gpus []string, controls map[string][]*Record) []DeviceFigure {
	var out []DeviceFigure
	lo, hi := 0.0, 0.0
	for _, gpu := range gpus {
		f := DeviceFigure{GPU: gpu}
		for _, r := range controls[gpu] {
			if counts(r) {
				f.Row0 = append(f.Row0, r.Summary.Row0TPS)
			}
		}
		if len(f.Row0) > 0 {
			for _, v := range f.Row0 {
				f.Mean += v
			}
			f.Mean /= float64(len(f.Row0))
			if lo == 0 || f.Mean < lo {
				lo = f.Mean
			}
			hi = max(hi, f.Mean)
		}
		out = append(out, f)
	}
	if lo > 0 {
		for i := range out {
			out[i].Spread = (hi - lo) / lo
		}
	}
	return out
}

// Comparison is bundle B against bundle A (the first one), round by round: the ratio of
// their row-0 decode tok/s when both rounds produced one.
type Comparison struct {
	A, B      string    `json:"-"`
	ALabel    string    `json:"a"`
	BLabel    string    `json:"b"`
	ARow0     []float64 `json:"aRow0TokPerSec"`
	BRow0     []float64 `json:"bRow0TokPerSec"`
	Ratios    []float64 `json:"ratios"`
	Min       float64   `json:"min"`
	Median    float64   `json:"median"`
	Max       float64   `json:"max"`
	AAccepted *float64  `json:"aAcceptance,omitempty"`
	BAccepted *float64  `json:"bAcceptance,omitempty"`
	// Verdict is the judge's word on B against A, from the rounds' ratios.
	Verdict Verdict `json:"verdict"`
	// Differs says what differs between A's and B's identities (Differences).
	Differs []string `json:"differs"`
}

// dirOutsideBundles refuses a campaign directory that is a bundle or lies inside one (a
// bundle measured here, or any directory with a manifest.json): the campaign's files would
// make the bundle fail its own verification, and every later bench of it.
func dirOutsideBundles(dir string, bundles []*Bundle) error {
	for _, b := range bundles {
		if b != nil && manifest.Within(dir, b.Dir) {
			return inputerr.Errorf("--dir %s is inside the bundle %s: its records would break the bundle's verification; give a campaign directory outside it", dir, b.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return inputerr.Errorf("--dir %s holds a manifest.json: it is a bundle, not a campaign directory; give another --dir", dir)
	}
	return nil
}

// holdCampaign makes this process the campaign's only bench for as long as it measures: two
// benches into one directory would run their servers at once, each slowing the other's rows,
// and both record what they measured. Another bench already there is a refusal naming it.
func holdCampaign(dir string) (release func(), err error) {
	p := filepath.Join(dir, ".running")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the campaign: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who, _ := os.ReadFile(p)
			return nil, inputerr.Errorf("another bench is measuring into %s (%s): its servers would slow this one's runs and these its; wait for it, or give another --dir", dir, strings.TrimSpace(string(who)))
		}
		return nil, fmt.Errorf("locking the campaign: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "process %d, since %s", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Run measures every bundle Rounds times and records each run in the campaign directory.
// Without GPUs the runs go one at a time, interleaved and counterbalanced (A B, B A, A B ...),
// each from its server's start to its stop; with GPUs, bundle i runs on GPUs[i mod len] and the devices work in
// parallel. When ctx is done, the run in progress is kept as incomplete and no further run
// starts.
func Run(ctx context.Context, bundles []*Bundle, o Options) (*Result, error) {
	if len(bundles) == 0 {
		return nil, errors.New("no bundle to measure")
	}
	if err := o.Protocol.Validate(); err != nil {
		return nil, err
	}
	if o.Control != nil && len(o.GPUs) < 2 {
		return nil, errors.New("a control bundle runs on every device: give two or more --gpus")
	}
	if err := takesImages(bundles, o.Control, o.Protocol.Images); err != nil {
		return nil, err
	}
	if o.Judge == (Judge{}) {
		o.Judge = DefaultJudge()
	}
	if err := o.Judge.Validate(); err != nil {
		return nil, err
	}
	if o.Rounds == 0 {
		o.Rounds = 1
		if len(bundles) > 1 {
			o.Rounds = RoundsNeeded(o.Judge.Alpha)
		}
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.crashed = &crashes{by: map[string]*Crash{}}
	if err := dirOutsideBundles(o.Dir, append(bundles, o.Control)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the campaign directory: %w", err)
	}
	if !o.holding {
		release, err := holdCampaign(o.Dir)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "runs"), 0o755); err != nil {
		return nil, fmt.Errorf("creating the campaign directory: %w", err)
	}
	cont, err := adopt(o.Dir, o.now())
	if err != nil {
		return nil, err
	}
	if cont.Runs > 0 || len(cont.SetAside) > 0 {
		o.progress("continuing campaign %s: %s", o.Dir, cont)
	}
	rs, err := ReadRecords(o.Dir)
	if err != nil {
		return nil, err
	}
	res := &Result{Dir: o.Dir, RecordsFile: filepath.Join(o.Dir, RecordsFile), Continuing: cont}
	for _, b := range bundles {
		for _, e := range rs.Previous(b.ManifestSHA256) {
			why := e.Reason
			if len(why) > 200 {
				why = why[:200] + "…"
			}
			o.progress("warning: %s was measured before in this campaign, the same build, flags and environment: %s %s (row 0 %.2f tok/s): %s", b.Name, e.Label, e.Decision, e.Row0TPS, why)
			res.Previous = append(res.Previous, e)
		}
	}
	fates := rs.PatchFates()
	for _, b := range bundles {
		for _, p := range b.Manifest.Build.Patches {
			for _, f := range fates {
				if f.SHA256 != strings.TrimPrefix(p.SHA256, "sha256:") || !f.Negative() {
					continue
				}
				last := f.Runs[len(f.Runs)-1]
				why := last.Reason
				if len(why) > 200 {
					why = why[:200] + "…"
				}
				o.progress("warning: %s carries patch %s (sha256 %s), which this campaign tried and did not keep: %s %s (row 0 %.2f tok/s): %s", b.Name, p.Name, short8(f.SHA256), last.Label, last.Decision, last.Row0TPS, why)
				res.PreviousPatches = append(res.PreviousPatches, f)
			}
		}
	}
	if len(o.GPUs) > 0 {
		for _, b := range bundles {
			if deviceEnv(b.Manifest.Target.Backend, "0") == nil {
				o.progress("warning: %s is a %s bundle: --gpus gives it no device of its own, and runs in parallel share the CPU", b.Name, b.Manifest.Target.Backend)
			}
		}
	}
	// With GPUs, bundle i runs on device (i + round) mod N: across rounds every bundle meets
	// every device, so one card's own speed is not read as a variant's. The control bundle, if
	// any, runs on every device in every round: how much the devices differ.
	type job struct{ bundle, round int }
	const control = -1
	lanes := map[string][]job{}
	var order []string
	add := func(gpu string, j job) {
		if _, ok := lanes[gpu]; !ok {
			order = append(order, gpu)
		}
		lanes[gpu] = append(lanes[gpu], j)
	}
	for r := 0; r < o.Rounds; r++ {
		// one machine: the order turns every other round (A B, B A, A B ...), so that whatever
		// favours the first or the second run of a round (a cache warmed, a core's clock) falls
		// on each bundle alike and the judge sees no direction in it
		seq := make([]int, len(bundles))
		for i := range seq {
			seq[i] = i
			if len(o.GPUs) == 0 && r%2 == 1 {
				seq[i] = len(bundles) - 1 - i
			}
		}
		for _, i := range seq {
			gpu := ""
			if len(o.GPUs) > 0 {
				gpu = o.GPUs[(i+r)%len(o.GPUs)]
			}
			add(gpu, job{i, r})
		}
		if o.Control != nil {
			for _, gpu := range o.GPUs {
				add(gpu, job{control, r})
			}
		}
	}
	invocation := fmt.Sprintf("%s-%d", o.now().UTC().Format("20060102T150405.000000000Z"), os.Getpid())
	controls := map[string][]*Record{}
	records := make([][]*Record, len(bundles))
	for i := range records {
		records[i] = make([]*Record, o.Rounds)
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, gpu := range order {
		wg.Add(1)
		go func(gpu string, jobs []job) {
			defer wg.Done()
			for _, j := range jobs {
				if ctx.Err() != nil {
					return
				}
				b := o.Control
				if j.bundle != control {
					b = bundles[j.bundle]
				}
				rec := o.runOne(ctx, b, j.round, gpu)
				err := commit(o.Dir, rec)
				mu.Lock()
				if j.bundle == control {
					controls[gpu] = append(controls[gpu], rec)
				} else {
					records[j.bundle][j.round] = rec
				}
				if err != nil {
					errs = append(errs, err)
				}
				// the comparisons of the rounds done so far, kept now: a bench killed later
				// leaves them in comparisons.json
				var cs []*Comparison
				for i := 1; i < len(bundles) && err == nil; i++ {
					cs = append(cs, compare(o.Judge, bundles[0].Name, bundles[i].Name, records[0], records[i]))
				}
				mu.Unlock()
				if len(cs) > 0 && slices.ContainsFunc(cs, func(c *Comparison) bool { return len(c.Ratios) > 0 }) {
					if err := saveComparisons(o.Dir, invocation, cs, o.now()); err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("keeping the comparisons in %s: %w", ComparisonsFile, err))
						mu.Unlock()
					}
				}
				if rec.Error != "" {
					o.progress("%s: %s", rec.Identity.Label, rec.Error)
				}
				o.progress("%s: %s", rec.Identity.Label, rec.Decision)
			}
		}(gpu, lanes[gpu])
	}
	wg.Wait()
	for r := 0; r < o.Rounds; r++ {
		for i := range bundles {
			if rec := records[i][r]; rec != nil {
				res.Runs = append(res.Runs, rec)
			} else {
				res.Interrupted = true
			}
		}
	}
	res.Interrupted = res.Interrupted || ctx.Err() != nil
	if o.Control != nil {
		res.Devices = deviceFigures(o.GPUs, controls)
		for _, gpu := range o.GPUs {
			res.Runs = append(res.Runs, controls[gpu]...)
		}
	}
	if shared := sharedDevices(res.Runs); len(shared) > 0 {
		res.SharedDevices = shared
		for _, id := range slices.Sorted(maps.Keys(shared)) {
			o.progress("warning: the runs given --gpus %s were all loaded on one device, %s: the lanes shared it, so their figures are not independent (is CUDA_VISIBLE_DEVICES or ONEAPI_DEVICE_SELECTOR already set?)", strings.Join(shared[id], ", "), id)
		}
	}
	if !res.Interrupted {
		js, err := judgeRecords(o.Dir, o.Judge, bundles, records)
		if err != nil {
			errs = append(errs, fmt.Errorf("judging the runs against the records: %w", err))
		}
		for _, jd := range js {
			o.progress("%s: %s: %s", jd.Bundle, jd.Decision, jd.Reason)
		}
		res.Records = js
	}
	for i := 1; i < len(bundles); i++ {
		res.Comparisons = append(res.Comparisons, compare(o.Judge, bundles[0].Name, bundles[i].Name, records[0], records[i]))
	}
	if err := saveComparisons(o.Dir, invocation, res.Comparisons, o.now()); err != nil {
		errs = append(errs, fmt.Errorf("keeping the comparisons in %s: %w", ComparisonsFile, err))
	}
	return res, errors.Join(errs...)
}

// compare is B's row 0 over A's, round by round, for the rounds where both have one, judged.
func compare(j Judge, a, b string, as, bs []*Record) *Comparison {
	c := &Comparison{A: a, B: b}
	var aAcc, bAcc []*float64
	for r := range as {
		ra, rb := as[r], bs[r]
		if ra != nil && c.ALabel == "" {
			c.ALabel = ra.Identity.Label
		}
		if rb != nil && c.BLabel == "" {
			c.BLabel = rb.Identity.Label
		}
		if ra != nil && rb != nil && c.Differs == nil {
			c.Differs = Differences(ra.Identity, rb.Identity)
			if x, y := ra.Server.SlotContext, rb.Server.SlotContext; x != y && x > 0 && y > 0 {
				c.Differs = append(c.Differs, fmt.Sprintf("per-slot context %d → %d tokens", x, y))
			}
		}
		if !counts(ra) || !counts(rb) {
			continue
		}
		c.ARow0 = append(c.ARow0, ra.Summary.Row0TPS)
		c.BRow0 = append(c.BRow0, rb.Summary.Row0TPS)
		c.Ratios = append(c.Ratios, rb.Summary.Row0TPS/ra.Summary.Row0TPS)
		aAcc, bAcc = append(aAcc, ra.Summary.Acceptance), append(bAcc, rb.Summary.Acceptance)
	}
	c.Min, c.Median, c.Max = Spread(c.Ratios)
	c.AAccepted, c.BAccepted = meanOf(aAcc), meanOf(bAcc)
	c.Verdict = j.Compare(c.Ratios)
	return c
}

// counts says a run has a row 0 to compare: complete, canaries passed.
func counts(r *Record) bool {
	return r != nil && r.Complete && r.Canary.Mismatch == nil && len(r.Rows) > 0 && r.Summary.Row0TPS > 0
}

func meanOf(xs []*float64) *float64 {
	var sum float64
	n := 0
	for _, x := range xs {
		if x != nil {
			sum += *x
			n++
		}
	}
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

// WriteText writes the result as llbuild bench prints it: the campaign's records file, then
// the table (WriteTable).
func (res *Result) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "records: %s\n\n", res.RecordsFile); err != nil {
		return err
	}
	return res.WriteTable(w)
}

// InterruptedError is a bench stopped (Ctrl-C, SIGTERM) before every run was done; the runs
// measured so far are kept in RecordsFile.
type InterruptedError struct{ RecordsFile string }

func (e *InterruptedError) Error() string {
	return "bench: interrupted; the runs measured so far are in " + e.RecordsFile
}

// Err says whether the result's runs all count: an InterruptedError when the bench was
// stopped, an error naming each run that does not count (invalid, failed, below its canaries)
// with its decision, nil when every run is valid.
func (res *Result) Err() error {
	if res.Interrupted {
		return &InterruptedError{RecordsFile: res.RecordsFile}
	}
	var bad []string
	for _, run := range res.Runs {
		if !run.Valid {
			bad = append(bad, fmt.Sprintf("%s: %s", run.Identity.Label, run.Decision))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d runs do not count:\n  %s", len(bad), len(res.Runs), strings.Join(bad, "\n  "))
	}
	return nil
}

// WriteTable writes the lab's table of the runs (Run | Canary | Fresh row 0 tok/s | Repeated
// mean | Decision) and, for A/B, each comparison's ratios.
func (res *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	devices, memory := false, false // Device and GPU memory columns when a run was on a GPU
	for _, r := range res.Runs {
		devices = devices || len(r.Server.Devices) > 0
		memory = memory || r.Server.GPUMemoryMiB > 0
	}
	head := "Run\tCanary\tFresh row 0 tok/s\tRepeated mean\tAcceptance\tDecision"
	if devices {
		head += "\tDevice"
	}
	if memory {
		head += "\tGPU memory"
	}
	fmt.Fprintln(tw, head)
	for _, r := range res.Runs {
		name := r.Identity.Label
		if r.Round > 0 {
			name += fmt.Sprintf(" (round %d)", r.Round)
		}
		row0 := "-"
		if len(r.Rows) > 0 {
			row0 = fmt.Sprintf("%.2f", r.Summary.Row0TPS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", name, r.canaryCell(), row0, optional(r.Summary.RepeatedMeanTPS, "%.2f"),
			optional(percent(r.Summary.Acceptance), "%.1f%%"), r.Decision)
		if devices {
			fmt.Fprintf(tw, "\t%s", r.Server.deviceCell())
		}
		if memory {
			mem := "-"
			if r.Server.GPUMemoryMiB > 0 {
				mem = fmt.Sprintf("%.2f GiB", float64(r.Server.GPUMemoryMiB)/1024)
			}
			fmt.Fprintf(tw, "\t%s", mem)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Devices) > 0 {
		var parts []string
		for _, d := range res.Devices {
			parts = append(parts, fmt.Sprintf("GPU %s %.2f", d.GPU, d.Mean))
		}
		fmt.Fprintf(w, "\ncontrol on every device, row 0 mean tok/s: %s; the devices differ by %.1f%%: a variant's win smaller than that is the card's\n", strings.Join(parts, ", "), 100*res.Devices[0].Spread)
	}
	res.writeLoops(w)
	for _, id := range slices.Sorted(maps.Keys(res.SharedDevices)) {
		fmt.Fprintf(w, "\nwarning: the runs given --gpus %s were all loaded on device %s: not independent\n", strings.Join(res.SharedDevices[id], ", "), id)
	}
	for _, c := range res.Comparisons {
		if len(c.Ratios) == 0 {
			fmt.Fprintf(w, "\nA/B %s vs %s: no round where both measured a row 0\n", c.B, c.A)
			continue
		}
		fmt.Fprintf(w, "\nA/B %s / %s, row 0 decode, %d rounds: min %.3f  median %.3f  max %.3f\n  verdict: B %s\n", c.B, c.A, len(c.Ratios), c.Min, c.Median, c.Max, c.Verdict.Text)
		fmt.Fprintf(w, "  A %s tok/s%s\n  B %s tok/s%s\n", floats(c.ARow0), acceptance(c.AAccepted), floats(c.BRow0), acceptance(c.BAccepted))
		if len(c.Differs) > 0 {
			fmt.Fprintf(w, "  differs: %s\n", strings.Join(c.Differs, "; "))
		} else {
			fmt.Fprintf(w, "  differs: nothing but the run (same manifest)\n")
		}
	}
	return nil
}

// writeLoops warns of the bundles whose row 0 fell into a cycle (Summary.Loop), once each, with
// the first such run's cycle.
func (res *Result) writeLoops(w io.Writer) {
	seen := map[string]bool{}
	for _, r := range res.Runs {
		l := r.Summary.Loop
		if l == nil || len(r.Rows) == 0 || seen[r.Bundle] {
			continue
		}
		seen[r.Bundle] = true
		fmt.Fprintf(w, "\nwarning: row 0 of %s loops: its output repeats a %d-token cycle from token %d of %d. A draft is accepted on that cycle, not on text, so its acceptance and a draft setting's speed (--spec-draft-n-max above all) measure the cycle's length, not the model's\n",
			r.Identity.Label, l.Period, l.From, r.Rows[0].Generated)
	}
}

func optional(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

func percent(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := 100 * *p
	return &v
}

func acceptance(p *float64) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(", draft acceptance %.1f%%", 100**p)
}

func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}
