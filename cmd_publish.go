package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish"
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
			jsonFlag,
			&cli.StringFlag{Name: "registry", Usage: "repository `HOST[:PORT]/REPO` that receives the images, e.g. ghcr.io/OWNER/llama-server"},
			&cli.StringSliceFlag{Name: "tag-template", Usage: "tag `TEMPLATE` (repeatable, replaces the defaults; the first must use the plan hash)"},
			&cli.StringFlag{Name: "digest-file", Usage: "write target<TAB>repo@digest lines to `FILE`"},
			floatingFlag,
			&cli.StringFlag{Name: "recipe", Value: "server", Usage: "a server recipe `FILE.yaml` instead of the built-in one"},
			seriesFlag,
			refFlag,
		}, append(gateFlags(), executorFlags("llama.cpp source `DIR`: a plain directory or a git repository/mirror holding the plan's commit (required for host)", "targets built and pushed at once")...)...),
		Action: func(c *cli.Context) error {
			creds, err := publish.CredentialsFromEnv(os.Getenv, "")
			if err != nil {
				return usageError{err}
			}
			red := publish.NewRedactor(creds)
			o, err := publishOptionsOf(c, creds)
			if err == nil {
				err = runPublish(c.Context, o, streamsOf(c))
			}
			var ue usageError
			if errors.As(err, &ue) {
				return usageError{red.Error(ue.err)}
			}
			// The redacted error keeps no chain: say here what run would have read from it.
			if errors.Is(err, pipeline.ErrFloating) {
				return usageError{red.Error(err)}
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
	Specs []targetSpec
	Plans []*pipeline.Plan
	Exec  executorOptions
	In    *serverInputs
	// Gate, when set, judges each image's server before it is pushed or a tag moved to it.
	Gate       *gateOptions
	JSON       bool
	DigestFile string
}

// publishOptionsOf reads the flags and resolves the plans and the tags' templates; usage errors
// are found here, before anything is built or contacted.
func publishOptionsOf(c *cli.Context, creds *publish.Credentials) (publishOptions, error) {
	o := publishOptions{Creds: creds, JSON: c.Bool("json"), DigestFile: c.String("digest-file")}
	if c.NArg() > 0 {
		return o, usagef("publish takes no arguments, got %q", c.Args().Slice())
	}
	var err error
	if o.Repo, err = publish.ParseRegistry(c.String("registry")); err != nil {
		return o, usageError{err}
	}
	if creds != nil {
		creds.Host = o.Repo.RegistryStr()
	}
	if o.Tmpl, err = publish.ParseTemplates(c.StringSlice("tag-template")); err != nil {
		return o, usageError{err}
	}
	if o.Specs = targetSpecsOf(c.StringSlice("target"), c.StringSlice("target-file")); len(o.Specs) == 0 {
		return o, usagef("no target given: use --target NAME[,NAME...] or --target-file FILE")
	}
	if o.Exec, err = executorOptionsOf(c); err != nil {
		return o, err
	}
	if o.Exec.Jobs < 1 {
		return o, usagef("--jobs must be at least 1")
	}
	if err := o.Exec.check(); err != nil {
		return o, err
	}
	if o.In, err = serverInputsOf(c, o.Exec.Source, false); err != nil {
		return o, err
	}
	if o.Plans, err = resolveServerPlans(o.Specs, o.In, c.Bool("allow-floating")); err != nil {
		return o, err
	}
	if o.Gate, err = gateOptionsOf(c); err != nil {
		return o, err
	}
	return o, nil
}

// runPublish renders every tag, makes or reuses each plan's image (through the gate, when set),
// pushes it and reports the digests.
func runPublish(ctx context.Context, o publishOptions, s streams) error {
	repo, tmpl, plans, eo, in, creds := o.Repo, o.Tmpl, o.Plans, o.Exec, o.In, o.Creds
	var errs []error
	// Every tag is checked before anything is built or contacted.
	tags, err := tmpl.RenderAll(plans, version)
	if err != nil {
		return usageError{err}
	}
	log := s.Log
	var g *publish.Gate
	if o.Gate != nil {
		var cleanup func()
		if g, cleanup, err = o.Gate.open(ctx, o.Specs, plans, eo.Out, s); err != nil {
			return err
		}
		defer cleanup()
	}
	for i, p := range plans {
		if !p.Reproducible {
			log.Warn("the plan is not reproducible: its plan-hash tag does not pin the base image's content", "target", p.Target, "warnings", strings.Join(p.Warnings, "; "))
		}
		log.Info("publishing", "target", p.Target, "plan", p.ShortHash(), "repository", repo.Name(), "tags", strings.Join(tags[i], ","))
	}

	ropts := []remote.Option{remote.WithAuthFromKeychain(publish.Keychain(creds)), remote.WithPlatform(image.Platform)}
	images := publish.FromArtifacts{
		Out:         eo.Out,
		Executor:    func() (pipeline.Executor, error) { return newExecutor(s, eo, in.series, s.Term) },
		Jobs:        eo.Jobs,
		RuntimeBase: eo.Bases["runtime"],
		Remote:      ropts,
		Logger:      log,
	}.Images
	results, err := publish.Publish(ctx, plans, publish.Options{
		Repository: repo,
		Templates:  tmpl,
		Version:    version,
		Remote:     ropts,
		Jobs:       eo.Jobs,
		Logger:     log,
		Progress:   s.Term,
		Gate:       admitter(g),
	}, images)
	if err != nil {
		return err
	}
	if g != nil {
		if err := g.Pushed(results); err != nil {
			errs = append(errs, fmt.Errorf("writing the gate's verdicts: %w", err))
		}
	}
	stdout := s.Stdout
	type published struct {
		Target   string   `json:"target"`
		Tags     []string `json:"tags"`
		Digest   string   `json:"digest,omitempty"`
		Ref      string   `json:"ref,omitempty"`
		Existing bool     `json:"existing"`
		Moved    []string `json:"moved"`
		Error    string   `json:"error,omitempty"`
		// Gate is the speed gate's verdict (--not-slower-than) for an image it benched.
		Gate *publish.GateVerdict `json:"gate,omitempty"`
	}
	report := []published{}
	for _, r := range results {
		p := published{Target: r.Target, Tags: nonNil(r.Tags), Digest: r.Digest, Ref: r.Ref, Existing: r.Existing, Moved: nonNil(r.Moved)}
		if g != nil {
			p.Gate = g.Verdict(r.Target)
		}
		if r.Err != nil {
			errs = append(errs, r.Err)
			p.Error = r.Err.Error()
			report = append(report, p)
			continue
		}
		report = append(report, p)
		if r.Existing {
			log.Info("already published", "target", r.Target, "ref", r.Ref, "moved", strings.Join(r.Moved, ","))
		}
		if !o.JSON {
			fmt.Fprintln(stdout, r.Digest)
		}
	}
	if o.JSON {
		if err := writeJSON(stdout, report); err != nil {
			errs = append(errs, err)
		}
	}
	if f := o.DigestFile; f != "" {
		if err := atomicfile.WriteFile(f, publish.DigestLines(results), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("writing --digest-file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// publishExecutor starts the executor for the plans that need building, with the built-in
// patch series.

// admitter is the gate as publish.Options takes it: no gate, no Admitter (not a nil *Gate).
func admitter(g *publish.Gate) publish.Admitter {
	if g == nil {
		return nil
	}
	return g
}
