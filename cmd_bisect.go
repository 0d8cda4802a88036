package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/bisect"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

func bisectCommand() *cli.Command {
	dirFlag := &cli.StringFlag{Name: "dir", Value: "bisect", Usage: "campaign `DIR`: bisect.log, bundles/, bench/ (every run's record)"}
	runFlags := append([]cli.Flag{
		dirFlag,
		&cli.StringFlag{Name: "good", Usage: "the good end, a commit `REV` (hash, tag, branch) of --source: speed as it was"},
		&cli.StringFlag{Name: "bad", Usage: "the bad end, a later commit `REV` on its first-parent line: speed as it became (slower or faster)"},
		&cli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME` each probe is built for"},
		&cli.StringFlag{Name: "template", Usage: "bundle `DIR` whose model, draft, arguments and environment every probe is bundled with"},
		&cli.StringFlag{Name: "series", Usage: "what each probe carries: `scoring` (the built-in series), plain (patch 0001 alone) or a series FILE (default: scoring where it applies at both ends, else plain)"},
		&cli.StringFlag{Name: "mode", Value: bench.ModeScreen, Usage: "the bench's `mode`: screen or full"},
		&cli.IntFlag{Name: "rounds", Value: 3, Usage: "interleaved rounds per measurement, `N`"},
		&cli.IntFlag{Name: "max-rounds", Value: 9, Usage: "rounds a measurement may take in all, `N`, before a verdict that stays not significant skips the probe"},
		&cli.StringFlag{Name: "test", Usage: "how rounds are judged against a ratio, `TEST`: signed-rank (Wilcoxon's, on the log ratios: how far each round lies counts; what a new campaign uses) or sign (counts the rounds on each side; logs from before the choice); a resumed campaign keeps its own"},
		&cli.IntFlag{Name: "generate", Usage: "tokens each row generates, `G` (default: the bench's 512); longer rows read less noisy"},
		&cli.IntFlag{Name: "rows", Usage: "rows per run, `N` (default from --mode)"},
		&cli.IntFlag{Name: "canaries", Usage: "canary checks per run, `N` (default from --mode)"},
		&cli.StringFlag{Name: "metric", Value: bisect.MetricRow0, Usage: "what is compared: `row0` (row 0's decode tok/s, llama-server's timings), row0-client (the bench's clock) or repeated (rows 1..N-1)"},
		&cli.Float64Flag{Name: "threshold", Usage: "probe/good `RATIO` that divides good from bad (default: midway between 1 and the ends' ratio)"},
		&cli.IntFlag{Name: "max-probes", Usage: "stop after `N` measurements (ends and confirmation count); the log resumes anywhere"},
		&cli.StringFlag{Name: "next", Usage: "probe commit `REV` first instead of the middle: a suspect (a PR the changelog points at), or its parent to confirm it; it must lie between the last good and the first bad commit, not probed yet"},
		&cli.DurationFlag{Name: "ready-timeout", Value: 10 * time.Minute, Usage: "how long a llama-server may take to load, `DURATION`"},
		jsonFlag,
	}, append(judgeFlags(), executorFlags("llama.cpp git repository or mirror `DIR` (bare, shallow, or without blobs no build reads)", "")...)...)
	return &cli.Command{
		Name:  "bisect",
		Usage: "find the upstream commit that made a build slower or faster: build, bundle and bench commits of a range",
		Subcommands: []*cli.Command{
			{
				Name:  "run",
				Usage: "start a campaign, or resume the one in --dir, until the first bad commit is named and confirmed",
				Description: "The ends are built (artifacts reused by plan hash) and bundled as --template is, then benched\n" +
					"interleaved on this machine, and the bench's judge decides (Wilcoxon's signed-rank test of the\n" +
					"rounds' log ratios, two-sided at --alpha; 6 rounds are the fewest that can decide at 0.05): if\n" +
					"bad/good is slower or faster by at least --min-step, there is a step. Each probe (the commit\n" +
					"nearest the middle of what is left) is built, bundled and benched against the good end; the\n" +
					"judge says on which side of the threshold its probe/good ratios lie (bad end's: bad; other:\n" +
					"good), else it is measured again up to --max-rounds and skipped. A failed build or failed canaries skip it too. The first bad commit is\n" +
					"then benched against its parent. Every step is appended to DIR/bisect.log before the next starts:\n" +
					"run again with --dir (and --source) on any machine to go on. stdout: the campaign's table\n" +
					"(--json: its state). Exit status: 0 the campaign ended or paused at --max-probes, 1 a failure,\n" +
					"2 usage.",
				Flags:  runFlags,
				Action: bisectRun,
			},
			{
				Name:      "log",
				Usage:     "show a campaign: its ends, every probe, and where it stands",
				ArgsUsage: "DIR|FILE",
				Flags:     []cli.Flag{jsonFlag, &cli.BoolFlag{Name: "verdicts", Usage: "print only the verdict lines, as git bisect log does"}},
				Action:    bisectLog,
			},
			{
				Name:      "replay",
				Usage:     "start a campaign in --dir from a log FILE (one edited to drop a wrong verdict, say, or judged again with --test), then run resumes it",
				ArgsUsage: "FILE",
				Flags: []cli.Flag{dirFlag, jsonFlag,
					&cli.StringFlag{Name: "test", Usage: "judge every recorded measurement again with `TEST` (signed-rank or sign), no GPU needed: the new campaign's verdicts, and its later probes, follow it"},
					&cli.Float64Flag{Name: "alpha", Usage: "with --test: the level `P` to judge at (default: the log's)"},
				},
				Action: bisectReplay,
			},
		},
	}
}

// bisectBencher measures for bisect run: llbuild bench itself; a test puts in its place a
// measurement read from the built tree, where no model can show a speed step.
var bisectBencher = func(m *bisect.BenchMeasurer) bisect.Bencher { return m }

// bisectRequest is what `llbuild bisect run` was asked to do: a campaign's directory, its
// settings (a new campaign's, or a resumed one's as given) and what it builds and benches with.
type bisectRequest struct {
	Dir  string
	Exec executorOptions
	// Set and Path are the settings and range given (nil when a campaign resumes from its log
	// alone); Start the campaign's settings, given or logged.
	Set      *bisect.Settings
	Path     []gitref.Commit
	Start    *bisect.Settings
	Target   *targets.Target
	Series   []patches.Patch
	Template string
	// First is --next resolved to a full hash, "" when not given.
	First string
	// MaxProbes, ReadyTimeout and JSON are --max-probes, --ready-timeout and --json.
	MaxProbes    int
	ReadyTimeout time.Duration
	JSON         bool
}

func bisectRun(c *cli.Context) error {
	r, err := bisectRequestOf(c)
	if err != nil {
		return err
	}
	return runBisect(c.Context, r, streamsOf(c))
}

// bisectRequestOf reads the flags and the campaign's log, and checks that the series and the
// template are the campaign's: every usage error before anything is built.
func bisectRequestOf(c *cli.Context) (bisectRequest, error) {
	var r bisectRequest
	if c.NArg() > 0 {
		return r, usagef("bisect run takes no arguments, got %q", c.Args().Slice())
	}
	dir, err := filepath.Abs(c.String("dir"))
	if err != nil {
		return r, err
	}
	r.Dir = dir
	eo, err := executorOptionsOf(c)
	if err != nil {
		return r, err
	}
	if eo.Source == "" {
		return r, usagef("bisect run needs --source DIR: the llama.cpp git repository or mirror holding the range")
	}
	if err := eo.check(); err != nil {
		return r, err
	}
	ctx := c.Context
	if !gitref.IsRepository(ctx, eo.Source) {
		return r, usagef("--source %s is not a git repository: give a checkout or mirror of llama.cpp (git clone --mirror https://github.com/ggml-org/llama.cpp)", eo.Source)
	}
	log, existing := bisect.ReadLog(dir)
	starting := errors.Is(existing, bisect.ErrNoLog)
	if existing != nil && !starting {
		return r, existing
	}
	var set *bisect.Settings
	var path []gitref.Commit
	// a new campaign's settings; a resumed one's, when given, are checked against its log's by
	// bisect.Run
	if given := c.IsSet("good") || c.IsSet("bad") || c.IsSet("target") || c.IsSet("template"); starting || given {
		if set, path, err = bisectSettings(c, eo.Source); err != nil {
			return r, err
		}
		if starting && set.Test == "" {
			set.Test = bisect.TestSignedRank
		}
	}
	start := set
	if start == nil {
		start = log.Start().Settings
	}
	t, err := loadTarget(start.Target, "")
	if err != nil {
		return r, err
	}
	series, err := seriesByName(start.Series)
	if err != nil {
		return r, err
	}
	if got := patchIDs(series); strings.Join(got, " ") != strings.Join(start.SeriesPatches, " ") {
		return r, usagef("the campaign's series %s is %v, but here it is %v: give --series FILE with the campaign's patches", start.Series, start.SeriesPatches, got)
	}
	template := c.String("template")
	if template == "" {
		template = start.Template
	}
	if id, err := templateIdentity(template, t); err != nil {
		return r, usagef("--template %s: %v", template, err)
	} else if id != start.TemplateIdentity {
		return r, usagef("--template %s is not the campaign's template (%s): give the bundle it was started with", template, start.Template)
	}
	if !c.IsSet("out") {
		eo.Out = filepath.Join(dir, "artifacts")
	}
	if rev := c.String("next"); rev != "" {
		commit, err := gitref.Resolve(ctx, eo.Source, rev)
		if err != nil {
			return r, usagef("--next: %v", err)
		}
		r.First = commit.Hash
	}
	r.Exec, r.Set, r.Path, r.Start, r.Target, r.Series, r.Template = eo, set, path, start, t, series, template
	r.MaxProbes, r.ReadyTimeout, r.JSON = c.Int("max-probes"), c.Duration("ready-timeout"), c.Bool("json")
	return r, nil
}

// runBisect builds and benches the campaign's next probes, up to --max-probes, and prints where
// it stands.
func runBisect(ctx context.Context, r bisectRequest, s streams) error {
	dir, eo, set, path, start, t, series, template := r.Dir, r.Exec, r.Set, r.Path, r.Start, r.Target, r.Series, r.Template
	recipe, err := recipes.Load("server")
	if err != nil {
		return err
	}
	ex, err := newExecutor(s, eo, series, s.Term)
	if err != nil {
		return err
	}
	if cl, ok := ex.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	proto, err := bisectProtocol(start)
	if err != nil {
		return usagef("bisect run: %v", err)
	}
	host, _ := os.Hostname()
	st, runErr := bisect.Run(ctx, bisect.Options{
		Dir: dir, Settings: set, Path: path, MaxProbes: r.MaxProbes, First: r.First, Machine: host, Log: s.Log,
		Builder: &bisect.PlanBuilder{
			Repo: eo.Source, Target: t, Recipe: recipe, Series: series, Executor: ex, Out: eo.Out, Log: s.Log,
		},
		Bencher: bisectBencher(&bisect.BenchMeasurer{
			Dir: dir, Template: template, Target: t, Protocol: proto, Metric: start.Metric,
			ReadyTimeout: r.ReadyTimeout, Log: s.Log, Progress: s.Stderr,
			Invocation: []string{"llbuild", "bisect", "run", "--dir", dir},
		}),
	})
	if st != nil {
		if err := printBisect(s.Stdout, r.JSON, false, dir, st); err != nil {
			return err
		}
	}
	if runErr != nil {
		if errors.Is(runErr, bisect.ErrSettingsDiffer) || errors.Is(runErr, bisect.ErrNotLeft) {
			return usageError{runErr}
		}
		if errors.Is(runErr, context.Canceled) {
			return cli.Exit("bisect: interrupted; the log keeps every verdict so far: run again with --dir "+dir, exitInterrupted)
		}
		return fmt.Errorf("%w\n(the log keeps every verdict so far: run again with --dir %s)", runErr, dir)
	}
	if st.Phase == bisect.PhaseProbing || st.Phase == bisect.PhaseEnds || st.Phase == bisect.PhaseConfirm {
		s.Log.Info("bisect: paused at --max-probes; resume with llbuild bisect run --dir " + dir + " --source " + eo.Source)
	}
	return nil
}

// bisectSettings reads a new campaign's settings from the flags, all problems together.
func bisectSettings(c *cli.Context, repo string) (*bisect.Settings, []gitref.Commit, error) {
	if problems := bisectFlagProblems(c); len(problems) > 0 {
		return nil, nil, usagef("bisect run: %s", strings.Join(problems, "; "))
	}
	t, err := loadTarget(c.String("target"), "")
	if err != nil {
		return nil, nil, err
	}
	path, err := gitref.Path(c.Context, repo, c.String("good"), c.String("bad"))
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	template, err := filepath.Abs(c.String("template"))
	if err != nil {
		return nil, nil, err
	}
	id, err := templateIdentity(template, t)
	if err != nil {
		return nil, nil, usagef("--template %s: %v", c.String("template"), err)
	}
	set := &bisect.Settings{
		Good: path[0], Bad: path[len(path)-1], Target: t.Name, Template: template, TemplateIdentity: id,
		Mode: c.String("mode"), Rounds: c.Int("rounds"), MaxRounds: c.Int("max-rounds"), Metric: c.String("metric"), MinStep: c.Float64("min-step"),
		Alpha: c.Float64("alpha"), Generate: c.Int("generate"), Rows: c.Int("rows"), Canaries: c.Int("canaries"),
	}
	if _, err := bisectProtocol(set); err != nil {
		return nil, nil, usagef("bisect run: %v", err)
	}
	if c.IsSet("threshold") {
		th := c.Float64("threshold")
		set.Threshold = &th
	}
	switch set.Test = c.String("test"); set.Test {
	case "", bisect.TestSign, bisect.TestSignedRank:
	default:
		return nil, nil, usagef("--test %q: use %s or %s", set.Test, bisect.TestSignedRank, bisect.TestSign)
	}
	switch set.Series = c.String("series"); set.Series {
	case "":
		if set.Series, err = defaultBisectSeries(c, repo, set.Good, set.Bad); err != nil {
			return nil, nil, err
		}
	case patches.SeriesScoring, patches.SeriesPlain:
	default:
		if set.Series, err = filepath.Abs(set.Series); err != nil {
			return nil, nil, err
		}
	}
	series, err := seriesByName(set.Series)
	if err != nil {
		return nil, nil, err
	}
	set.SeriesPatches = patchIDs(series)
	return set, path, nil
}

// bisectFlagProblems says what is wrong with the flags that start a campaign, each in a phrase.
func bisectFlagProblems(c *cli.Context) []string {
	var problems []string
	for _, f := range []string{"good", "bad", "target", "template"} {
		if c.String(f) == "" {
			problems = append(problems, "--"+f+" is needed to start a campaign")
		}
	}
	if metric := c.String("metric"); !slices.Contains(bisect.Metrics, metric) {
		problems = append(problems, fmt.Sprintf("--metric %q: want one of %s", metric, strings.Join(bisect.Metrics, ", ")))
	}
	if _, err := bench.DefaultProtocol(c.String("mode")); err != nil {
		problems = append(problems, "--"+err.Error())
	}
	rounds, maxRounds := c.Int("rounds"), c.Int("max-rounds")
	if rounds < 2 {
		problems = append(problems, fmt.Sprintf("--rounds %d: a verdict needs a spread, give 2 or more (3 is the default)", rounds))
	}
	if maxRounds < rounds {
		problems = append(problems, fmt.Sprintf("--max-rounds %d is below --rounds %d", maxRounds, rounds))
	}
	if a := c.Float64("alpha"); a <= 0 || a >= 0.5 {
		problems = append(problems, fmt.Sprintf("--alpha %v: want a level between 0 and 0.5 (0.05 is the default)", a))
	}
	for _, f := range []string{"generate", "rows", "canaries"} {
		if c.Int(f) < 0 {
			problems = append(problems, fmt.Sprintf("--%s %d: want 1 or more", f, c.Int(f)))
		}
	}
	if s := c.Float64("min-step"); s < 0 || s >= 1 {
		problems = append(problems, fmt.Sprintf("--min-step %v: want a fraction from 0 to 1 (0.01, 1%%, is the default)", s))
	}
	return problems
}

// defaultBisectSeries is the series a campaign carries when --series is not given: the scoring
// series where it applies at both ends, else patch 0001 alone. The scoring series is made for
// one commit; across a range it often stops applying, and every probe must carry the same
// patches to be comparable.
func defaultBisectSeries(c *cli.Context, repo string, good, bad gitref.Commit) (string, error) {
	scoring, err := patches.Named(patches.SeriesScoring)
	if err != nil {
		return "", err
	}
	both := true
	for _, end := range []gitref.Commit{good, bad} {
		rep, err := patches.Status(c.Context, repo, end.Hash, scoring)
		both = both && err == nil && rep.OK()
	}
	if both {
		loggerOf(c).Info("bisect: series chosen", "series", patches.SeriesScoring, "why", "the scoring series applies at both ends")
		return patches.SeriesScoring, nil
	}
	loggerOf(c).Info("bisect: series chosen", "series", patches.SeriesPlain, "why", "the scoring series does not apply at both ends: patch 0001 alone")
	return patches.SeriesPlain, nil
}

// bisectProtocol is the bench protocol of a campaign: its mode's, with the campaign's overrides.
func bisectProtocol(set *bisect.Settings) (bench.Protocol, error) {
	p, err := bench.DefaultProtocol(set.Mode)
	if err != nil {
		return p, err
	}
	if set.Generate > 0 {
		p.Generate = set.Generate
	}
	if set.Rows > 0 {
		p.Rows = set.Rows
	}
	if set.Canaries > 0 {
		p.Canaries = set.Canaries
	}
	return p, p.Validate()
}

func patchIDs(series []patches.Patch) []string {
	ids := []string{}
	for _, p := range series {
		ids = append(ids, p.Name+" sha256:"+p.SHA256)
	}
	return ids
}

// templateIdentity names what a template bundle gives each probe, wherever it lies: its
// models by sha256, the arguments and environment it adds.
func templateIdentity(dir string, t *targets.Target) (string, error) {
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

func printBisect(out io.Writer, asJSON, verdicts bool, dir string, st *bisect.State) error {
	set := st.Settings
	if asJSON {
		return writeJSON(out, bisect.Summary{Dir: dir, Settings: set, State: st, Commits: len(st.Path) - 1})
	}
	if verdicts {
		_, err := fmt.Fprint(out, st.Lines())
		return err
	}
	return st.WriteText(out, set)
}

func bisectLog(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("bisect log takes one campaign DIR, or a log FILE")
	}
	arg := c.Args().First()
	var l *bisect.Log
	var err error
	if fi, serr := os.Stat(arg); serr == nil && fi.Mode().IsRegular() {
		// a log kept apart from its campaign (a copy carried back from a GPU machine)
		l, err = bisect.ReadLogFile(arg)
	} else {
		l, err = bisect.ReadLog(arg)
	}
	if errors.Is(err, bisect.ErrNoLog) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	st, err := bisect.Replay(l.Events)
	if err != nil {
		return err
	}
	return printBisect(stdoutOf(c), c.Bool("json"), c.Bool("verdicts"), arg, st)
}

func bisectReplay(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("bisect replay takes one log FILE")
	}
	l, err := bisect.ReadLogFile(c.Args().First())
	if err != nil {
		return usageError{err}
	}
	events := l.Events
	if c.IsSet("alpha") && !c.IsSet("test") {
		return usagef("--alpha needs --test: it is the level the measurements are judged again at")
	}
	if test := c.String("test"); test != "" {
		if a := c.Float64("alpha"); c.IsSet("alpha") && (a <= 0 || a >= 0.5) {
			return usagef("--alpha %v: want a level between 0 and 0.5", a)
		}
		var changes []string
		if events, changes, err = bisect.Rejudge(events, test, c.Float64("alpha")); err != nil {
			return usageError{err}
		}
		for _, ch := range changes {
			loggerOf(c).Info("bisect replay: judged again", "change", ch)
		}
		if len(changes) == 0 {
			loggerOf(c).Info("bisect replay: every verdict stands under the " + test + " test")
		}
	}
	st, err := bisect.Replay(events)
	if err != nil {
		return usageError{err}
	}
	dir, err := filepath.Abs(c.String("dir"))
	if err != nil {
		return err
	}
	if _, err := bisect.ReadLog(dir); !errors.Is(err, bisect.ErrNoLog) {
		return usagef("%s already holds a campaign: replay into a new --dir", dir)
	}
	l = &bisect.Log{Dir: dir}
	for _, e := range events {
		if err := l.Append(e); err != nil {
			return err
		}
	}
	return printBisect(stdoutOf(c), c.Bool("json"), c.Bool("verdicts"), dir, st)
}
