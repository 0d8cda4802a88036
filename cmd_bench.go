package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/llbuild/llbuild/internal/atomicfile"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
)

func benchCommand() *cli.Command {
	flags := []cli.Flag{
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
		&cli.BoolFlag{Name: "chat", Usage: "send the rows' prompt as a chat turn rendered by the model's own template (a --prompt-file holding a JSON array of messages gives the conversation), as an app calling /v1/chat/completions does"},
		&cli.IntFlag{Name: "rounds", Usage: "runs per bundle, `N`; several bundles interleave A B A B (default 1, or with several bundles the fewest the judge can decide with: 6 at --alpha 0.05)"},
		&cli.StringSliceFlag{Name: "sweep", Usage: "make variants of one BUNDLE and sweep them: `SETTING=V1,V2,...` with SETTING a llama-server flag (--spec-draft-n-max=3,8,16) or an environment switch (GGML_CUDA_DISABLE_GRAPHS=0,1); repeat for a grid. The variants (files hard-linked) and the defaults are screened (--rounds, default 1); the screen's leader then meets the defaults and the next two in full mode, interleaved, and the judge says whether it is faster"},
		&cli.StringFlag{Name: "control", Usage: "with --gpus: a control `BUNDLE` run on every device in every round, to say how much the devices differ (bundles rotate across devices from round to round)"},
		&cli.StringFlag{Name: "gpus", Usage: "run bundles in parallel, one per device of `LIST` (0,1,2,3): CUDA_VISIBLE_DEVICES or ONEAPI_DEVICE_SELECTOR per run"},
		&cli.StringFlag{Name: "dir", Value: "bench-runs", Usage: "campaign `DIR`: runs/LABEL/{record.json,server.log} and records.json"},
		&cli.DurationFlag{Name: "ready-timeout", Value: 10 * time.Minute, Usage: "how long a llama-server may take to load, `DURATION`"},
		&cli.BoolFlag{Name: "json", Usage: "print the runs and comparisons as JSON instead of the table"},
	}
	flags = append(flags, judgeFlags()...)
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure bundles the way tuning labs do: canaries, fresh row 0, validity, identity, records, A/B",
		ArgsUsage: "BUNDLE [BUNDLE...]",
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
		Flags:       flags,
		Subcommands: []*cli.Command{benchReportCommand()},
		Action: func(c *cli.Context) error {
			r, err := benchRequestOf(c, flags)
			if err != nil {
				return err
			}
			return runBench(c.Context, r, stdoutOf(c))
		},
	}
}

// benchRequest is what `llbuild bench` was asked to measure.
type benchRequest struct {
	// Names are the bundles as given; Control the --control bundle; Sweeps the --sweep settings.
	Names   []string
	Control string
	Sweeps  []string
	JSON    bool
	Opts    bench.Options
	// Full is a sweep's full-mode protocol (the canaries given, if --canaries was).
	Full bench.Protocol
}

// benchRequestOf reads the arguments and flags; usage errors are found here.
func benchRequestOf(c *cli.Context, flags []cli.Flag) (benchRequest, error) {
	r := benchRequest{Names: c.Args().Slice(), Control: c.String("control"), Sweeps: c.StringSlice("sweep"), JSON: c.Bool("json")}
	if len(r.Names) == 0 {
		return r, usagef("bench takes one or more BUNDLE directories or archives")
	}
	if len(r.Sweeps) > 0 && len(r.Names) != 1 {
		return r, usagef("--sweep makes variants of one BUNDLE, got %d", len(r.Names))
	}
	opts, err := benchOptions(c)
	if err != nil {
		return r, err
	}
	if r.Control != "" && len(opts.GPUs) < 2 {
		return r, usagef("--control runs a bundle on every device: give two or more --gpus")
	}
	opts.Invocation = []string{"llbuild", "bench"}
	for _, f := range flags {
		if name := f.Names()[0]; c.IsSet(name) {
			opts.Invocation = append(opts.Invocation, fmt.Sprintf("--%s=%v", name, c.Value(name)))
		}
	}
	opts.Invocation = append(opts.Invocation, r.Names...)
	opts.Log = loggerOf(c)
	opts.Progress = stderrOf(c)
	opts.Status = termOf(c)
	r.Opts = opts
	r.Full = sweepFullProtocol(opts.Protocol, c.IsSet("canaries"))
	return r, nil
}

// runBench opens the bundles (unpacking archives), runs the bench, prints the table (or JSON)
// with the plan diffs beside the A/B, and says which runs do not count.
func runBench(ctx context.Context, r benchRequest, out io.Writer) error {
	opts := r.Opts
	if len(r.Sweeps) > 0 {
		return benchSweep(ctx, r, out)
	}
	var bundles []*bench.Bundle
	var dirs []string
	for _, name := range r.Names {
		dir, cleanup, err := bundleDir(ctx, name)
		if err != nil {
			return err
		}
		defer cleanup()
		dirs = append(dirs, dir)
		b, err := bench.OpenBundle(dir, name)
		if err != nil {
			return err
		}
		bundles = append(bundles, b)
	}
	if r.Control != "" {
		dir, cleanup, err := bundleDir(ctx, r.Control)
		if err != nil {
			return err
		}
		defer cleanup()
		if opts.Control, err = bench.OpenBundle(dir, r.Control); err != nil {
			return err
		}
	}
	res, runErr := bench.Run(ctx, bundles, opts)
	if res == nil {
		return runErr
	}
	diffs := benchPlanDiffs(ctx, r.Names, dirs)
	if r.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			*bench.Result
			PlanDiffs []benchPlanDiff `json:"planDiffs,omitempty"`
		}{res, diffs}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "records: %s\n\n", res.RecordsFile)
		if err := res.WriteTable(out); err != nil {
			return err
		}
		for _, d := range diffs {
			fmt.Fprintf(out, "\nwhat differs between the builds of %s and %s (llbuild plan diff):\n%s", d.A, d.B, d.Text)
		}
	}
	if runErr != nil {
		return runErr
	}
	if res.Interrupted {
		return cli.Exit("bench: interrupted; the runs measured so far are in "+res.RecordsFile, exitInterrupted)
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

// benchPlanDiff is what differs between the plans of the first bundle and another, beside the
// A/B verdict: the build change the ratio measures.
type benchPlanDiff struct {
	A      string           `json:"a"`
	B      string           `json:"b"`
	Groups []pipeline.Group `json:"groups"`
	// Error says why the plans could not be compared.
	Error string `json:"error,omitempty"`
	Text  string `json:"-"`
}

// benchPlanDiffs compares the first bundle's plan with each other's; a bundle whose plan cannot
// be read is said so in the text, and the bench's results stand.
func benchPlanDiffs(ctx context.Context, names, dirs []string) []benchPlanDiff {
	var out []benchPlanDiff
	for i := 1; i < len(dirs); i++ {
		d := benchPlanDiff{A: names[0], B: names[i]}
		var sides [2]*planSide
		var err error
		for j, k := range []int{0, i} {
			if sides[j], err = loadPlanSide(ctx, dirs[k], "server"); err != nil {
				break
			}
			sides[j].arg = names[k]
		}
		if err != nil {
			d.Error = err.Error()
			d.Text = "  cannot compare the plans: " + err.Error() + "\n"
		} else {
			diff := pipeline.DiffPlans(sides[0].plan, sides[1].plan, sides[0].partial || sides[1].partial)
			d.Groups = nonNil(diff.Groups)
			var b strings.Builder
			_ = writePlanDiff(&b, sides, diff, nil)
			d.Text = b.String()
		}
		out = append(out, d)
	}
	return out
}

// benchOptions reads the protocol and scheduling flags, all problems together.
func benchOptions(c *cli.Context) (bench.Options, error) {
	var problems []string
	p, err := bench.DefaultProtocol(c.String("mode"))
	if err != nil {
		return bench.Options{}, usagef("--%v", err)
	}
	if n := c.Int("canaries"); n >= 0 {
		p.Canaries = n
	}
	if n := c.Int("rows"); n >= 0 {
		p.Rows = n
	}
	p.CanaryTokens = c.Int("canary-tokens")
	p.Generate = c.Int("generate")
	p.Prompt = c.String("prompt")
	p.PromptTokens = c.Int("prompt-tokens")
	if f := c.String("prompt-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return bench.Options{}, usagef("--prompt-file: %v", err)
		}
		p.Prompt, p.PromptFile, p.PromptText = bench.PromptFile, f, string(b)
	}
	if p.Prompt != bench.PromptFilledLong {
		p.PromptTokens = 0
	}
	p.Chat = c.Bool("chat")
	rounds := c.Int("rounds")
	if rounds < 0 {
		problems = append(problems, fmt.Sprintf("--rounds %d: must be 1 or more", rounds))
	}
	var gpus []string
	if g := strings.TrimSpace(c.String("gpus")); g != "" {
		seen := map[string]bool{}
		for _, d := range strings.Split(g, ",") {
			d = strings.TrimSpace(d)
			if d == "" || strings.ContainsAny(d, " =:") || seen[d] {
				problems = append(problems, fmt.Sprintf("--gpus %q: give distinct device numbers separated by commas (0,1,2,3)", g))
				break
			}
			seen[d] = true
			gpus = append(gpus, d)
		}
	}
	if err := p.Validate(); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	if len(problems) > 0 {
		return bench.Options{}, usagef("bench: %s", strings.Join(problems, "; "))
	}
	name := c.String("label")
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '=') {
			return bench.Options{}, usagef("--label %q: use letters, digits, '.', '_' and '=' (it names the runs' directories)", name)
		}
	}
	j, err := judgeOf(c)
	if err != nil {
		return bench.Options{}, err
	}
	return bench.Options{Protocol: p, Dir: c.String("dir"), Rounds: rounds, GPUs: gpus, ReadyTimeout: c.Duration("ready-timeout"),
		Name: name, Note: c.String("note"), Judge: j}, nil
}

// benchSweep makes the variants of one bundle that --sweep names and lets bench.Sweep screen
// them with the defaults, then judge the leader against the defaults and the next ones in full
// mode; the tables and the verdicts go to stdout (or one JSON object).
func benchSweep(ctx context.Context, r benchRequest, out io.Writer) error {
	opts, name, asJSON := r.Opts, r.Names[0], r.JSON
	grid, err := manifest.Grid(r.Sweeps)
	if err != nil {
		return usageOf(err)
	}
	dir, cleanup, err := bundleDir(ctx, name)
	if err != nil {
		return err
	}
	defer cleanup()
	base, err := bench.OpenBundle(dir, "defaults")
	if err != nil {
		return err
	}
	stem := filepath.Base(strings.TrimSuffix(strings.TrimSuffix(filepath.Clean(name), ".tar.zst"), ".tar.gz"))
	var variants []*bench.Bundle
	for _, g := range grid {
		var parts []string
		for _, s := range g {
			parts = append(parts, strings.TrimLeft(s.Name, "-")+"="+s.Value)
		}
		vname := stem + "-" + strings.Join(parts, "-")
		vdir := filepath.Join(opts.Dir, "sweep", vname)
		if _, err := manifest.Variant(ctx, dir, vdir, g); err != nil {
			return usageOf(fmt.Errorf("variant %s: %w", vname, err))
		}
		b, err := bench.OpenBundle(vdir, vname)
		if err != nil {
			return err
		}
		variants = append(variants, b)
	}
	res, err := bench.Sweep(ctx, base, variants, bench.SweepOptions{Options: opts, Full: r.Full})
	if res != nil && asJSON {
		if werr := writeJSON(out, res); werr != nil {
			return werr
		}
	} else if res != nil {
		fmt.Fprintf(out, "records: %s\n\nsweep of %s, %d variants and the defaults, screened:\n", res.Screen.RecordsFile, name, len(variants))
		if werr := res.Screen.WriteTable(out); werr != nil {
			return werr
		}
		if res.Full != nil {
			fmt.Fprintf(out, "\nfull mode: the screen's leader %s against the defaults and the next ones:\n", res.Leader)
			if werr := res.Full.WriteTable(out); werr != nil {
				return werr
			}
		}
		if werr := res.WriteText(out); werr != nil {
			return werr
		}
	}
	if res == nil {
		return err
	}
	for _, r := range []*bench.Result{res.Screen, res.Full} {
		if r != nil && r.Interrupted {
			return errors.Join(err, interruptedErr(r))
		}
	}
	if err != nil {
		return err
	}
	if res.Leader == "" {
		return errors.New(res.Conclusion)
	}
	return nil
}

// sweepFullProtocol is the full run's protocol for a sweep's screen winner: full mode's, with the
// prompt, generation, canary tokens and chat of the sweep's own (and its canaries when given).
func sweepFullProtocol(p bench.Protocol, canariesSet bool) bench.Protocol {
	fp, _ := bench.DefaultProtocol(bench.ModeFull)
	fp.Prompt, fp.PromptTokens, fp.PromptFile, fp.PromptText = p.Prompt, p.PromptTokens, p.PromptFile, p.PromptText
	fp.Generate, fp.CanaryTokens, fp.Chat = p.Generate, p.CanaryTokens, p.Chat
	if canariesSet {
		fp.Canaries = p.Canaries
	}
	return fp
}

func interruptedErr(res *bench.Result) error {
	if res.Interrupted {
		return cli.Exit("bench: interrupted; the runs measured so far are in "+res.RecordsFile, exitInterrupted)
	}
	return nil
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
			&cli.StringFlag{Name: "out", Usage: "`DIR` to write report.md and report.html into (default: the campaign's)"},
			&cli.StringFlag{Name: "leaderboard", Usage: "print the promoted run `LABEL` as a leaderboard's JSON entry (identity, plan hash, manifest sha256, row 0, validity) instead"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("bench report takes one campaign DIR")
			}
			rep, err := bench.ReadReport(c.Args().First())
			if err != nil {
				return usageError{err}
			}
			if label := c.String("leaderboard"); label != "" {
				e, err := rep.Leaderboard(label)
				if err != nil {
					return usageError{err}
				}
				return writeJSON(stdoutOf(c), e)
			}
			out := c.String("out")
			if out == "" {
				out = c.Args().First()
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			for _, f := range []struct {
				name  string
				write func(io.Writer) error
			}{{"report.md", rep.WriteMarkdown}, {"report.html", rep.WriteHTML}} {
				var b bytes.Buffer
				if err := f.write(&b); err != nil {
					return err
				}
				path := filepath.Join(out, f.name)
				if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
					return err
				}
				fmt.Fprintln(stdoutOf(c), path)
			}
			return nil
		},
	}
}
