package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/imagebundle"
	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/executor"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish"
	"github.com/llbuild/llbuild/targets"
)

func publishCommand() *cli.Command {
	return &cli.Command{
		Name:  "publish",
		Usage: "build each target's server image (or reuse it) and push it with tags that say what is inside",
		Description: `For each target: if the registry already holds the plan-hash tag (the first --tag-template's)
with this plan's image, nothing is built or pushed, its digest is reported and the other tags are
pointed at it where they point elsewhere. Otherwise the artifacts in OUT/<target>/<plan hash>/ are
reused if present and verified, or built with the executor, and the runtime image is pushed under
every tag, the plan-hash tag last.

Default tags (Go text/template over publish.TagData; --tag-template replaces the list):
  {{.Target}}-{{.ShortCommit}}-{{.ShortHash}}   olares-one-1425386fd-<plan hash 12>
  {{.Target}}-{{.Flavor}}                       olares-one-cuda13.1-sm120, b70-sycl-bmg-g31, cpu-v3-cpu
  {{.Target}}                                   olares-one (moves to each new publish)
Fields: Target Recipe Backend Commit ShortCommit PlanHash ShortHash CUDA CUDAToolkit SM SYCLDevice
Flavor Version. Every tag is checked against the OCI grammar before anything is built.

Credentials: the Docker config ($DOCKER_CONFIG/config.json and its credential helpers), or
LLBUILD_REGISTRY_USER and LLBUILD_REGISTRY_PASSWORD, used for the --registry host only. They never
appear in output or errors.

Speed gate (--not-slower-than REF, one target): REF is a bundle (directory or archive) or the
image you run (bundled as bundle --image does, with --gate-model, --gate-ctx-size and
--gate-parallel). Before an image is pushed, or a tag moved to an image the registry already holds
for the plan (made again from its artifacts, so that its digest is the one judged), its artifacts
are bundled as the reference is and benched against it on this machine, interleaved
(--gate-rounds, default the fewest the judge can decide with; --gate-mode, --gate-chat), and the
bench's judge decides (--alpha, --min-step). A slower verdict, too few rounds to decide, an invalid
run, or servers with different per-slot contexts refuse: exit 1, nothing pushed, no tag moved. The
verdict (the judge's test, p, ratios, both sides' per-slot context, the reference, the digest) is
kept in --gate-dir/verdicts/DIGEST-REFERENCE.json and gate-TARGET.json and appears in --json; a
later publish of the same digest against the same reference and settings reads it instead of
benching again.

stdout: one image digest per published target, in input order (--target names first, then
--target-file files); --json prints an array instead (target, tags, digest, ref, existing, moved
tags, error). --digest-file gets "target<TAB>repo@digest" lines, written atomically.
Exit status: 0 all published, 1 a build or push failed, 2 usage (including a bad tag template).`,
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "target", Aliases: []string{"t"}, Usage: "built-in target `NAME`s, comma-separated or repeated"},
			&cli.StringSliceFlag{Name: "target-file", Usage: "target `FILE` (repeatable), published after the --target names"},
			cmdutil.JSONFlag,
			&cli.StringFlag{Name: "registry", Usage: "repository `HOST[:PORT]/REPO` that receives the images, e.g. ghcr.io/OWNER/llama-server"},
			&cli.StringSliceFlag{Name: "tag-template", Usage: "tag `TEMPLATE` (repeatable, replaces the defaults; the first must use the plan hash)"},
			&cli.StringFlag{Name: "digest-file", Usage: "write target<TAB>repo@digest lines to `FILE`; an existing one is replaced only with --force"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing --digest-file"},
			cmdutil.FloatingFlag,
			&cli.StringFlag{Name: "recipe", Value: "server", Usage: "a server recipe `FILE.yaml` instead of the built-in one"},
			cmdutil.SeriesFlag,
			cmdutil.RefFlag,
			// the speed gate
			&cli.StringFlag{Name: "not-slower-than", Usage: "push a new image, or move a tag to one the registry holds, only when the judge says its server is not slower than `REF`'s: a bundle directory or archive, or an image (" + image.SpecForms + ") bundled as bundle --image does with --gate-model. The image's artifacts are bundled as the reference is and benched against it, interleaved, on this machine"},
			&cli.StringFlag{Name: "gate-model", Usage: "with an image as --not-slower-than: the model `FILE.gguf` both sides serve"},
			&cli.StringFlag{Name: "gate-draft", Usage: "with an image as --not-slower-than: a draft model `FILE.gguf`"},
			&cli.IntFlag{Name: "gate-ctx-size", Value: 4096, Usage: "with an image as --not-slower-than: llama-server --ctx-size `N` of both sides"},
			&cli.IntFlag{Name: "gate-parallel", Value: 1, Usage: "with an image as --not-slower-than: llama-server --parallel `N` of both sides (so both have the same per-slot context)"},
			&cli.IntFlag{Name: "gate-rounds", Usage: "interleaved A/B `ROUNDS` of the gate (default: the fewest the judge can decide with, 6 at --alpha 0.05)"},
			&cli.StringFlag{Name: "gate-mode", Value: bench.ModeScreen, Usage: "the gate's bench `MODE`: screen or full"},
			&cli.IntFlag{Name: "gate-canaries", Usage: "canary checks per run (`N`; default: the mode's)"},
			&cli.IntFlag{Name: "gate-generate", Usage: "tokens each measured row generates (`N`; default: the mode's)"},
			&cli.BoolFlag{Name: "gate-chat", Usage: "send the rows' prompt as a chat turn (bench --chat)"},
			&cli.StringFlag{Name: "gate-dir", Value: "gate", Usage: "`DIR` for the gate's bundles, bench records and verdicts (verdicts/DIGEST-REFERENCE.json, gate-TARGET.json)"},
			&cli.Float64Flag{Name: "gate-ratio", Hidden: true},
		}, append(cmdutil.JudgeFlags(), cmdutil.ExecutorFlags("llama.cpp source `DIR`: a plain directory or a git repository/mirror holding the plan's commit (required for host)", "targets built and pushed at once")...)...),
		Action: func(c *cli.Context) error {
			o, err := publishOptionsOf(c)
			if err == nil {
				err = runPublish(c.Context, o, cmdutil.StreamsOf(c))
			}
			red := publish.NewRedactor(o.Creds)
			// The redacted error keeps no chain: say here what run would have read from it.
			if cmdutil.IsUsage(err) || errors.Is(err, pipeline.ErrFloating) {
				return cmdutil.Usage(red.Error(err))
			}
			return red.Error(err)
		},
	}
}

// publishOptions is everything `llbuild publish` was asked to do, its plans resolved.
type publishOptions struct {
	Repo  name.Repository
	Creds *publish.Credentials
	Tmpl  *publish.Templates
	Plans []*pipeline.Plan
	Exec  executor.Options
	In    *pipeline.Inputs
	// Gate, when set, judges each image's server, bundled for Target, before it is pushed.
	Gate       *publish.GateOptions
	Target     *targets.Target
	JSON       bool
	DigestFile string
}

// publishOptionsOf reads the flags and resolves the plans and the tags' templates; usage errors
// are found here, before anything is built or contacted.
func publishOptionsOf(c *cli.Context) (publishOptions, error) {
	o := publishOptions{JSON: c.Bool("json"), DigestFile: c.String("digest-file")}
	var err error
	if o.Creds, err = publish.CredentialsFromEnv(os.Getenv, ""); err != nil {
		return o, cmdutil.Usage(err)
	}
	if c.NArg() > 0 {
		return o, cmdutil.Usagef("publish takes no arguments, got %q", c.Args().Slice())
	}
	if o.Repo, err = publish.ParseRegistry(c.String("registry")); err != nil {
		return o, cmdutil.Usage(err)
	}
	if o.Creds != nil {
		o.Creds.Host = o.Repo.RegistryStr()
	}
	if o.Tmpl, err = publish.ParseTemplates(c.StringSlice("tag-template")); err != nil {
		return o, cmdutil.Usage(err)
	}
	specs := targets.Specs(c.StringSlice("target"), c.StringSlice("target-file"))
	if len(specs) == 0 {
		return o, cmdutil.Usagef("no target given: use --target NAME[,NAME...] or --target-file FILE")
	}
	if o.Exec, err = cmdutil.ExecutorOptionsOf(c); err != nil {
		return o, err
	}
	if o.Exec.Jobs < 1 {
		return o, cmdutil.Usagef("--jobs must be at least 1")
	}
	if err := checkDigestFile(o.DigestFile, o.Exec.Out, c.Bool("force")); err != nil {
		return o, err
	}
	if err := cmdutil.UsageOf(o.Exec.Check()); err != nil {
		return o, err
	}
	if o.In, err = cmdutil.ServerInputsOf(c, o.Exec.Source, false); err != nil {
		return o, err
	}
	if o.Plans, err = o.In.Resolve(specs, pipeline.Options{AllowFloating: c.Bool("allow-floating")}); err != nil {
		return o, err
	}
	if c.IsSet("gate-ratio") {
		return o, cmdutil.Usagef("--gate-ratio is gone: the gate asks the bench's judge (Wilcoxon's signed-rank test at --alpha, differences under --min-step ignored) whether the new server is slower")
	}
	imageOnly := []string{"gate-model", "gate-draft", "gate-ctx-size", "gate-parallel"}
	if ref := c.String("not-slower-than"); ref == "" {
		for _, f := range append(imageOnly, "gate-rounds", "gate-mode", "gate-canaries", "gate-generate", "gate-chat", "gate-dir", "alpha", "min-step") {
			if c.IsSet(f) {
				return o, cmdutil.Usagef("--%s needs --not-slower-than REF", f)
			}
		}
	} else {
		o.Gate = &publish.GateOptions{Reference: ref, Model: c.String("gate-model"), Draft: c.String("gate-draft"), CtxSize: c.Int("gate-ctx-size"),
			Parallel: c.Int("gate-parallel"), Rounds: c.Int("gate-rounds"), Log: cmdutil.Logger(c), Progress: cmdutil.Stderr(c), Invocation: os.Args}
		g := o.Gate
		if g.Judge, err = cmdutil.JudgeOf(c); err != nil {
			return o, err
		}
		if g.Protocol, err = bench.DefaultProtocol(c.String("gate-mode")); err != nil {
			return o, cmdutil.Usagef("--gate-mode: %v", err)
		}
		if c.IsSet("gate-canaries") {
			g.Protocol.Canaries = c.Int("gate-canaries")
		}
		if c.IsSet("gate-generate") {
			g.Protocol.Generate = c.Int("gate-generate")
		}
		g.Protocol.Chat = c.Bool("gate-chat")
		if g.Dir, err = filepath.Abs(c.String("gate-dir")); err != nil {
			return o, err
		}
		if fi, err := os.Stat(g.Dir); err == nil && !fi.IsDir() {
			return o, cmdutil.Usagef("--gate-dir %s is a file; give a directory for the gate's bundles and records", c.String("gate-dir"))
		}
		if err := g.Validate(); err != nil {
			return o, cmdutil.UsageOf(err)
		}
		for _, f := range imageOnly {
			if c.IsSet(f) && !imagebundle.IsImageRef(ref) {
				return o, cmdutil.Usagef("--%s is for an image as --not-slower-than; bundle %s brings its own", f, ref)
			}
		}
		// The gate judges one target's plans (OpenGate refuses others): the first's.
		if o.Target, err = specs[0].Load(); err != nil {
			return o, err
		}
	}
	// Every tag is checked before anything is built or contacted.
	if _, err := o.Tmpl.RenderAll(o.Plans, cmdutil.StreamsOf(c).Version); err != nil {
		return o, cmdutil.Usage(err)
	}
	return o, nil
}

// runPublish opens the gate, when set, makes or reuses each plan's image, pushes it through the
// gate and reports the digests.
func runPublish(ctx context.Context, o publishOptions, s cmdutil.Streams) error {
	g, cleanup, err := publish.OpenGate(ctx, o.Gate, o.Exec.Out, o.Plans, o.Target)
	if err != nil {
		return cmdutil.UsageOf(err)
	}
	defer cleanup()
	opts := publish.Options{Repository: o.Repo, Templates: o.Tmpl, Version: s.Version, Jobs: o.Exec.Jobs, Logger: s.Log, Progress: s.Term, Gate: g.Admitter(),
		Remote: []remote.Option{remote.WithAuthFromKeychain(publish.Keychain(o.Creds)), remote.WithPlatform(image.Platform)}}
	results, err := publish.PublishArtifacts(ctx, o.Plans, opts, publish.FromArtifacts{Out: o.Exec.Out, RuntimeBase: o.Exec.Bases["runtime"],
		Executor: func() (pipeline.Executor, error) {
			return executor.New(o.Exec, cmdutil.ExecutorEnv(s, s.Term), o.In.Series)
		}})
	if err != nil {
		return err
	}
	return publish.WriteReport(s.Stdout, results, g, o.JSON, o.DigestFile)
}

// checkDigestFile checks --digest-file before anything is built or pushed (CheckOutputFile), so
// that a push does not end in a file it cannot write. A directory under --out, which publish
// makes anyway, is made now (the workflow writes out/digests-TARGET.tsv on a fresh runner).
func checkDigestFile(file, out string, force bool) error {
	if file == "" {
		return nil
	}
	if dir := filepath.Dir(file); out != "" {
		if _, err := os.Stat(dir); err != nil {
			if manifest.Within(dir, out) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
		}
	}
	return cmdutil.CheckOutputFile("--digest-file", file, force, nil)
}
