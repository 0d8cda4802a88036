package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/llbuild/llbuild/internal/digest"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/imagebundle"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
)

// intKnobs maps bundle flags to llama-server knobs that are left out unless given.
var intKnobs = []struct {
	flag  string
	usage string
	field func(*manifest.ServerKnobs) **int
}{
	{"ctx-size", "llama-server --ctx-size `N`", func(k *manifest.ServerKnobs) **int { return &k.CtxSize }},
	{"batch-size", "llama-server --batch-size `N`", func(k *manifest.ServerKnobs) **int { return &k.BatchSize }},
	{"ubatch-size", "llama-server --ubatch-size `N`", func(k *manifest.ServerKnobs) **int { return &k.UBatchSize }},
	{"threads", "llama-server --threads `N`", func(k *manifest.ServerKnobs) **int { return &k.Threads }},
	{"poll", "llama-server --poll `N` (0-100)", func(k *manifest.ServerKnobs) **int { return &k.Poll }},
	{"n-gpu-layers", "llama-server --n-gpu-layers `N`", func(k *manifest.ServerKnobs) **int { return &k.GPULayers }},
	{"parallel", "llama-server --parallel `N` (slots)", func(k *manifest.ServerKnobs) **int { return &k.Parallel }},
	{"spec-draft-n-max", "most tokens to draft, --spec-draft-n-max `N` (needs --draft)", func(k *manifest.ServerKnobs) **int { return &k.DraftNMax }},
	{"spec-draft-n-min", "fewest tokens to draft, --spec-draft-n-min `N` (needs --draft)", func(k *manifest.ServerKnobs) **int { return &k.DraftNMin }},
	{"spec-draft-threads", "draft threads, --spec-draft-threads `N` (needs --draft)", func(k *manifest.ServerKnobs) **int { return &k.ThreadsDraft }},
	{"n-gpu-layers-draft", "llama-server --n-gpu-layers-draft `N` (needs --draft)", func(k *manifest.ServerKnobs) **int { return &k.GPULayersDraft }},
}

func bundleCommand() *cli.Command {
	flags := []cli.Flag{
		targetFlag, targetFileFlag, jsonFlag,
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the model `FILE.gguf`"},
		&cli.StringFlag{Name: "draft", Usage: "a draft model `FILE.gguf` with the model's vocabulary: an MTP draft (<arch>-assistant) runs as --spec-type draft-mtp, any other as draft-simple"},
		&cli.StringFlag{Name: "mmproj", Usage: "a multimodal projector `FILE.gguf` made for the model (vision or audio; llama-server --mmproj): the bundle serves image requests"},
		&cli.StringFlag{Name: "artifacts", Usage: "server artifact `DIR` (llbuild build's output) built for the target"},
		&cli.StringFlag{Name: "image", Usage: "take llama-server, its loader and its libraries out of a runtime `IMAGE` instead of --artifacts: " + image.SpecForms + "; an llbuild image brings its plan, anyone else's is marked foreign"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "bundle `DIR` to create"},
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
	for _, k := range intKnobs {
		flags = append(flags, &cli.IntFlag{Name: k.flag, Usage: k.usage, DefaultText: "left out: llama-server's own"})
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
			return runBundle(c.Context, o, loggerOf(c), stdoutOf(c))
		},
	}
}

// bundleOptions is everything `llbuild bundle` was asked to do.
type bundleOptions struct {
	// TargetName and TargetFile name the target (--target, --target-file).
	TargetName, TargetFile string
	// In is the bundle's input, its Target loaded; Image, when set, is where the server comes
	// from instead of In.Artifacts.
	In    manifest.BundleInput
	Image string
	Out   manifest.BundleOutput
	JSON  bool
}

// bundleOptionsOf reads the flags; usage errors are found here, before anything is read.
func bundleOptionsOf(c *cli.Context) (bundleOptions, error) {
	if c.NArg() > 0 {
		return bundleOptions{}, usagef("bundle takes no arguments, got %q", c.Args().Slice())
	}
	o := bundleOptions{TargetName: c.String("target"), TargetFile: c.String("target-file"), Image: c.String("image"), JSON: c.Bool("json")}
	t, err := loadTarget(o.TargetName, o.TargetFile)
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
		return o, usagef("no model given: use --model FILE.gguf")
	}
	switch {
	case in.Artifacts != "" && o.Image != "":
		return o, usagef("give --artifacts or --image, not both")
	case in.Artifacts == "" && o.Image == "":
		return o, usagef("no server given: use --artifacts DIR (the output of llbuild build for this target) or --image IMAGE (a llama.cpp server image)")
	}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, usagef("--env %q: want KEY=VALUE", kv)
		}
		in.Env[k] = v
	}
	for _, k := range intKnobs {
		if c.IsSet(k.flag) {
			v := c.Int(k.flag)
			*k.field(&in.Knobs) = &v
		}
	}
	in.Knobs.DraftPMin = c.String("spec-draft-p-min")
	in.Knobs.CacheRAM = c.Int("cache-ram")
	in.Knobs.CtxCheckpoints = c.Int("ctx-checkpoints")
	in.Knobs.ScoresAlone = c.Bool("scores-traffic-independent")
	if in.Draft == "" {
		for _, f := range []string{"spec-draft-n-max", "spec-draft-n-min", "spec-draft-p-min", "spec-draft-threads", "n-gpu-layers-draft"} {
			if c.IsSet(f) {
				return o, usagef("--%s needs --draft", f)
			}
		}
	}
	o.In = in
	o.Out = manifest.BundleOutput{
		Dir:     c.String("output"),
		Archive: c.String("archive"),
		Force:   c.Bool("force"),
		Link:    c.Bool("link"),
		Log:     loggerOf(c),
	}
	if o.Out.Dir == "" && o.Out.Archive == "" {
		return o, usagef("no output: give -o DIR, --archive FILE or both")
	}
	if o.Out.Archive != "" {
		if _, err := manifest.ArchiveCompression(o.Out.Archive); err != nil {
			return o, usageError{err}
		}
	}
	if o.Out.Epoch, err = sourceDateEpoch(os.Getenv); err != nil {
		return o, usageError{err}
	}
	if !c.Bool("quiet") {
		o.Out.Progress = &progress.Reporter{Term: termOf(c), Log: o.Out.Log, Every: plainProgressEvery}
	}
	return o, nil
}

// runBundle checks the inputs, writes the bundle (and archive) and prints the manifest's
// sha256 beside each path written, or one JSON object.
func runBundle(ctx context.Context, o bundleOptions, log *slog.Logger, stdout io.Writer) error {
	in, out := o.In, o.Out
	if o.Image != "" {
		server, cleanup, err := imagebundle.Server(ctx, log, o.Image, imagebundle.OutputDir(out), in.Target)
		if err != nil {
			return usageOf(err)
		}
		defer cleanup()
		in.Server = server
	}
	plan, err := manifest.PlanBundle(in)
	if err != nil {
		return usageOf(err)
	}
	warnStalePlan(log, o.TargetName, o.TargetFile, plan.Manifest.Build)
	warnUnpatchedDraft(log, plan.Manifest)
	if ct := plan.Manifest.Contract; in.Knobs.ScoresAlone && ct.PromptLogprobs == manifest.PromptLogprobsNative && !ct.ScoresTrafficIndependent {
		log.Warn("native prompt-token logprobs will depend on concurrent traffic: the server was built without patch " +
			patches.PromptLogprobsAlone + "; rebuild with the patch series for bit-identical scores")
	}
	m, err := manifest.WriteBundle(ctx, plan, out)
	if err != nil {
		return usageOf(err)
	}
	b, err := m.Encode()
	if err != nil {
		return err
	}
	// One line per thing written, directory first: the manifest's sha256 and the path.
	for _, where := range []string{out.Dir, out.Archive} {
		if where == "" {
			continue
		}
		log.Info("bundle written", "path", where, "files", len(m.Files), "target", m.Target.Name)
		if o.JSON {
			continue
		}
		if _, err := fmt.Fprintf(stdout, "%s  %s\n", digest.SHA256Hex(b), where); err != nil {
			return err
		}
	}
	if o.JSON {
		return writeJSON(stdout, struct {
			ManifestSHA256 string `json:"manifestSha256"`
			Dir            string `json:"dir"`
			Archive        string `json:"archive,omitempty"`
			Target         string `json:"target"`
			Files          int    `json:"files"`
		}{digest.SHA256Hex(b), out.Dir, out.Archive, m.Target.Name, len(m.Files)})
	}
	return nil
}

// noDraftWithProbs is the patch that makes llama-server generate without drafting for a
// request that asks for token probabilities.
const noDraftWithProbs = "0004-server-no-draft-with-probs.patch"

// warnUnpatchedDraft warns when a draft is packed with a llama-server built without the
// patch that keeps drafted tokens out of logprob answers: serve then refuses requests for
// the logprobs of generated tokens rather than answer logprob 0 for drafted ones.
func warnUnpatchedDraft(log *slog.Logger, m *manifest.Manifest) {
	if m.Models.Draft == nil {
		return
	}
	for _, p := range m.Build.Patches {
		if p.Name == noDraftWithProbs {
			return
		}
	}
	log.Warn("the draft is packed with a llama-server built without patch "+noDraftWithProbs+": it would answer logprob 0 for every drafted token, so serve refuses requests for the logprobs of generated tokens; build with the patch series, or bundle without --draft",
		"draft", m.Models.Draft.Path)
}

// warnStalePlan warns when the artifacts were built from another plan than the one the
// target and the server recipe resolve to now (the recipe, the patches or the target
// changed since the build). The artifacts are still the target's, so it is not an error.
func warnStalePlan(log *slog.Logger, target, targetFile string, b manifest.Build) {
	built := b.PlanHash
	if built == "" {
		return // a foreign image's server: no plan to compare
	}
	// a plain directory's build: the current plan of that tree
	var src struct {
		Source struct{ Tree string }
	}
	_ = json.Unmarshal(b.Plan, &src)
	t, err := loadTarget(target, targetFile)
	if err != nil {
		log.Debug("cannot resolve the current plan to compare", "err", err)
		return
	}
	series, err := patches.Series()
	if err != nil {
		return
	}
	p, err := pipeline.ResolveRecipe(t, "server", series, pipeline.Options{AllowFloating: true, SourceTree: src.Source.Tree})
	if err != nil {
		log.Debug("cannot resolve the current plan to compare", "err", err)
		return
	}
	if p.Hash != built {
		log.Warn("the artifacts were built from another plan than the current one for this target (recipe, patches or target changed since)",
			"built", shortHash(built), "current", p.ShortHash())
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// sourceDateEpoch reads SOURCE_DATE_EPOCH: the time stamp of everything a reproducible
// output records. Unset means the Unix epoch; a malformed value is an error.
func sourceDateEpoch(getenv func(string) string) (time.Time, error) {
	s := getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	return pipeline.ParseSourceDateEpoch(s)
}
