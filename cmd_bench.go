package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/jsonout"
	"github.com/llbuild/llbuild/pipeline/recorded"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure bundles the way tuning labs do: canaries, fresh row 0, validity, identity, records, A/B",
		ArgsUsage: "BUNDLE [BUNDLE...]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "mode", Value: bench.ModeScreen, Usage: "`screen` (128 canary checks, 1 row) or full (384 checks, 8 rows; only a full run can be promoted)"},
			&cli.IntFlag{Name: "canaries", Value: -1, Usage: "canary checks, `N` (default from --mode)"},
			&cli.IntFlag{Name: "canary-tokens", Value: 16, Usage: "tokens each canary check generates, `N`"},
			&cli.IntFlag{Name: "rows", Value: -1, Usage: "measured responses, `N`: row 0 fresh, the others repeat its prompt (default from --mode)"},
			&cli.StringFlag{Name: "prompt", Value: bench.PromptFilledLong, Usage: "`filled-long` (a filler text of --prompt-tokens tokens) or short (one sentence)"},
			&cli.IntFlag{Name: "prompt-tokens", Value: 588, Usage: "the filled-long prompt's length, `P` tokens"},
			&cli.StringFlag{Name: "prompt-file", Usage: "use the text of `FILE` as the prompt"},
			&cli.IntFlag{Name: "generate", Value: 512, Usage: "tokens each row generates, `G` (end of sequence ignored)"},
			&cli.StringFlag{Name: "label", Usage: "a human `NAME` for the runs, first in their labels (letters, digits, '.', '_', '=')"},
			&cli.StringFlag{Name: "note", Usage: "free `TEXT` kept with each run's record and in records.json (what was tried, and why)"},
			&cli.BoolFlag{Name: "chat", Usage: "send the rows' prompt as a chat turn rendered by the model's own template (a --prompt-file holding a JSON array of messages gives the conversation; its image_url parts, data: URLs, go to the projector of a bundle made with --mmproj), as an app calling /v1/chat/completions does"},
			&cli.IntFlag{Name: "rounds", Usage: "runs per bundle, `N`; several bundles interleave A B A B (default 1, or with several bundles the fewest the judge can decide with: 6 at --alpha 0.05)"},
			&cli.StringSliceFlag{Name: "sweep", Usage: "make variants of one BUNDLE and sweep them: `SETTING=V1,V2,...` with SETTING a llama-server flag (--spec-draft-n-max=3,8,16) or an environment switch (GGML_CUDA_DISABLE_GRAPHS=0,1); repeat for a grid. The variants (files hard-linked) and the defaults are screened (--rounds, default 1); the screen's leader then meets the defaults and the next two in full mode, interleaved, and the judge says whether it is faster"},
			&cli.StringFlag{Name: "control", Usage: "with --gpus: a control `BUNDLE` run on every device in every round, to say how much the devices differ (bundles rotate across devices from round to round)"},
			&cli.StringFlag{Name: "gpus", Usage: "run bundles in parallel, one per device of `LIST` (0,1,2,3): CUDA_VISIBLE_DEVICES or ONEAPI_DEVICE_SELECTOR per run"},
			&cli.StringFlag{Name: "dir", Value: "bench-runs", Usage: "campaign `DIR`: runs/LABEL/{record.json,server.log} and records.json"},
			&cli.DurationFlag{Name: "ready-timeout", Value: 10 * time.Minute, Usage: "how long a llama-server may take to load, `DURATION`"},
			&cli.BoolFlag{Name: "json", Usage: "print the runs and comparisons as JSON instead of the table"},
		}, cmdutil.JudgeFlags()...),
		Description: "Each BUNDLE (a directory or a .tar.zst/.tar.gz archive) is verified, then started exactly as\n" +
			"`llbuild serve` starts it, on loopback. A run: canary checks (greedy outputs of fixed prompts\n" +
			"against a reference made with speculative decoding off for that request, or, without a draft,\n" +
			"repeated outputs), then row 0 (a prompt the server process has not seen) and rows 1..N-1\n" +
			"repeating it, each a full prefill with end of sequence ignored. Figures per row: decode tok/s\n" +
			"from llama-server's timings and from the bench's clock, time to first token, prompt tok/s,\n" +
			"draft tokens proposed and accepted. A run is valid when its canaries pass, no row reused a\n" +
			"cached token, the bundle's arguments allow no reuse (--cache-ram 0, --ctx-checkpoints 0, no\n" +
			"--cache-reuse, no n-gram or lookup speculation) and llama-server ran throughout. Each run is\n" +
			"written to DIR/runs/LABEL/ (record.json, server.log) and DIR/records.json, where a valid full\n" +
			"run is promoted when the judge says it is faster than the standing record's bundle benched in the\n" +
			"same rounds (the first full run of a model and protocol is its first record). With several\n" +
			"bundles the runs interleave, and each B/A is judged by Wilcoxon's signed-rank test of the rounds'\n" +
			"log row-0 ratios, two-sided at --alpha, with --min-step: faster, slower, no difference, or not\n" +
			"enough rounds to decide (N needed), never a direction the test does not support. Progress goes\n" +
			"to stderr.\n" +
			"Exit status: 0 every run valid, 1 a run invalid, failed or below its canaries, 2 usage,\n" +
			"130 interrupted (the runs measured so far are kept, the one in progress marked incomplete).",
		Subcommands: []*cli.Command{benchReportCommand()},
		Action: func(c *cli.Context) error {
			o, err := benchOptionsOf(c)
			if err != nil {
				return err
			}
			return runBench(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// benchOptions is what `llbuild bench` was asked to measure and how to print it.
type benchOptions struct {
	// Bundles are the bundles as given; Control the --control bundle.
	Bundles []string
	Control string
	// Sweeps are the --sweep settings, SETTING=V1,V2,...
	Sweeps []string
	JSON   bool
	// Bench is the bench's options, Full among them a sweep's full-mode protocol (the canaries
	// given, if --canaries was).
	Bench bench.SweepOptions
}

// benchOptionsOf reads the arguments and flags; usage errors are found here, all the protocol's
// and scheduling's together.
func benchOptionsOf(c *cli.Context) (benchOptions, error) {
	o := benchOptions{Bundles: c.Args().Slice(), Control: c.String("control"), Sweeps: c.StringSlice("sweep"), JSON: c.Bool("json")}
	if len(o.Bundles) == 0 {
		return o, cmdutil.Usagef("bench takes one or more BUNDLE directories or archives")
	}
	if len(o.Sweeps) > 0 && len(o.Bundles) != 1 {
		return o, cmdutil.Usagef("--sweep makes variants of one BUNDLE, got %d", len(o.Bundles))
	}
	var err error
	o.Bench.Options, err = bench.Settings{Mode: c.String("mode"), Canaries: c.Int("canaries"), CanaryTokens: c.Int("canary-tokens"), Rows: c.Int("rows"),
		Prompt: c.String("prompt"), PromptFile: c.String("prompt-file"), PromptTokens: c.Int("prompt-tokens"), Generate: c.Int("generate"),
		Rounds: c.Int("rounds"), Chat: c.Bool("chat"), GPUs: c.String("gpus"), Dir: c.String("dir"), Name: c.String("label"), Note: c.String("note"),
		ReadyTimeout: c.Duration("ready-timeout")}.Options()
	if err != nil {
		return o, cmdutil.Usage(err)
	}
	if o.Bench.Judge, err = cmdutil.JudgeOf(c); err != nil {
		return o, err
	}
	if o.Control != "" && len(o.Bench.GPUs) < 2 {
		return o, cmdutil.Usagef("--control runs a bundle on every device: give two or more --gpus")
	}
	o.Bench.Invocation = []string{"llbuild", "bench"}
	for _, f := range c.Command.Flags {
		if name := f.Names()[0]; c.IsSet(name) {
			o.Bench.Invocation = append(o.Bench.Invocation, fmt.Sprintf("--%s=%v", name, c.Value(name)))
		}
	}
	o.Bench.Invocation = append(o.Bench.Invocation, o.Bundles...)
	o.Bench.Full = o.Bench.Protocol.FullMode(c.IsSet("canaries"))
	return o, nil
}

// runBench benches the bundles (or sweeps the one) and prints the table or JSON, with the plan
// diffs beside the A/B; it fails when a run does not count.
func runBench(ctx context.Context, o benchOptions, s cmdutil.Streams) error {
	o.Bench.Log, o.Bench.Progress, o.Bench.Status = s.Log, s.Stderr, s.Term
	if len(o.Sweeps) > 0 {
		res, err := bench.SweepBundle(ctx, o.Bundles[0], cmdutil.OpenBundle, o.Sweeps, o.Bench)
		if res == nil {
			return cmdutil.UsageOf(err)
		}
		return benchOutcome(s.Stdout, o.JSON, res, res.Err(err), res.WriteTables)
	}
	ob, err := bench.OpenBundles(ctx, o.Bundles, o.Control, cmdutil.OpenBundle)
	if err != nil {
		return err
	}
	defer ob.Close()
	o.Bench.Control = ob.Control
	res, runErr := bench.Run(ctx, ob.Bundles, o.Bench.Options)
	if res == nil {
		return runErr
	}
	diffs := recorded.DiffBuilds(ctx, o.Bundles, ob.Dirs)
	return benchOutcome(s.Stdout, o.JSON, struct {
		*bench.Result
		PlanDiffs recorded.BuildDiffs `json:"planDiffs,omitempty"`
	}{res, diffs}, cmp.Or(runErr, res.Err()), res.WriteText, diffs.WriteText)
}

// benchOutcome prints a bench's result v, as JSON or with text (each writer in turn), then
// returns the bench's outcome err; an interrupted bench's gets exit status 130.
func benchOutcome(w io.Writer, asJSON bool, v any, err error, text ...func(io.Writer) error) error {
	if asJSON {
		text = []func(io.Writer) error{func(w io.Writer) error { return jsonout.Write(w, v) }}
	}
	for _, write := range text {
		if werr := write(w); werr != nil {
			return werr
		}
	}
	if ie := (*bench.InterruptedError)(nil); errors.As(err, &ie) {
		return cli.Exit(err.Error(), cmdutil.ExitInterrupted)
	}
	return err
}

func benchReportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "the campaign's page: report.md (the lab's sections) and report.html (one static file, inline SVG charts)",
		ArgsUsage: "DIR",
		Description: "Reads the campaign DIR (records.json, each run's record.json, comparisons.json) and writes\n" +
			"report.md and report.html into --out (default DIR): Decision, Validity, Delta from the previous\n" +
			"record, Command identity, Screens and full runs, A/B comparisons and Learning; the HTML adds row 0\n" +
			"of every run in time with the standing record, the A/B ratios with their spread and the draft\n" +
			"acceptance, as inline SVG (no script, no network). stdout: the two paths; with --leaderboard\n" +
			"LABEL, that promoted run's JSON for a public leaderboard instead.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "`DIR` to write report.md and report.html into (default: the campaign's)"},
			&cli.StringFlag{Name: "leaderboard", Usage: "print the promoted run `LABEL` as a leaderboard's JSON entry (identity, plan hash, manifest sha256, row 0, validity) instead"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cmdutil.Usagef("bench report takes one campaign DIR")
			}
			return runBenchReport(c.Args().First(), cmp.Or(c.String("out"), c.Args().First()), c.String("leaderboard"), cmdutil.Stdout(c))
		},
	}
}

// runBenchReport writes the page of the campaign in dir into out and prints its paths, or,
// with a label, prints that promoted run's leaderboard entry.
func runBenchReport(dir, out, label string, stdout io.Writer) error {
	rep, err := bench.ReadReport(dir)
	if err != nil {
		return cmdutil.Usage(err)
	}
	if label != "" {
		e, err := rep.Leaderboard(label)
		if errors.Is(err, bench.ErrUnbacked) {
			return cli.Exit(err.Error(), cmdutil.ExitFailed)
		}
		if err != nil {
			return cmdutil.Usage(err)
		}
		return jsonout.Write(stdout, e)
	}
	paths, err := rep.WriteFiles(out)
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	return err
}
