package main

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/bisect"
	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline/executor"
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
		cmdutil.JSONFlag,
	}, append(cmdutil.JudgeFlags(), cmdutil.ExecutorFlags("llama.cpp git repository or mirror `DIR` (bare, shallow, or without blobs no build reads)", "")...)...)
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
				Action: bisectAction,
			},
			{
				Name:      "log",
				Usage:     "show a campaign: its ends, every probe, and where it stands",
				ArgsUsage: "DIR|FILE",
				Flags:     []cli.Flag{cmdutil.JSONFlag, &cli.BoolFlag{Name: "verdicts", Usage: "print only the verdict lines, as git bisect log does"}},
				Action:    bisectAction,
			},
			{
				Name:      "replay",
				Usage:     "start a campaign in --dir from a log FILE (one edited to drop a wrong verdict, say, or judged again with --test), then run resumes it",
				ArgsUsage: "FILE",
				Flags: []cli.Flag{dirFlag, cmdutil.JSONFlag,
					&cli.StringFlag{Name: "test", Usage: "judge every recorded measurement again with `TEST` (signed-rank or sign), no GPU needed: the new campaign's verdicts, and its later probes, follow it"},
					&cli.Float64Flag{Name: "alpha", Usage: "with --test: the level `P` to judge at (default: the log's)"},
				},
				Action: bisectAction,
			},
		},
	}
}

// bisectBencher measures for bisect run: llbuild bench itself; a test puts in its place a
// measurement read from the built tree, where no model can show a speed step.
var bisectBencher = func(m *bisect.BenchMeasurer) bisect.Bencher { return m }

// bisectOptions are the arguments and flags of bisect's subcommand sub (run, log or replay).
type bisectOptions struct {
	sub      string
	args     []string
	exec     executor.Options
	run      bisect.Request
	alphaSet bool
	format   bisect.Format
}

func bisectOptionsOf(c *cli.Context) (bisectOptions, error) {
	eo, err := cmdutil.ExecutorOptionsOf(c)
	if err != nil {
		return bisectOptions{}, err
	}
	g := bisect.Given{Good: c.String("good"), Bad: c.String("bad"), Target: c.String("target"), Template: c.String("template"), Series: c.String("series"),
		Mode: c.String("mode"), Metric: c.String("metric"), Test: c.String("test"), Rounds: c.Int("rounds"), MaxRounds: c.Int("max-rounds"),
		Generate: c.Int("generate"), Rows: c.Int("rows"), Canaries: c.Int("canaries"), Alpha: c.Float64("alpha"), MinStep: c.Float64("min-step")}
	if th := c.Float64("threshold"); c.IsSet("threshold") {
		if !(th > 0) || math.IsInf(th, 0) || th == 1 {
			// a probe/good ratio: a speed step lies between 1 and the ends' ratio, never at or below 0
			return bisectOptions{}, cmdutil.Usagef("--threshold %v: give a probe/good ratio above 0 and not 1 (0.95 for a 5 %% slowdown, 1.05 for a 5 %% speed-up), or leave it out for midway between 1 and the ends' ratio", th)
		}
		g.Threshold = &th
	}
	o := bisectOptions{sub: c.Command.Name, args: c.Args().Slice(), exec: eo, alphaSet: c.IsSet("alpha"), format: bisect.Format{JSON: c.Bool("json"), Verdicts: c.Bool("verdicts")},
		run: bisect.Request{Dir: c.String("dir"), Repo: eo.Source, Given: g, Next: c.String("next"), MaxProbes: c.Int("max-probes"),
			ReadyTimeout: c.Duration("ready-timeout"), Series: patches.ByName, Start: c.IsSet("good") || c.IsSet("bad") || c.IsSet("target") || c.IsSet("template")}}
	if c.IsSet("out") {
		o.run.Out = eo.Out
	}
	return o, o.check()
}

// check says what is wrong with the options of o.sub, as usage errors.
func (o bisectOptions) check() error {
	switch sub := o.sub; {
	case sub == "run" && len(o.args) > 0:
		return cmdutil.Usagef("bisect run takes no arguments, got %q", o.args)
	case sub == "run" && o.exec.Source == "":
		return cmdutil.Usagef("bisect run needs --source DIR: the llama.cpp git repository or mirror holding the range")
	case sub == "run":
		return cmdutil.UsageOf(o.exec.Check())
	case sub == "log" && len(o.args) != 1:
		return cmdutil.Usagef("bisect log takes one campaign DIR, or a log FILE")
	case sub == "replay" && len(o.args) != 1:
		return cmdutil.Usagef("bisect replay takes one log FILE")
	case sub == "replay" && o.alphaSet && o.run.Given.Test == "":
		return cmdutil.Usagef("--alpha needs --test: it is the level the measurements are judged again at")
	case sub == "replay" && o.alphaSet && (o.run.Given.Alpha <= 0 || o.run.Given.Alpha >= 0.5):
		return cmdutil.Usagef("--alpha %v: want a level between 0 and 0.5", o.run.Given.Alpha)
	}
	return nil
}

func bisectAction(c *cli.Context) error {
	o, err := bisectOptionsOf(c)
	if err != nil {
		return err
	}
	return runBisect(c.Context, o, cmdutil.StreamsOf(c))
}

// runBisect shows a campaign (log), starts one from a log (replay), or builds and benches a
// campaign's next probes (run).
func runBisect(ctx context.Context, o bisectOptions, s cmdutil.Streams) error {
	switch o.sub {
	case "log":
		return cmdutil.UsageOf(bisect.Show(s.Stdout, o.args[0], o.format, s.Log))
	case "replay":
		return cmdutil.UsageOf(bisect.Restart(s.Stdout, o.args[0], o.run.Dir, o.run.Given.Test, o.run.Given.Alpha, o.format, s.Log))
	}
	camp, err := bisect.Prepare(ctx, o.run, s.Log)
	if err != nil {
		return cmdutil.UsageOf(err)
	}
	ex, err := executor.New(o.exec, cmdutil.ExecutorEnv(s, s.Term), camp.Patches)
	if err != nil {
		return err
	}
	if cl, ok := ex.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	err = camp.Run(ctx, bisect.Env{Executor: ex, Bencher: bisectBencher, Log: s.Log, Progress: s.Stderr}, s.Stdout, o.format)
	switch {
	case errors.Is(err, bisect.ErrSettingsDiffer) || errors.Is(err, bisect.ErrNotLeft):
		return cmdutil.Usage(err)
	case errors.Is(err, context.Canceled):
		return cli.Exit("bisect: interrupted; the log keeps every verdict so far: run again with --dir "+camp.Dir, cmdutil.ExitInterrupted)
	}
	return err
}
