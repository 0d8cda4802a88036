package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/pipeline"
)

// Labels llbuild adds beside the plan's runtime labels (see pipeline.ImageLabels).
const (
	LabelPlanHash = pipeline.LabelPlanHash
	LabelVersion  = pipeline.LabelVersion
	LabelPlan     = pipeline.LabelPlan
	LabelSeries   = pipeline.LabelSeries
	LabelContract = pipeline.LabelContract
	LabelRef      = pipeline.LabelRef
)

// Platform is what runtime images are built for.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// PlanOf reads the resolved plan recorded in an artifact directory's provenance.
func PlanOf(a *artifacts.Artifacts) (*pipeline.Plan, error) {
	var p pipeline.Plan
	if err := json.Unmarshal(a.Provenance.Plan, &p); err != nil {
		return nil, fmt.Errorf("%s: reading the plan from %s: %w", a.Dir, artifacts.ProvenanceFile, err)
	}
	if p.Hash != a.Manifest.PlanHash {
		return nil, fmt.Errorf("%s: the plan in %s has hash %s, the artifacts say %s", a.Dir, artifacts.ProvenanceFile, p.Hash, a.Manifest.PlanHash)
	}
	return &p, nil
}

// Assemble builds the runtime image: base, plus one layer holding the artifacts'
// executables and libraries at the plan's AppDir, plus the plan's entrypoint, environment,
// labels and healthcheck. The result depends only on the base and the artifacts' bytes.
func Assemble(base v1.Image, a *artifacts.Artifacts) (v1.Image, error) {
	p, err := PlanOf(a)
	if err != nil {
		return nil, err
	}
	epoch, err := sourceDateEpoch(p)
	if err != nil {
		return nil, err
	}
	mt, err := base.MediaType()
	if err != nil {
		return nil, fmt.Errorf("reading the base image: %w", err)
	}
	layerType := types.OCILayer
	if mt == types.DockerManifestSchema2 {
		layerType = types.DockerLayer
	}
	tarBytes, err := layerTar(a, p.Runtime.AppDir, epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(layerType), tarball.WithCompressionLevel(6))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: epoch}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: layerType,
		History: v1.History{
			Created:   created,
			CreatedBy: fmt.Sprintf("llbuild server --target %s (plan %s)", p.Target, p.ShortHash()),
			Comment:   "llama-server and its libraries",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.Config.DeepCopy()
	cfg.Env = mergeEnv(cfg.Env, p.Runtime.Env)
	cfg.Entrypoint = append([]string(nil), p.Runtime.Entrypoint...)
	cfg.Cmd = nil
	cfg.WorkingDir = p.Runtime.AppDir
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	for k, v := range p.ImageLabels() {
		cfg.Labels[k] = v
	}
	var plan bytes.Buffer
	if err := json.Compact(&plan, a.Provenance.Plan); err != nil {
		return nil, fmt.Errorf("%s: the plan in %s: %w", a.Dir, artifacts.ProvenanceFile, err)
	}
	cfg.Labels[LabelPlan] = plan.String()
	prov := a.Provenance.Builder
	cfg.Labels[LabelVersion] = prov.Version
	if len(p.Runtime.Healthcheck) > 0 {
		cfg.Healthcheck = &v1.HealthConfig{
			Test:        append([]string(nil), p.Runtime.Healthcheck...),
			Interval:    30 * time.Second,
			Timeout:     5 * time.Second,
			StartPeriod: 60 * time.Second,
			Retries:     3,
		}
	}
	if port := p.Runtime.Env["LLAMA_ARG_PORT"]; port != "" {
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		cfg.ExposedPorts[port+"/tcp"] = struct{}{}
	}
	if img, err = mutate.Config(img, *cfg); err != nil {
		return nil, err
	}
	if img, err = mutate.CreatedAt(img, created); err != nil {
		return nil, err
	}
	anns := map[string]string{
		"org.opencontainers.image.base.name": p.Images.Runtime.Ref,
		"org.opencontainers.image.created":   p.Runtime.Labels["org.opencontainers.image.created"],
		"org.opencontainers.image.revision":  p.Source.Commit,
		"org.opencontainers.image.source":    p.Source.URL,
		"io.llbuild.plan-hash":               p.Hash,
	}
	if d, err := base.Digest(); err == nil {
		anns["org.opencontainers.image.base.digest"] = d.String()
	}
	if mt != types.DockerManifestSchema2 { // Docker manifests carry no annotations
		img = mutate.Annotations(img, anns).(v1.Image)
	}
	// Serve the manifest as the bytes it serialises to: mutate's in-memory descriptors can
	// differ from them in empty fields, which validation rightly flags.
	return materialize(img)
}

func sourceDateEpoch(p *pipeline.Plan) (time.Time, error) {
	t, err := pipeline.ParseSourceDateEpoch(p.Env["SOURCE_DATE_EPOCH"])
	if err != nil {
		return time.Time{}, fmt.Errorf("plan %s: %w", p.ShortHash(), err)
	}
	return t, nil
}

// mergeEnv overrides base's KEY=VALUE entries with env, keeping base's order and adding
// new keys in sorted order.
func mergeEnv(base []string, env map[string]string) []string {
	var out []string
	done := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := env[k]; ok {
			out = append(out, k+"="+v)
			done[k] = true
			continue
		}
		out = append(out, kv)
	}
	for _, kv := range pipeline.SortedEnv(env) {
		k, _, _ := strings.Cut(kv, "=")
		if !done[k] {
			out = append(out, kv)
		}
	}
	return out
}

// layerTar is the one tar writer: sorted entries, parent directories first, fixed modes,
// uid/gid 0 with no names, every time the epoch.
func layerTar(a *artifacts.Artifacts, appDir string, epoch time.Time) ([]byte, error) {
	dir := strings.Trim(path.Clean("/"+appDir), "/")
	if dir == "" {
		return nil, fmt.Errorf("runtime app dir %q is the root", appDir)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(h *tar.Header) *tar.Header {
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if len(h.Name) < 100 && len(h.Linkname) < 100 {
			h.Format = tar.FormatUSTAR
		}
		return h
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		if err := tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i+1], "/") + "/", Mode: 0o755})); err != nil {
			return nil, err
		}
	}
	files := append([]artifacts.File(nil), a.Manifest.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if f.Kind != artifacts.KindExecutable && f.Kind != artifacts.KindLibrary {
			continue
		}
		if strings.Contains(f.Path, "/") {
			return nil, fmt.Errorf("artifact %s is in a subdirectory; runtime images hold a flat app directory", f.Path)
		}
		name := dir + "/" + f.Path
		if f.Link != "" {
			if err := tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Link, Mode: 0o777})); err != nil {
				return nil, err
			}
			continue
		}
		b, err := os.ReadFile(a.Path(f))
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(b)), Mode: 0o755})); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LoadBase loads the runtime base image that want names. spec overrides where it comes from:
// LocalPath is the file or directory an image spec on this machine names ("oci-archive:FILE",
// "oci-layout:DIR"), and whether spec is one; a registry reference is not.
func LocalPath(spec string) (string, bool) {
	for _, kind := range []string{"oci-archive:", "oci-layout:"} {
		if p, ok := strings.CutPrefix(spec, kind); ok {
			return p, true
		}
	}
	return "", false
}

// "" (the registry of want.Ref), "oci-layout:DIR", "oci-archive:FILE" (a tar of an OCI
// layout) or another image reference (a mirror). Whatever the source, the image must have
// want's digest, as an image or as the index it is picked from for Platform.
func LoadBase(ctx context.Context, spec string, want pipeline.Image, opts ...remote.Option) (v1.Image, error) {
	if want.Digest == "" && spec == "" {
		return nil, fmt.Errorf("runtime base %s has no digest: pin it, or pass --base runtime=...", want.Ref)
	}
	switch {
	case strings.HasPrefix(spec, "oci-layout:"):
		dir := strings.TrimPrefix(spec, "oci-layout:")
		return fromLayout(dir, "OCI layout "+dir, want)
	case strings.HasPrefix(spec, "oci-archive:"):
		tmp, err := os.MkdirTemp("", "llbuild-oci-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		file := strings.TrimPrefix(spec, "oci-archive:")
		if err := ocitar.Untar(file, tmp); err != nil {
			return nil, fmt.Errorf("reading OCI archive %s: %w", file, err)
		}
		img, err := fromLayout(tmp, "OCI archive "+file, want)
		if err != nil {
			return nil, err
		}
		// Read everything now: the layout's directory goes away on return.
		return materialize(img)
	}
	ref := spec
	if ref == "" {
		ref = want.Repository + "@" + want.Digest
	} else if want.Digest != "" && !strings.Contains(ref, "@") {
		ref += "@" + want.Digest
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("runtime base %q: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithPlatform(Platform), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	img, err := remote.Image(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("pulling runtime base %s: %w (offline? pass --base runtime=oci-archive:FILE)", redact(ref), err)
	}
	return img, nil
}

// fromLayout picks want from the OCI layout in dir; what names where the layout came from (the
// archive the user gave, not the directory it was unpacked into).
func fromLayout(dir, what string, want pipeline.Image) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var available []string
	for _, d := range m.Manifests {
		available = append(available, d.Digest.String())
		if want.Digest != "" && d.Digest.String() != want.Digest {
			continue
		}
		if want.Digest == "" && len(m.Manifests) != 1 {
			return nil, fmt.Errorf("%s holds %d images and the plan pins no digest to pick one", what, len(m.Manifests))
		}
		switch {
		case d.MediaType.IsImage():
			return idx.Image(d.Digest)
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			return pickPlatform(child)
		}
	}
	return nil, fmt.Errorf("%s does not hold the plan's runtime base %s@%s (it holds %s): give an archive of that image (skopeo copy docker://%s@%s oci-archive:FILE, or crane pull --format=oci), or build for a target whose build.images.runtime names the image you have",
		what, want.Repository, want.Digest, strings.Join(available, ", "), want.Repository, want.Digest)
}

func pickPlatform(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(Platform) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the base image index has no %s/%s image", Platform.OS, Platform.Architecture)
}

// materialize copies img into memory so it outlives the files it was read from.
func materialize(img v1.Image) (v1.Image, error) {
	m := &memImage{blobs: map[v1.Hash][]byte{}}
	var err error
	if m.manifest, err = img.RawManifest(); err != nil {
		return nil, err
	}
	if m.config, err = img.RawConfigFile(); err != nil {
		return nil, err
	}
	if m.mediaType, err = img.MediaType(); err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		m.blobs[d] = b
	}
	return partial.CompressedToImage(m)
}

// memImage is an image held in memory, byte for byte as it was read.
type memImage struct {
	manifest, config []byte
	mediaType        types.MediaType
	blobs            map[v1.Hash][]byte
}

func (m *memImage) RawConfigFile() ([]byte, error)      { return m.config, nil }
func (m *memImage) MediaType() (types.MediaType, error) { return m.mediaType, nil }
func (m *memImage) RawManifest() ([]byte, error)        { return m.manifest, nil }
func (m *memImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	b, ok := m.blobs[h]
	if !ok {
		return nil, fmt.Errorf("blob %s not found", h)
	}
	mf, err := v1.ParseManifest(bytes.NewReader(m.manifest))
	if err != nil {
		return nil, err
	}
	for _, l := range mf.Layers {
		if l.Digest == h {
			return &memLayer{desc: l, b: b}, nil
		}
	}
	return nil, fmt.Errorf("blob %s is not a layer", h)
}

type memLayer struct {
	desc v1.Descriptor
	b    []byte
}

func (l *memLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *memLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *memLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l *memLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.b)), nil
}

// WriteOption is an option of WriteOCI.
type WriteOption func(*writeOptions)

type writeOptions struct{ progress *Progress }

// Counting has WriteOCI count its bytes in p.
func Counting(p *Progress) WriteOption { return func(o *writeOptions) { o.progress = p } }

// WriteOCI writes img to dst: an OCI layout when dst ends in a slash or is an existing
// directory, otherwise an OCI archive (a tar of an OCI layout, as skopeo's oci-archive: and
// docker load read). The archive is written to a temporary file and renamed into place.
func WriteOCI(dst string, img v1.Image, ref string, opts ...WriteOption) error {
	var o writeOptions
	for _, opt := range opts {
		opt(&o)
	}
	anns := map[string]string{}
	if ref != "" {
		anns["org.opencontainers.image.ref.name"] = ref
	}
	var size int64
	appendImage := func(p layout.Path) error {
		if o.progress != nil {
			// The blobs go first through an image whose layers count their bytes;
			// AppendImage then finds them written and adds the index entry.
			var err error
			if size, err = blobsSize(img); err != nil {
				return err
			}
			o.progress.begin(PhaseLayout, size)
			if err := p.WriteImage(countedImage{img, o.progress}); err != nil {
				return err
			}
		}
		return p.AppendImage(img, layout.WithAnnotations(anns))
	}
	if fi, err := os.Stat(dst); strings.HasSuffix(dst, "/") || (err == nil && fi.IsDir()) {
		p, err := layout.Write(dst, empty.Index)
		if err != nil {
			return err
		}
		if err := appendImage(p); err != nil {
			return err
		}
		o.progress.finish(size)
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".llbuild-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := appendImage(p); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".llbuild-oci-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := tarDir(tmp, f, o.progress); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return err
	}
	o.progress.finish(fi.Size())
	return nil
}

// tarDir writes dir as a deterministic tar: sorted, epoch zero times, uid/gid 0. progress,
// if set, counts the tar's bytes, of about the files' total.
func tarDir(dir string, w io.Writer, progress *Progress) error {
	var names []string
	var total int64
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		if fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	if progress != nil {
		progress.begin(PhaseArchive, total)
		w = countingWriter{w, progress}
	}
	tw := tar.NewWriter(w)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// Push writes img to every ref; the blobs go up once and later refs only add tags.
func Push(ctx context.Context, img v1.Image, refs []string, opts ...remote.Option) error {
	return PushCounting(ctx, img, refs, nil, opts...)
}

// PushCounting is Push counting the bytes uploaded to each ref in p (nil: Push).
func PushCounting(ctx context.Context, img v1.Image, refs []string, p *Progress, opts ...remote.Option) error {
	opts = pushOptions(ctx, opts)
	for _, r := range refs {
		ref, err := name.ParseReference(r)
		if err != nil {
			return fmt.Errorf("--push %q: %w", redact(r), err)
		}
		o := opts
		var counted chan struct{}
		if p != nil {
			// The registry client closes updates when the write ends: one channel per ref.
			updates, c := make(chan v1.Update, 16), make(chan struct{})
			p.begin(PhasePush, 0)
			go func() {
				defer close(c)
				for u := range updates {
					p.total.Store(u.Total)
					p.done.Store(u.Complete)
				}
			}()
			o, counted = append(o[:len(o):len(o)], remote.WithProgress(updates)), c
		}
		if err := remote.Write(ref, img, o...); err != nil {
			// not waiting for counted: the client does not close updates when it refuses
			// its options
			return fmt.Errorf("pushing %s: %w", redact(r), err)
		}
		if counted != nil {
			<-counted
		}
	}
	if p != nil {
		_, done, _ := p.Load()
		p.finish(done)
	}
	return nil
}

// PushLayer uploads one layer to repo, unless the registry has it already, with the
// options and credentials Push uses.
func PushLayer(ctx context.Context, repo name.Repository, l v1.Layer, opts ...remote.Option) error {
	return remote.WriteLayer(repo, l, pushOptions(ctx, opts)...)
}

// pushOptions are the registry options of a push: ctx, the Docker config's credentials,
// then opts (which may override them).
func pushOptions(ctx context.Context, opts []remote.Option) []remote.Option {
	return append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
}

// redact drops credentials from a URL-like reference.
func redact(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.Index(rest, "@"); at >= 0 && !strings.Contains(rest[:at], "/") {
			return s[:i+3] + "REDACTED@" + rest[at+1:]
		}
	}
	return s
}
