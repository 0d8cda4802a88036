package bisect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// Given are a new campaign's settings as a command gives them: Prepare checks them all together,
// chooses what is left to choose (the series, the test) and resolves the range.
type Given struct {
	// Good and Bad are the ends: commits (a hash, tag or branch) of the repository.
	Good, Bad string
	// Target is the built-in target each probe is built for.
	Target string
	// Template is the bundle directory whose model, draft, arguments and environment every
	// probe is bundled with.
	Template string
	// Series is "scoring", "plain", a series file, or "" for DefaultSeries's choice.
	Series string
	// Mode is the bench's mode; Metric one of Metrics.
	Mode, Metric string
	// Test is TestSignedRank, TestSign, or "": a new campaign's then is TestSignedRank, a resumed
	// one's its log's.
	Test string
	// Rounds and MaxRounds are Settings'; Generate, Rows and Canaries override the mode's
	// protocol where above 0.
	Rounds, MaxRounds, Generate, Rows, Canaries int
	// Alpha and MinStep are the judge's.
	Alpha, MinStep float64
	// Threshold is nil for the midpoint the ends give.
	Threshold *float64
}

// Problems says what is wrong with g to start a campaign, each in a phrase that names the flag.
func (g Given) Problems() []string {
	var problems []string
	for _, f := range []struct{ flag, value string }{{"good", g.Good}, {"bad", g.Bad}, {"target", g.Target}, {"template", g.Template}} {
		if f.value == "" {
			problems = append(problems, "--"+f.flag+" is needed to start a campaign")
		}
	}
	if !slices.Contains(Metrics, g.Metric) {
		problems = append(problems, fmt.Sprintf("--metric %q: want one of %s", g.Metric, strings.Join(Metrics, ", ")))
	}
	if _, err := bench.DefaultProtocol(g.Mode); err != nil {
		problems = append(problems, "--"+err.Error())
	}
	if g.Rounds < 2 {
		problems = append(problems, fmt.Sprintf("--rounds %d: a verdict needs a spread, give 2 or more (3 is the default)", g.Rounds))
	}
	if g.MaxRounds < g.Rounds {
		problems = append(problems, fmt.Sprintf("--max-rounds %d is below --rounds %d", g.MaxRounds, g.Rounds))
	}
	if a := g.Alpha; a <= 0 || a >= 0.5 {
		problems = append(problems, fmt.Sprintf("--alpha %v: want a level between 0 and 0.5 (%v is the default)", a, bench.DefaultAlpha))
	}
	for _, f := range []struct {
		flag string
		n    int
	}{{"generate", g.Generate}, {"rows", g.Rows}, {"canaries", g.Canaries}} {
		if f.n < 0 {
			problems = append(problems, fmt.Sprintf("--%s %d: want 1 or more", f.flag, f.n))
		}
	}
	if s := g.MinStep; s < 0 || s >= 1 {
		problems = append(problems, fmt.Sprintf("--min-step %v: want a fraction from 0 to 1 (%v, 1%%, is the default)", s, bench.DefaultMinStep))
	}
	return problems
}

// Protocol is the bench protocol a campaign measures with: its mode's, with the campaign's
// Generate, Rows and Canaries where they are set.
func (s *Settings) Protocol() (bench.Protocol, error) {
	p, err := bench.DefaultProtocol(s.Mode)
	if err != nil {
		return p, err
	}
	if s.Generate > 0 {
		p.Generate = s.Generate
	}
	if s.Rows > 0 {
		p.Rows = s.Rows
	}
	if s.Canaries > 0 {
		p.Canaries = s.Canaries
	}
	return p, p.Validate()
}

// DefaultSeries is the series a campaign carries when none is given: the scoring series where it
// applies at both ends, else patch 0001 alone (plain). The scoring series is made for one
// commit; across a range it often stops applying, and every probe must carry the same patches
// to be comparable.
func DefaultSeries(ctx context.Context, repo string, good, bad gitref.Commit, log *slog.Logger) (string, error) {
	scoring, err := patches.Named(patches.SeriesScoring)
	if err != nil {
		return "", err
	}
	both := true
	for _, end := range []gitref.Commit{good, bad} {
		rep, err := patches.Status(ctx, repo, end.Hash, scoring)
		both = both && err == nil && rep.OK()
	}
	if both {
		log.Info("bisect: series chosen", "series", patches.SeriesScoring, "why", "the scoring series applies at both ends")
		return patches.SeriesScoring, nil
	}
	log.Info("bisect: series chosen", "series", patches.SeriesPlain, "why", "the scoring series does not apply at both ends: patch 0001 alone")
	return patches.SeriesPlain, nil
}

// patchIDs names a series' patches as Settings.SeriesPatches does: name and sha256.
func patchIDs(series []patches.Patch) []string {
	ids := []string{}
	for _, p := range series {
		ids = append(ids, p.Name+" sha256:"+p.SHA256)
	}
	return ids
}

// TemplateIdentity names what a template bundle gives each probe, wherever the bundle lies: its
// models by sha256, the arguments, environment and server knobs it adds for target t.
func TemplateIdentity(dir string, t *targets.Target) (string, error) {
	m, err := manifest.Load(dir)
	if err != nil {
		return "", err
	}
	in, err := manifest.TemplateInput(dir, t, "")
	if err != nil {
		return "", err
	}
	sums := map[string]string{}
	for _, f := range m.Files {
		if f.Kind == manifest.KindModel || f.Kind == manifest.KindDraft {
			sums[f.Kind] = f.SHA256
		}
	}
	b, err := json.Marshal(struct {
		Models map[string]string
		Args   []string
		Env    map[string]string
		Knobs  manifest.ServerKnobs
	}{sums, in.ExtraArgs, in.Env, in.Knobs})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Request is what a run of a campaign is asked to do, as a command gives it; Prepare checks it.
type Request struct {
	// Dir is the campaign directory: bisect.log, bundles/, bench/, and artifacts/ unless Out
	// is given.
	Dir string
	// Repo is the llama.cpp git repository or mirror that holds the range.
	Repo string
	// Start says Given is meant for the campaign (its ends, target or template were given): a
	// resumed campaign must then have the same settings. Without it a campaign resumes from its
	// log alone; a new one always starts from Given.
	Start bool
	Given Given
	// Next is a commit to probe first instead of the middle, "" for none.
	Next string
	// Out is where builds put their artifacts, "" for the campaign's artifacts/.
	Out string
	// MaxProbes stops the run after that many measurements, 0 for none.
	MaxProbes int
	// ReadyTimeout is how long a llama-server may take to load.
	ReadyTimeout time.Duration
	// Series loads the series a name gives (scoring, plain or a series file); its errors are
	// returned as they are.
	Series func(name string) ([]patches.Patch, error)
}

// Campaign is a Request checked against the campaign's log and resolved: what Run builds and
// benches with.
type Campaign struct {
	// Dir is the campaign directory, absolute; Repo the repository of the range; Out where
	// builds put their artifacts.
	Dir, Repo, Out string
	// Settings and Path are the settings and the range given (nil when the campaign resumes from
	// its log alone); Start is the campaign's settings, given or logged.
	Settings *Settings
	Path     []gitref.Commit
	Start    *Settings
	Target   *targets.Target
	// Patches are the series each probe carries.
	Patches []patches.Patch
	// Template is the template bundle's directory: as given, else the campaign's.
	Template string
	Protocol bench.Protocol
	// First is Request.Next as a full hash, "" when none was given.
	First        string
	MaxProbes    int
	ReadyTimeout time.Duration
}

// Prepare reads the campaign's log and checks r against it: a new campaign's settings, the
// series and the template the campaign's, Next a commit of the repository. Every mistake in r
// is an inputerr.Error (or Series' error) before anything is built.
func Prepare(ctx context.Context, r Request, log *slog.Logger) (*Campaign, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !gitref.IsRepository(ctx, r.Repo) {
		return nil, inputerr.Errorf("--source %s is not a git repository: give a checkout or mirror of llama.cpp (git clone --mirror https://github.com/ggml-org/llama.cpp)", r.Repo)
	}
	dir, err := filepath.Abs(r.Dir)
	if err != nil {
		return nil, err
	}
	c := &Campaign{Dir: dir, Repo: r.Repo, Out: r.Out, MaxProbes: r.MaxProbes, ReadyTimeout: r.ReadyTimeout}
	if c.Out == "" {
		c.Out = filepath.Join(dir, "artifacts")
	}
	l, err := ReadLog(dir)
	starting := errors.Is(err, ErrNoLog)
	if err != nil && !starting {
		return nil, err
	}
	// a new campaign's settings; a resumed one's, when given, are checked against its log's by Run
	if starting || r.Start {
		if c.Settings, c.Path, err = r.settings(ctx, log); err != nil {
			return nil, err
		}
		if starting && c.Settings.Test == "" {
			c.Settings.Test = TestSignedRank
		}
	}
	c.Start = c.Settings
	if c.Start == nil {
		c.Start = l.Start().Settings
	}
	if c.Target, err = loadTarget(c.Start.Target); err != nil {
		return nil, err
	}
	if c.Patches, err = r.Series(c.Start.Series); err != nil {
		return nil, err
	}
	if got := patchIDs(c.Patches); strings.Join(got, " ") != strings.Join(c.Start.SeriesPatches, " ") {
		return nil, inputerr.Errorf("the campaign's series %s is %v, but here it is %v: give --series FILE with the campaign's patches", c.Start.Series, c.Start.SeriesPatches, got)
	}
	if c.Template = r.Given.Template; c.Template == "" {
		c.Template = c.Start.Template
	}
	if id, err := TemplateIdentity(c.Template, c.Target); err != nil {
		return nil, inputerr.Errorf("--template %s: %v", c.Template, err)
	} else if id != c.Start.TemplateIdentity {
		return nil, inputerr.Errorf("--template %s is not the campaign's template (%s): give the bundle it was started with", c.Template, c.Start.Template)
	}
	if r.Next != "" {
		commit, err := gitref.Resolve(ctx, r.Repo, r.Next)
		if err != nil {
			return nil, inputerr.Errorf("--next: %v", err)
		}
		c.First = commit.Hash
	}
	if c.Protocol, err = c.Start.Protocol(); err != nil {
		return nil, inputerr.Errorf("bisect run: %v", err)
	}
	return c, nil
}

// settings checks r.Given and resolves it into a new campaign's settings and range.
func (r Request) settings(ctx context.Context, log *slog.Logger) (*Settings, []gitref.Commit, error) {
	g := r.Given
	if problems := g.Problems(); len(problems) > 0 {
		return nil, nil, inputerr.Errorf("bisect run: %s", strings.Join(problems, "; "))
	}
	t, err := loadTarget(g.Target)
	if err != nil {
		return nil, nil, err
	}
	path, err := gitref.Path(ctx, r.Repo, g.Good, g.Bad)
	if err != nil {
		return nil, nil, &inputerr.Error{Err: err}
	}
	template, err := filepath.Abs(g.Template)
	if err != nil {
		return nil, nil, err
	}
	id, err := TemplateIdentity(template, t)
	if err != nil {
		return nil, nil, inputerr.Errorf("--template %s: %v", g.Template, err)
	}
	set := &Settings{
		Good: path[0], Bad: path[len(path)-1], Target: t.Name, Template: template, TemplateIdentity: id,
		Mode: g.Mode, Rounds: g.Rounds, MaxRounds: g.MaxRounds, Metric: g.Metric, MinStep: g.MinStep,
		Alpha: g.Alpha, Generate: g.Generate, Rows: g.Rows, Canaries: g.Canaries, Threshold: g.Threshold,
	}
	if _, err := set.Protocol(); err != nil {
		return nil, nil, inputerr.Errorf("bisect run: %v", err)
	}
	switch set.Test = g.Test; set.Test {
	case "", TestSign, TestSignedRank:
	default:
		return nil, nil, inputerr.Errorf("--test %q: use %s or %s", set.Test, TestSignedRank, TestSign)
	}
	switch set.Series = g.Series; set.Series {
	case "":
		if set.Series, err = DefaultSeries(ctx, r.Repo, set.Good, set.Bad, log); err != nil {
			return nil, nil, err
		}
	case patches.SeriesScoring, patches.SeriesPlain:
	default:
		if set.Series, err = filepath.Abs(set.Series); err != nil {
			return nil, nil, err
		}
	}
	series, err := r.Series(set.Series)
	if err != nil {
		return nil, nil, err
	}
	set.SeriesPatches = patchIDs(series)
	return set, path, nil
}

// loadTarget loads a built-in target; an unknown one is the caller's mistake.
func loadTarget(name string) (*targets.Target, error) {
	t, err := targets.Resolve(name, "")
	if errors.Is(err, targets.ErrUnknownTarget) || errors.Is(err, fs.ErrNotExist) {
		return nil, &inputerr.Error{Err: err}
	}
	return t, err
}

// Env is what a campaign runs with on this machine.
type Env struct {
	// Executor builds the probes' plans.
	Executor pipeline.Executor
	// Bencher, when set, is handed the campaign's BenchMeasurer and returns what measures in
	// its place (a stand-in for a GPU where no model can show a speed step).
	Bencher func(*BenchMeasurer) Bencher
	Log     *slog.Logger
	// Progress gets the bench's progress.
	Progress io.Writer
}

// Run carries the campaign on (Options' Run with a PlanBuilder and a BenchMeasurer) up to
// MaxProbes, writes where it stands to w as f says, and logs how to resume a paused one. An
// error wrapping ErrSettingsDiffer or ErrNotLeft (the request's mistakes) or context.Canceled is
// returned as it is; any other says that the log keeps every verdict so far.
func (c *Campaign) Run(ctx context.Context, env Env, w io.Writer, f Format) error {
	recipe, err := recipes.Load("server")
	if err != nil {
		return err
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	m := &BenchMeasurer{
		Dir: c.Dir, Template: c.Template, Target: c.Target, Protocol: c.Protocol, Metric: c.Start.Metric,
		ReadyTimeout: c.ReadyTimeout, Log: env.Log, Progress: env.Progress,
		Invocation: []string{"llbuild", "bisect", "run", "--dir", c.Dir},
	}
	var bencher Bencher = m
	if env.Bencher != nil {
		bencher = env.Bencher(m)
	}
	host, _ := os.Hostname()
	st, runErr := Run(ctx, Options{
		Dir: c.Dir, Settings: c.Settings, Path: c.Path, MaxProbes: c.MaxProbes, First: c.First, Machine: host, Log: env.Log,
		Builder: &PlanBuilder{Repo: c.Repo, Target: c.Target, Recipe: recipe, Series: c.Patches, Executor: env.Executor, Out: c.Out, Log: env.Log},
		Bencher: bencher,
	})
	if st != nil {
		if err := st.Write(w, c.Dir, f); err != nil {
			return err
		}
	}
	switch {
	case runErr == nil:
	case errors.Is(runErr, ErrSettingsDiffer) || errors.Is(runErr, ErrNotLeft) || errors.Is(runErr, context.Canceled):
		return runErr
	default:
		return fmt.Errorf("%w\n(the log keeps every verdict so far: run again with --dir %s)", runErr, c.Dir)
	}
	if st.Phase == PhaseProbing || st.Phase == PhaseEnds || st.Phase == PhaseConfirm {
		env.Log.Info("bisect: paused at --max-probes; resume with llbuild bisect run --dir " + c.Dir + " --source " + c.Repo)
	}
	return nil
}
