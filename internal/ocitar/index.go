package ocitar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// IndexManifest reads the index.json of an OCI archive (a tar of an OCI layout) without
// unpacking its blobs.
func IndexManifest(file string) (*v1.IndexManifest, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// tar.Reader seeks over the blobs: an os.File is an io.Seeker.
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no index.json: it is not an OCI archive", file)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if path.Clean(h.Name) == "index.json" && h.Typeflag == tar.TypeReg {
			m, err := v1.ParseIndexManifest(tr)
			if err != nil {
				return nil, fmt.Errorf("%s: index.json: %w", file, err)
			}
			return m, nil
		}
	}
}

// LayoutIndexManifest reads the index.json of an OCI layout directory.
func LayoutIndexManifest(dir string) (*v1.IndexManifest, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	return idx.IndexManifest()
}

// OnlyDigest returns the digest of the one image (or image index) m lists, as an image
// reference's @sha256:... names it. An archive of several images is ambiguous: an engine
// importing it would have to pick one.
func OnlyDigest(m *v1.IndexManifest) (string, error) {
	if len(m.Manifests) != 1 {
		return "", fmt.Errorf("it holds %d images, want exactly 1", len(m.Manifests))
	}
	return m.Manifests[0].Digest.String(), nil
}
