package ocitar

import (
	"archive/tar"
	"bytes"
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

// ReadBlob reads the blob d of an OCI archive without unpacking the others, refusing one
// larger than max bytes (manifests and configs are small; layers are not read this way) and
// one whose bytes do not have digest d.
func ReadBlob(file string, d v1.Hash, max int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := path.Join("blobs", d.Algorithm, d.Hex)
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no blob %s", file, d)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if path.Clean(h.Name) != want || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > max {
			return nil, fmt.Errorf("%s: blob %s is %d bytes, more than the %d expected", file, d, h.Size, max)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		got, _, err := v1.SHA256(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if got != d {
			return nil, fmt.Errorf("%s: blob %s holds bytes of digest %s", file, d, got)
		}
		return b, nil
	}
}
