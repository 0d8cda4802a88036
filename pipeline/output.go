package pipeline

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/artifacts"
)

// Executor carries out a Plan and leaves its outputs as an artifact directory under out.
type Executor interface {
	// Build runs the plan and returns the artifact directory.
	Build(ctx context.Context, p *Plan, out string) (string, error)
}

// The executors' names, as Builder.Executor and --executor give them.
const (
	ExecutorHost   = "host"
	ExecutorDagger = "dagger"
)

// Builder names the program that runs executors, for provenance.
type Builder struct {
	Version  string
	Executor string
}

// Collect finds the plan's outputs under root (the build directory, or what an engine
// exported of it). Each output lands in the artifact directory under its base name, as the
// runtime image and bundles keep the server and its libraries side by side. A glob that
// matches nothing is an error.
func Collect(p *Plan, root string) ([]artifacts.InputFile, error) {
	var files []artifacts.InputFile
	seen := map[string]string{}
	var errs []string
	for _, o := range p.Outputs {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(o.Glob)))
		if err != nil {
			return nil, fmt.Errorf("output glob %q: %w", o.Glob, err)
		}
		if len(matches) == 0 {
			errs = append(errs, fmt.Sprintf("output %q (%s) matched nothing under %s", o.Glob, o.Kind, root))
			continue
		}
		sort.Strings(matches)
		for _, m := range matches {
			name := path.Base(filepath.ToSlash(m))
			if prev, ok := seen[name]; ok {
				if prev == m {
					continue
				}
				return nil, fmt.Errorf("outputs %s and %s would both be %s in the artifacts", prev, m, name)
			}
			seen[name] = m
			files = append(files, artifacts.InputFile{Path: name, From: m, Kind: o.Kind})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("collecting outputs: %s", strings.Join(errs, "; "))
	}
	return files, nil
}

// WriteArtifacts collects the plan's outputs under root and writes them, with provenance, to
// the plan's artifact directory under out.
func WriteArtifacts(p *Plan, root, out string, b Builder) (string, error) {
	files, err := Collect(p, root)
	if err != nil {
		return "", err
	}
	return artifacts.Write(out, artifacts.Input{
		Target:     p.Target,
		PlanHash:   p.Hash,
		Files:      files,
		Provenance: ProvenanceOf(p, b),
	})
}

// ProvenanceOf lists the plan's materials: source, patches and base images, all pinned. A host
// build ran on the machine itself, not in the devel image, so the devel image is not among its
// materials; the runtime image stays, as the base the artifacts' image is assembled on.
func ProvenanceOf(p *Plan, b Builder) artifacts.Provenance {
	m := artifacts.Materials{
		Source:  artifacts.Source{URL: p.Source.URL, Commit: p.Source.Commit},
		Patches: []artifacts.Patch{},
	}
	if p.Vendor != nil {
		m.Vendor = &artifacts.Source{URL: p.Vendor.URL, Commit: p.Vendor.Commit}
	}
	for _, pt := range p.Patches {
		m.Patches = append(m.Patches, artifacts.Patch{Name: pt.Name, SHA256: pt.SHA256})
	}
	for _, im := range []struct {
		role string
		img  Image
	}{{"devel", p.Images.Devel}, {"runtime", p.Images.Runtime}} {
		if im.role == "devel" && b.Executor == ExecutorHost {
			continue
		}
		m.Images = append(m.Images, artifacts.Image{Role: im.role, Ref: im.img.Ref, Digest: im.img.Digest})
	}
	return artifacts.Provenance{
		Materials: m,
		Plan:      p.JSON(),
		Builder:   artifacts.Builder{Name: "llbuild", Version: b.Version, Executor: b.Executor},
	}
}
