package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/pipeline"
)

// SpecForms says which image specs Open takes, for usage messages.
const SpecForms = "a registry reference (registry/repo:tag or @sha256:...), oci-archive:FILE, oci-layout:DIR or docker-archive:FILE"

// Open opens the image spec names: "oci-archive:FILE" (a tar of an OCI layout: llbuild build
// --image-out FILE, skopeo copy ... oci-archive:FILE), "oci-layout:DIR", "docker-archive:FILE"
// (docker save) or a registry reference, read with the default keychain. An index is narrowed
// to Platform. Layers are read when the caller reads them; cleanup removes what Open unpacked
// (an archive's layout) and must be called once the image is no longer read.
func Open(ctx context.Context, spec string, opts ...remote.Option) (img v1.Image, cleanup func(), err error) {
	cleanup = func() {}
	defer func() { err = callersIfMissing(err) }()
	switch {
	case strings.HasPrefix(spec, "oci-layout:"):
		dir := strings.TrimPrefix(spec, "oci-layout:")
		img, err := fromLayout(dir, "OCI layout "+dir, pipeline.Image{})
		return img, cleanup, err
	case strings.HasPrefix(spec, "oci-archive:"):
		file := strings.TrimPrefix(spec, "oci-archive:")
		if _, err := os.Stat(file); err != nil {
			return nil, cleanup, fmt.Errorf("OCI archive: %w", err)
		}
		tmp, err := os.MkdirTemp("", "llbuild-image-")
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		if err := ocitar.Untar(file, tmp); err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("reading OCI archive %s: %w", file, err)
		}
		if _, err := os.Stat(filepath.Join(tmp, "index.json")); err != nil {
			cleanup()
			return nil, func() {}, inputerr.Errorf("%s is not an OCI archive (it holds no index.json): write one with llbuild build --image-out or skopeo copy ... oci-archive:FILE, or name docker save output docker-archive:FILE", file)
		}
		img, err := fromLayout(tmp, "OCI archive "+file, pipeline.Image{})
		if err != nil {
			cleanup()
			return nil, func() {}, err
		}
		return img, cleanup, nil
	case strings.HasPrefix(spec, "docker-archive:"):
		file := strings.TrimPrefix(spec, "docker-archive:")
		img, err := tarball.ImageFromPath(file, nil)
		if err != nil {
			return nil, cleanup, fmt.Errorf("reading docker archive %s (docker save output): %w", file, err)
		}
		return img, cleanup, nil
	}
	if _, err := os.Stat(spec); err == nil {
		return nil, cleanup, inputerr.Errorf("image %q is a file or directory here: say which it is, oci-archive:%s, oci-layout:%s or docker-archive:%s", spec, spec, spec, spec)
	} else if looksLikePath(spec) {
		return nil, cleanup, inputerr.Errorf("image %q: %w; a file is named oci-archive:FILE, oci-layout:DIR or docker-archive:FILE, a registry image registry/repo:tag", spec, err)
	}
	r, err := name.ParseReference(spec)
	if err != nil {
		return nil, cleanup, inputerr.Errorf("image %q is not %s: %w", redact(spec), SpecForms, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithPlatform(Platform), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	img, err = remote.Image(r, opts...)
	if err != nil {
		return nil, cleanup, fmt.Errorf("reading %s: %w", redact(spec), err)
	}
	return img, cleanup, nil
}

// callersIfMissing marks an error of a file or directory that is not there as the caller's
// mistake: an image named by a path that does not exist (exit 2 in the CLI, not 1).
func callersIfMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) && !inputerr.Is(err) {
		return &inputerr.Error{Err: err}
	}
	return err
}

// looksLikePath says whether spec, which names nothing here, was meant as a file: no registry
// reference starts with / or ., and none names a tar archive.
func looksLikePath(spec string) bool {
	return strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "~") ||
		strings.HasSuffix(spec, ".tar") || strings.HasSuffix(spec, ".tar.gz")
}
