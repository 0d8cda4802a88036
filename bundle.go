package main

import (
	"context"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bundler"
	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/jsonout"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline/image"
)

func bundleCommand() *cli.Command {
	flags := []cli.Flag{
		cmdutil.TargetFlag, cmdutil.TargetFileFlag, cmdutil.JSONFlag,
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the model `FILE.gguf`"},
		&cli.StringFlag{Name: "draft", Usage: "a draft model `FILE.gguf` with the model's vocabulary: an MTP draft (<arch>-assistant) runs as --spec-type draft-mtp, any other as draft-simple"},
		&cli.StringFlag{Name: "mmproj", Usage: "a multimodal projector `FILE.gguf` made for the model (vision or audio; llama-server --mmproj): the bundle serves image requests"},
		&cli.StringFlag{Name: "artifacts", Usage: "server artifact `DIR` (llbuild build's output) built for the target"},
		&cli.StringFlag{Name: "image", Usage: "take llama-server, its loader and its libraries out of a runtime `IMAGE` instead of --artifacts: " + image.SpecForms + "; an llbuild image brings its plan, anyone else's is marked foreign"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o", "out"}, Usage: "bundle `DIR` to create"},
		&cli.StringFlag{Name: "archive", Usage: "also pack the bundle into `FILE`.tar.zst or .tar.gz (deterministic; entry times from SOURCE_DATE_EPOCH, default 0)"},
		&cli.StringSliceFlag{Name: "server-arg", Usage: "extra llama-server `ARG`, appended as given (repeat)"},
		&cli.StringSliceFlag{Name: "env", Usage: "`KEY=VALUE` added to llama-server's environment, after the target's (repeat)"},
		&cli.StringFlag{Name: "spec-draft-p-min", Usage: "least draft probability, --spec-draft-p-min `P` (needs --draft)"},
		&cli.IntFlag{Name: "cache-ram", Value: 0, Usage: "llama-server --cache-ram `MiB` (0: no prompt cache reuse across requests)"},
		&cli.IntFlag{Name: "ctx-checkpoints", Value: 0, Usage: "llama-server --ctx-checkpoints `N`"},
		&cli.BoolFlag{Name: "scores-traffic-independent", Value: true, Usage: "prompt-token logprobs bit-identical whatever else the server runs (--prompt-logprobs-alone --no-kv-unified, a server with patch 0007); =false lets scoring share batches, a little faster under concurrent load"},
		&cli.BoolFlag{Name: "link", Usage: "hard-link or reflink files instead of copying them where the filesystem allows (the inputs must then stay unchanged)"},
		&cli.BoolFlag{Name: "force", Usage: "replace an existing output directory or archive"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress: neither the bar on a terminal nor the lines every 30 s otherwise"},
	}
	for _, k := range manifest.IntKnobs {
		flags = append(flags, &cli.IntFlag{Name: k.Flag, Usage: k.Usage, DefaultText: "left out: llama-server's own"})
	}
	return &cli.Command{
		Name:  "bundle",
		Usage: "assemble a submission bundle: server, libraries, models and a manifest, served by llbuild serve",
		Description: "Lays out bin/ (llama-server), lib/ (its libraries), models/ (model, draft, projector) and manifest.json,\n" +
			"which records the target, the build's provenance, every file's size and sha256, the models'\n" +
			"GGUF facts, llama-server's exact arguments and environment, and the API the entrypoint\n" +
			"(llbuild serve .) serves. Inputs are checked before anything is written; the bundle is\n" +
			"assembled beside -o and renamed into place. The same inputs give the same manifest bytes.\n" +
			"stdout: the manifest's sha256 and the bundle's path (two columns, as sha256sum prints them),\n" +
			"and a second line for the archive with --archive; --json prints one object instead.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			o, err := bundleOptionsOf(c)
			if err != nil {
				return err
			}
			return runBundle(c.Context, o, cmdutil.StreamsOf(c))
		},
	}
}

// bundleOptions is everything `llbuild bundle` was asked to do: the bundle (its target
// loaded) and whether to print JSON.
type bundleOptions struct {
	bundler.Options
	JSON bool
}

// bundleOptionsOf reads the flags; usage errors are found here, before anything is read.
func bundleOptionsOf(c *cli.Context) (bundleOptions, error) {
	if c.NArg() > 0 {
		return bundleOptions{}, cmdutil.Usagef("bundle takes no arguments, got %q", c.Args().Slice())
	}
	o := bundleOptions{Options: bundler.Options{Image: c.String("image")}, JSON: c.Bool("json")}
	t, err := cmdutil.LoadTarget(c.String("target"), c.String("target-file"))
	if err != nil {
		return o, err
	}
	in := manifest.BundleInput{
		Target:    t,
		Artifacts: c.String("artifacts"),
		Model:     c.String("model"),
		Draft:     c.String("draft"),
		MMProj:    c.String("mmproj"),
		ExtraArgs: c.StringSlice("server-arg"),
		Env:       map[string]string{},
	}
	if in.Model == "" {
		return o, cmdutil.Usagef("no model given: use --model FILE.gguf")
	}
	switch {
	case in.Artifacts != "" && o.Image != "":
		return o, cmdutil.Usagef("give --artifacts or --image, not both")
	case in.Artifacts == "" && o.Image == "":
		return o, cmdutil.Usagef("no server given: use --artifacts DIR (the output of llbuild build for this target) or --image IMAGE (a llama.cpp server image)")
	}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, cmdutil.Usagef("--env %q: want KEY=VALUE", kv)
		}
		in.Env[k] = v
	}
	for _, k := range manifest.IntKnobs {
		if c.IsSet(k.Flag) {
			v := c.Int(k.Flag)
			if msg := k.Check(v); msg != "" {
				return o, cmdutil.Usagef("%s", msg)
			}
			*k.Field(&in.Knobs) = &v
		}
	}
	in.Knobs.DraftPMin = c.String("spec-draft-p-min")
	for _, k := range manifest.RecordedKnobs {
		if msg := k.Check(c.Int(k.Flag)); msg != "" {
			return o, cmdutil.Usagef("%s", msg)
		}
	}
	in.Knobs.CacheRAM = c.Int("cache-ram")
	in.Knobs.CtxCheckpoints = c.Int("ctx-checkpoints")
	in.Knobs.ScoresAlone = c.Bool("scores-traffic-independent")
	if in.Draft == "" {
		for _, f := range manifest.DraftKnobs {
			if c.IsSet(f) {
				return o, cmdutil.Usagef("--%s needs --draft", f)
			}
		}
	}
	o.In = in
	o.Out = manifest.BundleOutput{
		Dir:     c.String("output"),
		Archive: c.String("archive"),
		Force:   c.Bool("force"),
		Link:    c.Bool("link"),
		Log:     cmdutil.Logger(c),
	}
	if o.Out.Dir == "" && o.Out.Archive == "" {
		return o, cmdutil.Usagef("no output: give -o DIR, --archive FILE or both")
	}
	if o.Out.Archive != "" {
		if _, err := manifest.ArchiveCompression(o.Out.Archive); err != nil {
			return o, cmdutil.Usage(err)
		}
	}
	if o.Out.Epoch, err = bundler.EpochFromEnv(os.Getenv); err != nil {
		return o, cmdutil.Usage(err)
	}
	if !c.Bool("quiet") {
		s := cmdutil.StreamsOf(c)
		o.Out.Progress = &progress.Reporter{Term: s.Term, Log: o.Out.Log, Every: s.Every}
	}
	return o, nil
}

// runBundle makes the bundle and prints the manifest's sha256 beside each path written, or one
// JSON object.
func runBundle(ctx context.Context, o bundleOptions, s cmdutil.Streams) error {
	log, stdout := s.Log, s.Stdout
	res, err := bundler.Make(ctx, log, o.Options)
	if err != nil {
		return cmdutil.UsageOf(err)
	}
	if o.JSON {
		return jsonout.Write(stdout, res)
	}
	return res.WriteText(stdout)
}
