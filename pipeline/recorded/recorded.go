package recorded

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/targets"
)

// Plan is a plan read back from what a build left behind, with the host it is for where that
// is known.
type Plan struct {
	Plan *pipeline.Plan
	// Host is the target the bundle's manifest describes, or the built-in target the plan
	// names; nil when neither is known.
	Host *targets.Target
	// Partial says the record holds only part of a plan (a bundle from before manifest.json
	// version 2): its source, patches and base images.
	Partial bool
}

// Open reads the plan that arg records: a directory with index.json (an OCI layout),
// provenance.json (artifacts) or manifest.json (a bundle), a bundle archive (.tar.zst,
// .tar.gz), a plan or provenance JSON file, an OCI archive, or an image in a registry
// (IsImageRef). What is none of these is an
// inputerr.Error.
func Open(ctx context.Context, arg string) (*Plan, error) {
	fi, statErr := os.Stat(arg)
	var p *pipeline.Plan
	var err error
	switch {
	case statErr == nil && fi.IsDir():
		if _, err := os.Stat(filepath.Join(arg, "index.json")); err == nil {
			if p, err = fromImage(ctx, arg, "oci-layout:"+arg); err != nil {
				return nil, err
			}
		} else if b, err := os.ReadFile(filepath.Join(arg, artifacts.ProvenanceFile)); err == nil {
			if p, err = fromJSON(filepath.Join(arg, artifacts.ProvenanceFile), b); err != nil {
				return nil, err
			}
		} else if f, err := os.Open(filepath.Join(arg, "manifest.json")); err == nil {
			defer f.Close()
			m, err := manifest.Decode(f)
			if err != nil {
				return nil, inputerr.Errorf("%s: %v", filepath.Join(arg, manifest.FileName), err)
			}
			return fromBundle(filepath.Join(arg, manifest.FileName), m)
		} else {
			return nil, inputerr.Errorf("%s has neither %s (an artifact directory), manifest.json (a bundle) nor index.json (an OCI layout)", arg, artifacts.ProvenanceFile)
		}
	case statErr == nil && isBundleArchive(arg):
		m, err := manifest.ReadArchiveManifest(arg)
		if err != nil {
			return nil, err
		}
		return fromBundle(arg+" ("+manifest.FileName+")", m)
	case statErr == nil && strings.HasSuffix(arg, ".json"):
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		if p, err = fromJSON(arg, b); err != nil {
			return nil, err
		}
	case statErr == nil:
		if _, err := ocitar.IndexManifest(arg); err != nil {
			return nil, inputerr.Errorf("%s: give a plan as a .json file, a target file as .yaml, an image as an OCI archive (.tar), a bundle archive (.tar.zst, .tar.gz), or a directory", arg)
		}
		if p, err = fromImage(ctx, arg, "oci-archive:"+arg); err != nil {
			return nil, err
		}
	default:
		if p, err = fromImage(ctx, arg, arg); err != nil {
			return nil, err
		}
	}
	r := &Plan{Plan: p}
	// A recorded plan names its target: a built-in one gives the host to check the driver of.
	if t, err := targets.Load(p.Target); err == nil {
		r.Host = t
	}
	return r, nil
}

// isBundleArchive says whether name is named as bundle --archive names one (.tar.zst, .tar.gz).
func isBundleArchive(name string) bool {
	_, err := manifest.ArchiveCompression(name)
	return err == nil
}

// IsImageRef says whether arg, which is not a file, names an image in a registry. Its first
// component must be a registry host (a dot, a port or localhost: docker.io/user/repo, not
// user/repo), so that a mistyped path is reported as missing instead of looked up on Docker Hub.
func IsImageRef(arg string) bool {
	for _, ext := range []string{".json", ".yaml", ".yml", ".tar"} {
		if strings.HasSuffix(arg, ext) {
			return false
		}
	}
	if isBundleArchive(arg) {
		return false
	}
	host, _, ok := strings.Cut(arg, "/")
	if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		return false
	}
	_, err := name.ParseReference(arg, name.StrictValidation)
	return err == nil
}

// fromImage reads the plan an image records (image.LabelPlan) from its config; spec is what
// image.ReadConfig takes, arg what errors call the image.
func fromImage(ctx context.Context, arg, spec string) (*pipeline.Plan, error) {
	cf, err := image.ReadConfig(ctx, spec)
	if err != nil {
		return nil, err
	}
	b, err := image.RecordedPlan(cf)
	if err != nil {
		return nil, inputerr.Errorf("%s: %v", arg, err)
	}
	return fromJSON(arg, b)
}

// fromJSON reads a plan, or the plan a provenance.json records; file is what errors call it.
func fromJSON(file string, b []byte) (*pipeline.Plan, error) {
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
		return nil, inputerr.Errorf("%s is not a plan (llbuild plan --json) or provenance.json: %v", file, err)
	}
	if p.Hash == "" || p.SchemaVersion == 0 {
		return nil, inputerr.Errorf("%s is not a plan: it has no hash or schemaVersion", file)
	}
	return &p, nil
}

// fromBundle is the plan a bundle's manifest records and the host it names. A version 1
// manifest (from before build.plan) records only part of a plan: Partial is then true.
func fromBundle(file string, m *manifest.Manifest) (*Plan, error) {
	host := &targets.Target{Name: m.Target.Name}
	if b, err := json.Marshal(m.Target.Host); err != nil || json.Unmarshal(b, &host.Host) != nil {
		host = nil
	}
	if im := m.Build.Image; im != nil && im.Foreign {
		return nil, inputerr.Errorf("%s: its server came out of a foreign image (%s, %s), which records no plan to compare", file, im.Ref, im.Digest)
	}
	if len(m.Build.Plan) > 0 {
		p, err := fromJSON(file+" (build.plan)", m.Build.Plan)
		if err != nil {
			return nil, err
		}
		if p.Hash != m.Build.PlanHash {
			return nil, inputerr.Errorf("%s: build.plan has hash %s, build.planHash says %s", file, p.Hash, m.Build.PlanHash)
		}
		return &Plan{Plan: p, Host: host}, nil
	}
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
	return &Plan{Plan: p, Host: host, Partial: true}, nil
}
