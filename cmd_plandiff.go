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

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/targets"
)

func planDiffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "what differs between two plans, and whether each target's driver still starts them",
		ArgsUsage: "A B",
		Description: "A and B are each a built-in target, a target file (.yaml), a plan (.json, as plan --json\n" +
			"prints it, or a provenance.json), an artifact directory, a bundle directory, or a runtime image:\n" +
			"an OCI archive (.tar, as build --image-out writes), an OCI layout directory, or a registry\n" +
			"reference naming its registry and a tag or digest (registry.example/repo:tag,\n" +
			"docker.io/user/repo@sha256:...). Differences are grouped: source commit, patches, base images,\n" +
			"apt, CMake arguments, environment, CUDA, runtime env, labels. Exit 0 when B's NVIDIA_REQUIRE_CUDA\n" +
			"holds on every target's driver, 1 when not.",
		Flags: []cli.Flag{recipeFlag, jsonFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usagef("plan diff takes two plans A B (targets, target files, plan files, artifact or bundle directories, images), got %d", c.NArg())
			}
			var sides [2]*planSide
			for i, arg := range c.Args().Slice() {
				s, err := loadPlanSide(c.Context, arg, c.String("recipe"))
				if err != nil {
					return err
				}
				sides[i] = s
			}
			d := pipeline.DiffPlans(sides[0].plan, sides[1].plan, sides[0].partial || sides[1].partial)
			checks := driverChecks(sides)
			out := stdoutOf(c)
			if c.Bool("json") {
				err := writeJSON(out, struct {
					A       planRef                `json:"a"`
					B       planRef                `json:"b"`
					Groups  []pipeline.Group       `json:"groups"`
					Drivers []pipeline.DriverCheck `json:"drivers"`
				}{sides[0].ref(), sides[1].ref(), nonNil(d.Groups), nonNil(checks)})
				if err != nil {
					return err
				}
			} else if err := writePlanDiff(out, sides, d, checks); err != nil {
				return err
			}
			var failed []string
			for _, ch := range checks {
				if ch.Plan == "B" && !ch.Holds {
					failed = append(failed, ch.Reason)
				}
			}
			if len(failed) > 0 {
				return errors.New("B would not start: " + strings.Join(failed, "; "))
			}
			return nil
		},
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// planSide is one side of a diff: its plan, the host it is for when known, and whether it
// records only part of a plan (a bundle from before manifest.json version 2).
type planSide struct {
	arg     string
	plan    *pipeline.Plan
	host    *targets.Target
	partial bool
}

type planRef struct {
	Arg     string `json:"arg"`
	Target  string `json:"target"`
	Hash    string `json:"hash,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

func (s *planSide) ref() planRef {
	return planRef{Arg: s.arg, Target: s.plan.Target, Hash: s.plan.Hash, Partial: s.partial}
}

// loadPlanSide reads what arg names: a directory with provenance.json (artifacts),
// manifest.json (a bundle) or index.json (an OCI layout), a plan or provenance JSON file, a
// target file, an OCI archive, a built-in target, or an image in a registry.
func loadPlanSide(ctx context.Context, arg, recipe string) (*planSide, error) {
	s := &planSide{arg: arg}
	fi, statErr := os.Stat(arg)
	switch {
	case statErr == nil && fi.IsDir():
		if _, err := os.Stat(filepath.Join(arg, "index.json")); err == nil {
			if s.plan, err = planOfImage(ctx, arg, "oci-layout:"+arg); err != nil {
				return nil, err
			}
		} else if b, err := os.ReadFile(filepath.Join(arg, artifacts.ProvenanceFile)); err == nil {
			p, err := planFromJSON(filepath.Join(arg, artifacts.ProvenanceFile), b)
			if err != nil {
				return nil, err
			}
			s.plan = p
		} else if f, err := os.Open(filepath.Join(arg, "manifest.json")); err == nil {
			defer f.Close()
			m, err := manifest.Decode(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", arg, err)
			}
			if s.plan, s.host, s.partial, err = planOfBundle(filepath.Join(arg, manifest.FileName), m); err != nil {
				return nil, err
			}
			return s, nil
		} else {
			return nil, usagef("%s has neither %s (an artifact directory), manifest.json (a bundle) nor index.json (an OCI layout)", arg, artifacts.ProvenanceFile)
		}
	case statErr == nil && strings.HasSuffix(arg, ".json"):
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		if s.plan, err = planFromJSON(arg, b); err != nil {
			return nil, err
		}
	case statErr == nil && (strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")):
		t, err := loadTarget("", arg)
		if err != nil {
			return nil, err
		}
		if s.plan, err = resolvePlan("", arg, recipe, false); err != nil {
			return nil, err
		}
		s.host = t
		return s, nil
	case statErr == nil:
		if _, err := ocitar.IndexManifest(arg); err != nil {
			return nil, usagef("%s: give a plan as a .json file, a target file as .yaml, an image as an OCI archive (.tar), or a directory", arg)
		}
		var err error
		if s.plan, err = planOfImage(ctx, arg, "oci-archive:"+arg); err != nil {
			return nil, err
		}
	case isImageRef(arg):
		var err error
		if s.plan, err = planOfImage(ctx, arg, arg); err != nil {
			return nil, err
		}
	default:
		t, err := targets.Load(arg)
		if err != nil {
			return nil, usagef("%s is neither a file, a built-in target (%s) nor an image reference (registry.example/repo:tag)", arg, strings.Join(targets.Names(), ", "))
		}
		if s.plan, err = resolvePlan(arg, "", recipe, false); err != nil {
			return nil, err
		}
		s.host = t
		return s, nil
	}
	// A recorded plan names its target: a built-in one gives the host to check the driver of.
	if t, err := targets.Load(s.plan.Target); err == nil {
		s.host = t
	}
	return s, nil
}

// isImageRef says whether arg, which is not a file, names an image in a registry. Its first
// component must be a registry host (a dot, a port or localhost: docker.io/user/repo, not
// user/repo), so that a mistyped path is reported as missing instead of looked up on Docker Hub.
func isImageRef(arg string) bool {
	for _, ext := range []string{".json", ".yaml", ".yml", ".tar"} {
		if strings.HasSuffix(arg, ext) {
			return false
		}
	}
	host, _, ok := strings.Cut(arg, "/")
	if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		return false
	}
	_, err := name.ParseReference(arg, name.StrictValidation)
	return err == nil
}

// planOfImage reads the plan an image records (image.LabelPlan) from its config; spec is
// what image.ReadConfig takes.
func planOfImage(ctx context.Context, arg, spec string) (*pipeline.Plan, error) {
	cf, err := image.ReadConfig(ctx, spec)
	if err != nil {
		return nil, err
	}
	b, err := image.RecordedPlan(cf)
	if err != nil {
		return nil, usagef("%s: %v", arg, err)
	}
	return planFromJSON(arg, b)
}

// planFromJSON reads a plan, or the plan a provenance.json records.
func planFromJSON(file string, b []byte) (*pipeline.Plan, error) {
	var probe struct {
		Plan json.RawMessage `json:"plan"`
	}
	if json.Unmarshal(b, &probe) == nil && len(probe.Plan) > 0 {
		b = probe.Plan
	}
	var p pipeline.Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, usagef("%s is not a plan (llbuild plan --json) or provenance.json: %v", file, err)
	}
	if p.Hash == "" || p.SchemaVersion == 0 {
		return nil, usagef("%s is not a plan: it has no hash or schemaVersion", file)
	}
	return &p, nil
}

// planOfBundle is the plan a bundle's manifest records and the host it names. A version 1
// manifest (from before build.plan) records only part of a plan: partial is then true.
func planOfBundle(file string, m *manifest.Manifest) (p *pipeline.Plan, host *targets.Target, partial bool, err error) {
	host = &targets.Target{Name: m.Target.Name}
	if b, err := json.Marshal(m.Target.Host); err != nil || json.Unmarshal(b, &host.Host) != nil {
		host = nil
	}
	if len(m.Build.Plan) > 0 {
		if p, err = planFromJSON(file+" (build.plan)", m.Build.Plan); err != nil {
			return nil, nil, false, err
		}
		if p.Hash != m.Build.PlanHash {
			return nil, nil, false, usagef("%s: build.plan has hash %s, build.planHash says %s", file, p.Hash, m.Build.PlanHash)
		}
		return p, host, false, nil
	}
	p = &pipeline.Plan{Target: m.Target.Name, Backend: m.Target.Backend, Hash: m.Build.PlanHash}
	p.Source = pipeline.Source{URL: m.Build.Source.URL, Commit: m.Build.Source.Commit}
	if v := m.Build.Vendor; v != nil {
		p.Vendor = &pipeline.Source{URL: v.URL, Commit: v.Commit}
	}
	for _, pt := range m.Build.Patches {
		p.Patches = append(p.Patches, pipeline.Patch{Name: pt.Name, SHA256: pt.SHA256})
	}
	for _, im := range m.Build.Images {
		ref := pipeline.Image{Ref: im.Ref, Digest: im.Digest}
		switch im.Role {
		case "devel":
			p.Images.Devel = ref
		case "runtime":
			p.Images.Runtime = ref
		}
	}
	return p, host, true, nil
}

// driverChecks checks each plan's NVIDIA_REQUIRE_CUDA against the driver of each target the
// diff names: moving a target to B is safe only if its driver meets B's requirement.
func driverChecks(sides [2]*planSide) []pipeline.DriverCheck {
	var checks []pipeline.DriverCheck
	seen := map[string]bool{}
	for _, host := range sides {
		t := host.host
		if t == nil || seen[t.Name] || t.Host.Driver.CUDA == "" {
			continue
		}
		seen[t.Name] = true
		for i, s := range sides {
			if s.plan.CUDA == nil || s.plan.CUDA.RequireCUDA == "" {
				continue
			}
			ch := pipeline.DriverCheck{Target: t.Name, Driver: t.Host.Driver.Version + " (CUDA " + t.Host.Driver.CUDA + ")", Plan: string(rune('A' + i)), Require: s.plan.CUDA.RequireCUDA, Holds: true}
			if err := pipeline.CheckDriver(t, ch.Require); err != nil {
				ch.Holds, ch.Reason = false, err.Error()
			}
			checks = append(checks, ch)
		}
	}
	return checks
}

func writePlanDiff(w io.Writer, sides [2]*planSide, d *pipeline.PlanDiff, checks []pipeline.DriverCheck) error {
	var b strings.Builder
	for i, s := range sides {
		h := s.plan.Hash
		if len(h) > 12 {
			h = h[:12]
		}
		fmt.Fprintf(&b, "%c: %s (target %s, plan %s)", 'A'+i, s.arg, s.plan.Target, h)
		if s.partial {
			b.WriteString(" — a bundle from an earlier llbuild (manifest.json version 1): only its source, patches and base images are compared; rebundle it to compare the whole plan")
		}
		b.WriteString("\n")
	}
	if len(d.Groups) == 0 {
		b.WriteString("no differences\n")
	}
	for _, g := range d.Groups {
		fmt.Fprintf(&b, "\n%s:\n", g.Name)
		for _, c := range g.Changes {
			switch {
			case c.A == "":
				fmt.Fprintf(&b, "  %s: + %s\n", c.What, c.B)
			case c.B == "":
				fmt.Fprintf(&b, "  %s: - %s\n", c.What, c.A)
			default:
				fmt.Fprintf(&b, "  %s: %s -> %s\n", c.What, c.A, c.B)
			}
		}
	}
	if len(checks) > 0 {
		b.WriteString("\ndriver cap:\n")
	}
	for _, ch := range checks {
		verdict := "holds"
		if !ch.Holds {
			verdict = "DOES NOT HOLD: " + ch.Reason
		}
		fmt.Fprintf(&b, "  target %s, driver %s: %s needs %s: %s\n", ch.Target, ch.Driver, ch.Plan, ch.Require, verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
