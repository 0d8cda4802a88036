package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/patches"
)

// Executor carries out a Plan and leaves its outputs as an artifact directory under out.
type Executor interface {
	// Build runs the plan and returns the artifact directory.
	Build(ctx context.Context, p *Plan, out string) (string, error)
}

// WheelExecutor carries out a WheelPlan and leaves the wheel in an artifact directory under
// out.
type WheelExecutor interface {
	// BuildWheel runs the plan and returns the artifact directory.
	BuildWheel(ctx context.Context, wp *WheelPlan, out string) (string, error)
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
// the plan's artifact directory under out. opts record where the build's inputs differed
// from the plan's.
func WriteArtifacts(p *Plan, root, out string, b Builder, opts ...ProvenanceOption) (string, error) {
	files, err := Collect(p, root)
	if err != nil {
		return "", err
	}
	var pv provenance
	for _, o := range opts {
		o(&pv)
	}
	if len(pv.patchFiles) > 0 {
		tmp, err := os.MkdirTemp("", "llbuild-patches-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		pf, err := patchFiles(p, pv.patchFiles, tmp)
		if err != nil {
			return "", err
		}
		files = append(files, pf...)
	}
	if p.CUDA != nil {
		for _, f := range files {
			// each file once: libggml-cuda.so and .so.0 are links to .so.0.x
			fi, err := os.Lstat(f.From)
			if err != nil {
				return "", err
			}
			if !fi.Mode().IsRegular() {
				continue
			}
			if _, err := normalizeStrtab(f.From); err != nil {
				return "", fmt.Errorf("%s: %w", f.From, err)
			}
		}
	}
	return artifacts.Write(out, artifacts.Input{
		Target:     p.Target,
		PlanHash:   p.Hash,
		Series:     p.Series,
		Files:      files,
		Provenance: ProvenanceOf(p, b, opts...),
	})
}

// patchFiles writes the plan's patches from series into dir, in the plan's order, each with the
// plan's digest.
func patchFiles(p *Plan, series []patches.Patch, dir string) ([]artifacts.InputFile, error) {
	byName := map[string]patches.Patch{}
	for _, pt := range series {
		byName[pt.Name] = pt
	}
	var files []artifacts.InputFile
	for _, want := range p.Patches {
		pt, ok := byName[want.Name]
		if !ok || len(pt.Data) == 0 {
			return nil, fmt.Errorf("the plan's patch %s is not in the series given to the build", want.Name)
		}
		sum := sha256.Sum256(pt.Data)
		if got := hex.EncodeToString(sum[:]); got != strings.TrimPrefix(want.SHA256, "sha256:") {
			return nil, fmt.Errorf("patch %s has sha256 %s, the plan says %s", want.Name, got, want.SHA256)
		}
		f := filepath.Join(dir, want.Name)
		if err := os.WriteFile(f, pt.Data, 0o644); err != nil {
			return nil, err
		}
		files = append(files, artifacts.InputFile{Path: "patches/" + want.Name, From: f, Kind: artifacts.KindPatch})
	}
	return files, nil
}

// A ProvenanceOption records an input the executor used where it differs from the plan's, so
// that provenance names what was built rather than what was planned.
type ProvenanceOption func(*provenance)

type provenance struct {
	// patchFiles are the bytes of the patches applied (WithPatchFiles), kept in the artifacts.
	patchFiles []patches.Patch
	devel      *artifacts.Image
	// sourceTree and vendorTree are the content hashes of plain-directory sources.
	sourceTree, vendorTree string
	cuda                   *CUDAToolchain
}

// WithPatchFiles keeps the applied patches' bytes in the artifact directory (patches/NAME, kind
// patch), each checked against the plan's digest: bundles carry them, and a bench campaign keeps
// them by sha256 beside its records.
func WithPatchFiles(series []patches.Patch) ProvenanceOption {
	return func(pv *provenance) { pv.patchFiles = series }
}

// WithCUDAToolchain records the CUDA compiler that built, as found where the build ran.
func WithCUDAToolchain(tc *CUDAToolchain) ProvenanceOption {
	return func(pv *provenance) { pv.cuda = tc }
}

// WithDevelImage records the devel image the build ran in: its reference (no host paths:
// oci-archive:NAME) and digest, "" when unknown. An image of another digest than the plan's,
// or of an unknown one, is marked substituted.
func WithDevelImage(ref, digest string) ProvenanceOption {
	return func(pv *provenance) { pv.devel = &artifacts.Image{Role: "devel", Ref: ref, Digest: digest} }
}

// WithUnverifiedSource records that the llama.cpp source (the vendored one when the plan has
// a vendor) was a plain directory with content hash tree (TreeHash), not a checkout of the
// plan's commit.
func WithUnverifiedSource(p *Plan, tree string) ProvenanceOption {
	return func(pv *provenance) {
		if p.Vendor != nil {
			pv.vendorTree = tree
		} else {
			pv.sourceTree = tree
		}
	}
}

// CheckSourceTree refuses a plain-directory source whose tree is not the one the plan was made
// for (Source.Tree): the directory changed between plan and build.
func CheckSourceTree(p *Plan, dir, tree string) error {
	if p.Vendor != nil || p.Source.Tree == "" || p.Source.Tree == tree {
		return nil
	}
	return fmt.Errorf("the source %s changed since the plan was made: its tree is %s, the plan's %s; resolve the plan again (run the command again)", dir, tree, p.Source.Tree)
}

// WithUnverifiedPackage records that the source of a plan with a vendor (llama-cpp-python,
// which vendors llama.cpp) was a plain directory with content hash tree.
func WithUnverifiedPackage(tree string) ProvenanceOption {
	return func(pv *provenance) { pv.sourceTree = tree }
}

// DevelSubstituted reports whether an image of digest used is another than the plan's devel
// image: a different digest, or one not known on either side.
func DevelSubstituted(p *Plan, used string) bool {
	return used == "" || used != p.Images.Devel.Digest
}

// ProvenanceOf lists the build's materials: source, patches, base images and apt packages, as
// the plan pins them unless opts say the executor used something else. A host build ran on
// the machine itself, not in the devel image, so neither the devel image nor apt is among
// its materials; the runtime image stays, as the base the artifacts' image is assembled on.
func ProvenanceOf(p *Plan, b Builder, opts ...ProvenanceOption) artifacts.Provenance {
	var pv provenance
	for _, o := range opts {
		o(&pv)
	}
	m := artifacts.Materials{
		Source:  artifacts.Source{URL: p.Source.URL, Commit: p.Source.Commit},
		Patches: []artifacts.Patch{},
	}
	if p.Vendor != nil {
		m.Vendor = &artifacts.Source{URL: p.Vendor.URL, Commit: p.Vendor.Commit}
	}
	if pv.sourceTree != "" {
		m.Source.Unverified, m.Source.Tree = true, pv.sourceTree
	}
	if pv.vendorTree != "" && m.Vendor != nil {
		m.Vendor.Unverified, m.Vendor.Tree = true, pv.vendorTree
	}
	for _, pt := range p.Patches {
		m.Patches = append(m.Patches, artifacts.Patch{Name: pt.Name, SHA256: pt.SHA256})
	}
	inDevel := b.Executor != ExecutorHost
	substituted := false
	for _, im := range []struct {
		role string
		img  Image
	}{{"devel", p.Images.Devel}, {"runtime", p.Images.Runtime}} {
		if im.role == "devel" && !inDevel {
			continue
		}
		planned := artifacts.Image{Role: im.role, Ref: im.img.Ref, Digest: im.img.Digest}
		if im.role == "devel" && pv.devel != nil && pv.devel.Ref != planned.Ref {
			used := *pv.devel
			used.Substituted = DevelSubstituted(p, used.Digest)
			substituted = used.Substituted
			used.Planned = &artifacts.ImageRef{Ref: planned.Ref, Digest: planned.Digest}
			planned = used
		}
		m.Images = append(m.Images, planned)
	}
	if p.Apt != nil && inDevel {
		a := &artifacts.Apt{Distro: p.Apt.Distro, Snapshot: p.Apt.Snapshot, Packages: []artifacts.AptPackage{}}
		for _, pk := range p.Apt.Packages {
			a.Packages = append(a.Packages, artifacts.AptPackage{Name: pk.Name, Version: pk.Version})
		}
		a.Unverified = substituted
		m.Apt = a
	}
	if pv.cuda != nil {
		m.CUDA = &artifacts.CUDAToolkit{Release: pv.cuda.Release, Compiler: pv.cuda.VersionLine, Stubs: pv.cuda.Stubs, DriverLibrary: pv.cuda.Driver != ""}
	}
	return artifacts.Provenance{
		Materials: m,
		Plan:      p.JSON(),
		Builder:   artifacts.Builder{Name: "llbuild", Version: b.Version, Executor: b.Executor},
	}
}
