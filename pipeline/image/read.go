package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/pipeline"
)

// maxMetadataSize bounds a manifest, index or config read out of an OCI archive.
const maxMetadataSize = 8 << 20

// ReadConfig reads the config of the image spec names without fetching its layers: spec is
// "oci-archive:FILE" (a tar of an OCI layout, as --image-out FILE writes), "oci-layout:DIR"
// (--image-out DIR/) or an image reference (registry/repo:tag or registry/repo@sha256:...).
// An archive or layout must hold one image, or one index from which Platform's is taken.
func ReadConfig(ctx context.Context, spec string, opts ...remote.Option) (cf *v1.ConfigFile, err error) {
	defer func() { err = callersIfMissing(err) }()
	switch {
	case strings.HasPrefix(spec, "oci-archive:"):
		return archiveConfig(strings.TrimPrefix(spec, "oci-archive:"))
	case strings.HasPrefix(spec, "oci-layout:"):
		dir := strings.TrimPrefix(spec, "oci-layout:")
		img, err := fromLayout(dir, "OCI layout "+dir, pipeline.Image{})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("OCI layout %s: reading the image config: %w", dir, err)
		}
		return cf, nil
	}
	r, err := name.ParseReference(spec)
	if err != nil {
		return nil, inputerr.Errorf("image reference %q: %w", redact(spec), err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithPlatform(Platform), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	img, err := remote.Image(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", redact(spec), err)
	}
	cf, err = img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config of %s: %w", redact(spec), err)
	}
	return cf, nil
}

// archiveConfig reads index.json, the manifest and the config out of an OCI archive and
// skips the layers: an image's plan is in its config, and its layers can be gigabytes.
func archiveConfig(file string) (*v1.ConfigFile, error) {
	idx, err := ocitar.IndexManifest(file)
	if err != nil {
		return nil, err
	}
	if len(idx.Manifests) != 1 {
		return nil, fmt.Errorf("OCI archive %s holds %d images, want 1", file, len(idx.Manifests))
	}
	desc := idx.Manifests[0]
	if desc.MediaType.IsIndex() {
		b, err := ocitar.ReadBlob(file, desc.Digest, maxMetadataSize)
		if err != nil {
			return nil, err
		}
		child, err := v1.ParseIndexManifest(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("OCI archive %s: index %s: %w", file, desc.Digest, err)
		}
		found := false
		for _, d := range child.Manifests {
			if d.Platform != nil && d.Platform.Satisfies(Platform) {
				desc, found = d, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("OCI archive %s: its index has no %s/%s image", file, Platform.OS, Platform.Architecture)
		}
	}
	if !desc.MediaType.IsImage() {
		return nil, fmt.Errorf("OCI archive %s holds a %s, not an image", file, desc.MediaType)
	}
	b, err := ocitar.ReadBlob(file, desc.Digest, maxMetadataSize)
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("OCI archive %s: manifest %s: %w", file, desc.Digest, err)
	}
	if b, err = ocitar.ReadBlob(file, m.Config.Digest, maxMetadataSize); err != nil {
		return nil, err
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("OCI archive %s: config %s: %w", file, m.Config.Digest, err)
	}
	return cf, nil
}

// RecordedPlan returns the plan JSON an image's config records in its LabelPlan label,
// checked against its LabelPlanHash label. An image that records only the hash (built by an
// llbuild from before LabelPlan) gets an error that says so, names the hash and what to do.
func RecordedPlan(cf *v1.ConfigFile) ([]byte, error) {
	labels := cf.Config.Labels
	hash, plan := labels[LabelPlanHash], labels[LabelPlan]
	switch {
	case plan == "" && hash == "":
		return nil, fmt.Errorf("not an image llbuild built: its config has neither a %s nor a %s label", LabelPlan, LabelPlanHash)
	case plan == "":
		built := "an earlier llbuild"
		if v := labels[LabelVersion]; v != "" {
			built = "llbuild " + v
		}
		return nil, fmt.Errorf("the image records only its plan's hash %s (label %s), not the plan: %s built it, before images carried the %s label; "+
			"diff against that build's artifact directory or provenance.json instead, or rebuild the image with this llbuild", hash, LabelPlanHash, built, LabelPlan)
	}
	var probe struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(plan), &probe); err != nil {
		return nil, fmt.Errorf("label %s is not a plan: %w", LabelPlan, err)
	}
	if probe.Hash != hash {
		return nil, fmt.Errorf("label %s holds plan %s, but label %s says %s", LabelPlan, probe.Hash, LabelPlanHash, hash)
	}
	return []byte(plan), nil
}
