package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

func planDiffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "what differs between two plans, and whether each target's driver still starts them",
		ArgsUsage: "A B",
		Description: "A and B are each a built-in target, a target file (.yaml), a plan (.json, as plan --json\n" +
			"prints it, or a provenance.json), an artifact directory, or a bundle directory. Differences are\n" +
			"grouped: source commit, patches, base images, apt, CMake arguments, environment, CUDA, runtime\n" +
			"env, labels. Exit 0 when B's NVIDIA_REQUIRE_CUDA holds on every target's driver, 1 when not.",
		Flags: []cli.Flag{recipeFlag, jsonFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usagef("plan diff takes two plans A B (targets, target files, plan files, artifact or bundle directories), got %d", c.NArg())
			}
			var sides [2]*planSide
			for i, arg := range c.Args().Slice() {
				s, err := loadPlanSide(arg, c.String("recipe"))
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
// records only part of a plan (a bundle).
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

// loadPlanSide reads what arg names: a directory with provenance.json (artifacts) or
// manifest.json (a bundle), a plan or provenance JSON file, a target file, or a built-in target.
func loadPlanSide(arg, recipe string) (*planSide, error) {
	s := &planSide{arg: arg}
	fi, statErr := os.Stat(arg)
	switch {
	case statErr == nil && fi.IsDir():
		if b, err := os.ReadFile(filepath.Join(arg, artifacts.ProvenanceFile)); err == nil {
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
			s.plan, s.host, s.partial = planOfBundle(m)
			return s, nil
		} else {
			return nil, usagef("%s has neither %s (an artifact directory) nor manifest.json (a bundle)", arg, artifacts.ProvenanceFile)
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
		return nil, usagef("%s: give a plan as a .json file, a target file as .yaml, or a directory", arg)
	default:
		t, err := targets.Load(arg)
		if err != nil {
			return nil, usagef("%s is neither a file nor a built-in target (%s)", arg, strings.Join(targets.Names(), ", "))
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

// planOfBundle is the part of a plan a bundle's manifest records, and the host it names.
func planOfBundle(m *manifest.Manifest) (*pipeline.Plan, *targets.Target, bool) {
	p := &pipeline.Plan{Target: m.Target.Name, Backend: m.Target.Backend, Hash: m.Build.PlanHash}
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
	t := &targets.Target{Name: m.Target.Name}
	if b, err := json.Marshal(m.Target.Host); err == nil && json.Unmarshal(b, &t.Host) == nil {
		return p, t, true
	}
	return p, nil, true
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
			b.WriteString(" — a bundle: only source, patches and base images are recorded")
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
