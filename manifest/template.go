package manifest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/llbuild/llbuild/targets"
)

// TemplateInput is the BundleInput that re-makes the bundle at dir around other artifacts of
// the same target: its model, draft and projector (from the bundle's own files), its llama-server
// arguments and its environment. Only what the bundle derived from its server is derived again
// from the new one: the arguments of the series' patches (--prompt-logprobs, and
// --prompt-logprobs-alone with --no-kv-unified) are given where the new server has them, so a
// template made from a series build re-makes a plain build and the other way round.
func TemplateInput(dir string, t *targets.Target, artifactsDir string) (BundleInput, error) {
	m, err := Load(dir)
	if err != nil {
		return BundleInput{}, err
	}
	if m.Target.Name != t.Name {
		return BundleInput{}, fmt.Errorf("template %s is a bundle for target %s, not %s", dir, m.Target.Name, t.Name)
	}
	in := BundleInput{
		Target:    t,
		Artifacts: artifactsDir,
		Model:     filepath.Join(dir, filepath.FromSlash(m.Models.Model.Path)),
		Env:       map[string]string{},
	}
	if d := m.Models.Draft; d != nil {
		in.Draft = filepath.Join(dir, filepath.FromSlash(d.Path))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Server.Env)) {
		if v, ok := t.Runtime.Env[k]; ok && v == m.Server.Env[k] {
			continue
		}
		in.Env[k] = m.Server.Env[k]
	}
	in.Knobs.ScoresAlone = m.Contract.ScoresTrafficIndependent
	args := m.Server.Args
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("template %s: %s has no value in the manifest's arguments", dir, a)
			}
			i++
			return args[i], nil
		}
		switch a {
		case "--model", "--model-draft", "--spec-type":
			// the models' paths and the draft's kind are derived from the models again
			if _, err := value(); err != nil {
				return BundleInput{}, err
			}
		case "--mmproj":
			v, err := value()
			if err != nil {
				return BundleInput{}, err
			}
			in.MMProj = filepath.Join(dir, filepath.FromSlash(v))
		case "--cache-ram", "--ctx-checkpoints":
			v, err := value()
			if err != nil {
				return BundleInput{}, err
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return BundleInput{}, fmt.Errorf("template %s: %s %q is not a number", dir, a, v)
			}
			if a == "--cache-ram" {
				in.Knobs.CacheRAM = n
			} else {
				in.Knobs.CtxCheckpoints = n
			}
		case "--prompt-logprobs":
		case "--prompt-logprobs-alone", "--no-kv-unified":
			if !m.Contract.ScoresTrafficIndependent {
				in.ExtraArgs = append(in.ExtraArgs, a)
			}
		default:
			in.ExtraArgs = append(in.ExtraArgs, a)
		}
	}
	return in, nil
}

// RemakeBundle writes at dir the bundle the template bundle at template is, made around other
// artifacts of the same target (TemplateInput): its models hard-linked where the filesystem
// allows, dir replaced, entry times at the epoch. Bisect probes and the publish gate bundle their
// builds so.
func RemakeBundle(ctx context.Context, template string, t *targets.Target, artifactsDir, dir string, log *slog.Logger) error {
	in, err := TemplateInput(template, t, artifactsDir)
	if err != nil {
		return err
	}
	plan, err := PlanBundle(in)
	if err != nil {
		return fmt.Errorf("bundling %s as %s is: %w", artifactsDir, template, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	_, err = WriteBundle(ctx, plan, BundleOutput{Dir: dir, Force: true, Link: true, Epoch: time.Unix(0, 0).UTC(), Log: log})
	return err
}
