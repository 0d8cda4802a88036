package imagebundle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/targets"
)

// fullCommit is a 40-hex git commit, as an image's revision label may hold one.
var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Server takes llama-server, its loader, its libraries and the ggml backends it dlopens out of
// the runtime image spec names, into a directory made under near (beside the bundle, so that
// placing the files can link them), and says where they came from: the plan an llbuild image
// carries in its labels, or, for anyone else's image, that it is foreign. The backends are
// listed with the CPU variant ggml would load on t's CPU. cleanup removes the directory; call
// it once the bundle is written.
func Server(ctx context.Context, log *slog.Logger, spec, near string, t *targets.Target) (in *manifest.ServerInput, cleanup func(), err error) {
	cleanup = func() {}
	img, closeImage, err := image.Open(ctx, spec)
	if err != nil {
		return nil, cleanup, err
	}
	defer closeImage()
	_, statErr := os.Stat(near)
	if err := os.MkdirAll(near, 0o755); err != nil {
		return nil, cleanup, err
	}
	tmp, err := os.MkdirTemp(near, ".llbuild-image-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() {
		os.RemoveAll(tmp)
		if statErr != nil {
			os.Remove(near) // made here for the extraction: gone again unless the bundle is in it
		}
	}
	var size int64
	if m, err := img.Manifest(); err == nil {
		for _, l := range m.Layers {
			size += l.Size
		}
	}
	log.Info("reading the image's layers for llama-server and its libraries", "image", spec, "layers MiB", size>>20)
	s, err := image.ExtractServer(ctx, img, tmp)
	if err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("image %s: %w", spec, err)
	}
	what := "image " + spec
	in = &manifest.ServerInput{What: what}
	places := backendPlaces(s)
	for _, f := range s.Files {
		bf := manifest.BundleFile{From: f.From, File: manifest.File{Path: manifest.LibDir + "/" + f.Name, Kind: manifest.KindLibrary, Link: f.Link}}
		if p, ok := places[f.Name]; ok {
			bf.File.Path = p
		}
		if f.Executable {
			bf.File.Path, bf.File.Kind = manifest.BinDir+"/llama-server", manifest.KindExecutable
		}
		if f.Link != "" {
			bf.From = ""
		}
		in.Files = append(in.Files, bf)
	}
	if s.Loader != "" {
		in.Loader = manifest.LibDir + "/" + s.Loader
	}
	if len(s.Backends) > 0 {
		if in.GGML, err = backendsOf(s, t, places); err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("image %s: %w", spec, err)
		}
		if s.BackendPath != "" {
			in.Env = map[string]string{"GGML_BACKEND_PATH": places[s.BackendPath]}
		}
	}
	labels := s.Config.Config.Labels
	origin := &manifest.ImageOrigin{Ref: spec, Digest: s.Digest.String(), Server: s.Path}
	for k, v := range labels {
		if strings.HasPrefix(k, "org.opencontainers.image.") {
			if origin.Labels == nil {
				origin.Labels = map[string]string{}
			}
			origin.Labels[k] = v
		}
	}
	if labels[image.LabelPlan] == "" && labels[image.LabelPlanHash] == "" {
		origin.Foreign = true
		in.Build = manifest.Build{
			Source:   manifest.Source{URL: labels["org.opencontainers.image.source"]},
			Patches:  []manifest.Patch{},
			Images:   []manifest.Image{{Role: "runtime", Ref: spec, Digest: s.Digest.String()}},
			Contract: patches.Contract(nil),
			Image:    origin,
		}
		if rev := labels["org.opencontainers.image.revision"]; fullCommit.MatchString(rev) {
			in.Build.Source.Commit = rev
		}
	} else {
		raw, err := image.RecordedPlan(s.Config)
		if err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("%s: %w", what, err)
		}
		if in.Build, err = BuildOfPlan(raw, labels[image.LabelVersion]); err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("%s: %w", what, err)
		}
		in.Build.Image = origin
	}
	libs := 0
	for _, f := range s.Files {
		if !f.Executable && f.Link == "" {
			libs++
		}
	}
	log.Info("server taken from the image", "image", spec, "digest", s.Digest.String(), "server", s.Path,
		"libraries", libs, "loader", s.Loader, "foreign", origin.Foreign, "from the host", strings.Join(s.Host, " "))
	if g := in.GGML; g != nil {
		log.Info("ggml backends taken from the image", "backends", len(g.Backends), "compiled backend dir", g.CompiledDir,
			"CPU backend on target "+t.Name, g.CPU)
	}
	return in, cleanup, nil
}

// backendPlaces says where each ggml backend of s goes in the bundle, by name. Those ggml's
// loader finds by searching go to lib/, beside the loader, which is the executable whose
// directory it searches. One only GGML_BACKEND_PATH names goes to lib/ggml-backend-path/,
// where no search finds it: found there too, ggml would register it twice.
func backendPlaces(s *image.Server) map[string]string {
	places := map[string]string{}
	for _, b := range s.Backends {
		places[b.Name] = manifest.LibDir + "/" + b.Name
		if b.Search == image.SearchBackendPath {
			places[b.Name] = manifest.LibDir + "/ggml-backend-path/" + b.Name
		}
	}
	return places
}

// backendsOf lists a server's ggml backends for the manifest, with the CPU backend ggml would
// load on t's CPU: it scores the variants as preflight does.
func backendsOf(s *image.Server, t *targets.Target, places map[string]string) (*manifest.GGML, error) {
	g := &manifest.GGML{CompiledDir: s.BackendDir}
	from := map[string]string{}
	for _, f := range s.Files {
		from[f.Name] = f.From
	}
	for _, f := range s.Files {
		if f.Link != "" {
			from[f.Name] = from[f.Link] // a backend the image reaches through a symbolic link
		}
	}
	var cpu []*preflight.Binary
	for _, b := range s.Backends {
		p := places[b.Name]
		g.Backends = append(g.Backends, manifest.GGMLBackend{Path: p, Backend: b.Backend, Variant: b.Variant, From: b.ImagePath, Search: b.Search})
		if b.Backend != "cpu" {
			continue
		}
		bin, err := readBackend(from[b.Name], p)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", b.ImagePath, err)
		}
		cpu = append(cpu, bin)
	}
	if len(cpu) > 0 {
		g.CPU = preflight.CPUBackendChoice(cpu, t.Host.CPU.FeatureSet()).Loaded
	}
	return g, nil
}

// readBackend reads a CPU backend's facts; a variant ggml's list does not name has its code
// decoded, which is how preflight estimates its options.
func readBackend(file, name string) (*preflight.Binary, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if preflight.KnownGGMLVariant(path.Base(name)) {
		return preflight.ReadBinaryFacts(name, f)
	}
	return preflight.ReadBinary(name, f)
}

// BuildOfPlan is the provenance of an llbuild image's server: the plan its labels carry.
func BuildOfPlan(raw []byte, version string) (manifest.Build, error) {
	var p pipeline.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return manifest.Build{}, fmt.Errorf("the plan in label %s: %w", image.LabelPlan, err)
	}
	plan, err := manifest.NewPlanJSON(raw)
	if err != nil {
		return manifest.Build{}, err
	}
	b := manifest.Build{
		Plan:     plan,
		PlanHash: p.Hash,
		Source:   manifest.Source{URL: p.Source.URL, Commit: p.Source.Commit},
		Patches:  []manifest.Patch{},
		Images:   []manifest.Image{},
		Builder:  manifest.Builder{Name: "llbuild", Version: version},
	}
	if p.Vendor != nil {
		b.Vendor = &manifest.Source{URL: p.Vendor.URL, Commit: p.Vendor.Commit}
	}
	var applied [][2]string
	for _, pt := range p.Patches {
		b.Patches = append(b.Patches, manifest.Patch{Name: pt.Name, SHA256: pt.SHA256})
		applied = append(applied, [2]string{pt.Name, pt.SHA256})
	}
	b.Series, b.Contract = patches.NameOf(applied), patches.Contract(applied)
	for _, im := range []struct {
		role string
		im   pipeline.Image
	}{{"devel", p.Images.Devel}, {"runtime", p.Images.Runtime}} {
		if im.im.Ref != "" {
			b.Images = append(b.Images, manifest.Image{Role: im.role, Ref: im.im.Ref, Digest: im.im.Digest})
		}
	}
	return b, nil
}

// OutputDir is the directory a bundle is written beside: -o's parent, else the archive's.
func OutputDir(out manifest.BundleOutput) string {
	p := out.Dir
	if p == "" {
		p = out.Archive
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Dir(p)
	}
	return filepath.Dir(abs)
}

// IsImageRef says ref names an image rather than a bundle: one of image.Open's prefixed forms,
// or, where no such path exists here, a reference with a tag or a registry host (ghcr.io/o/r,
// localhost:5000/r, repo:tag). Anything else is a bundle path, and a missing one says so when
// it is opened.
func IsImageRef(ref string) bool {
	for _, p := range []string{"oci-archive:", "oci-layout:", "docker-archive:"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	if _, err := os.Stat(ref); err == nil {
		return false
	}
	first, _, _ := strings.Cut(ref, "/")
	return strings.Contains(ref, ":") || strings.Contains(ref, "@") || strings.ContainsAny(first, ".:") && strings.Contains(ref, "/")
}
