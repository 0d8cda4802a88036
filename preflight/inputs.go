package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/llbuild/llbuild/internal/ocitar"
	"github.com/llbuild/llbuild/internal/walkroot"
	"github.com/llbuild/llbuild/manifest"
)

// IsLlamaFile reports whether a file name belongs to llama.cpp (ggml and llama libraries,
// llama-* programs). Only these have their code decoded when a bundle or image is checked:
// system libraries such as glibc carry AVX-512 code behind run-time CPU dispatch, which
// would read as failures.
func IsLlamaFile(p string) bool {
	base := path.Base(filepath.ToSlash(p))
	for _, pre := range []string{"libggml", "libllama", "libmtmd", "llama-", "llama.", "rpc-server"} {
		if strings.HasPrefix(base, pre) {
			return true
		}
	}
	return base == "llama" || base == "server"
}

func readPath(p, name string, decode bool) (*Binary, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", p, err)
	}
	defer f.Close()
	if decode {
		return ReadBinary(name, f)
	}
	return ReadBinaryFacts(name, f)
}

// ReadBinaryFacts reads an ELF file's libraries and kernels without decoding its code.
func ReadBinaryFacts(name string, r io.ReaderAt) (*Binary, error) {
	b, err := readBinary(name, r, false)
	return b, err
}

// MissingFileError says a bundle lacks an executable or library its manifest lists: its
// server would not start, which is a verdict (would fail), not a check that could not be made.
type MissingFileError struct{ Bundle, Path string }

func (e *MissingFileError) Error() string {
	return fmt.Sprintf("bundle %s would not start: its manifest lists %s, which is missing (llbuild verify %s lists every problem)", e.Bundle, e.Path, e.Bundle)
}

// ReadBundle reads the ELF files of a bundle directory: the executables and libraries its
// manifest.json lists, or, without a manifest that lists any, every ELF file under bin/ and
// lib/ (or the whole tree without those). Paths in the result are relative to dir.
func ReadBundle(ctx context.Context, dir string) ([]*Binary, error) {
	return readBundle(ctx, dir, IsLlamaFile, nil)
}

// readBundle is ReadBundle, decoding the code of the files decode says and, when keep is not
// nil, reading only the manifest's files it keeps.
func readBundle(ctx context.Context, dir string, decode func(string) bool, keep func(manifest.File) bool) ([]*Binary, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("reading bundle: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a bundle directory (unpack an archive first: llbuild verify ARCHIVE --extract DIR)", dir)
	}
	if f, err := os.Open(filepath.Join(dir, manifest.FileName)); err == nil {
		m, err := manifest.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s of bundle %s: %w", manifest.FileName, dir, err)
		}
		var out []*Binary
		for _, file := range m.Files {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if file.Link != "" || (file.Kind != manifest.KindExecutable && file.Kind != manifest.KindLibrary) || (keep != nil && !keep(file)) {
				continue
			}
			b, err := readPath(filepath.Join(dir, filepath.FromSlash(file.Path)), file.Path, decode(file.Path))
			if errors.Is(err, ErrNotELF) {
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &MissingFileError{Bundle: dir, Path: file.Path}
			}
			if err != nil {
				return nil, fmt.Errorf("reading bundle %s: %w", dir, err)
			}
			out = append(out, b)
		}
		if len(out) > 0 {
			sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
			// llbuild serve starts the server in the bundle's root; run through the bundle's
			// loader, the loader is what /proc/self/exe names.
			exeDir := func(b *Binary) string {
				if b.Path == m.Server.Executable && m.Server.Loader != "" {
					return path.Dir(m.Server.Loader)
				}
				return path.Dir(b.Path)
			}
			assignGGMLSearches(out, exeDir, ".", m.Server.Env["GGML_BACKEND_PATH"])
			return out, nil
		}
	}
	var roots []string
	for _, sub := range []string{"bin", "lib"} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err == nil && st.IsDir() {
			roots = append(roots, filepath.Join(dir, sub))
		}
	}
	if len(roots) == 0 {
		roots = []string{dir}
	}
	var out []*Binary
	for _, root := range roots {
		err := filepath.WalkDir(walkroot.Dir(root), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			b, err := readPath(p, rel, decode(rel))
			if errors.Is(err, ErrNotELF) {
				return nil
			}
			if err != nil {
				return err
			}
			out = append(out, b)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading bundle %s: %w", dir, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	assignGGMLSearches(out, func(b *Binary) string { return path.Dir(b.Path) }, ".", "")
	return out, nil
}

// searchLabel starts the GGMLSearch of the files a backend search found.
const searchLabel = "ggml backend search of "

// assignGGMLSearches marks the backends that ggml's loader (ggml_backend_load_best), started
// by each llama.cpp executable among bins, would find: files named exactly
// libggml-<backend>[-<variant>].so in the executable's directory (exeDir) or the working
// directory wd. ggml scores the CPU variants of both places together, so they get one
// GGMLSearch. Backends no search finds keep none and are scored per directory, as if that
// directory were the GGML_BACKEND_DIR compiled into libggml.so, which cannot be read off
// the files. The file GGML_BACKEND_PATH (envPath) names is loaded besides, unscored: it is
// marked GGMLForced.
func assignGGMLSearches(bins []*Binary, exeDir func(*Binary) string, wd, envPath string) {
	for _, exe := range bins {
		if !exe.Executable || !IsLlamaFile(exe.Path) || exe.GGMLSearch != "" {
			continue
		}
		dirs := []string{exeDir(exe)}
		if wd != dirs[0] {
			dirs = append(dirs, wd)
		}
		label := searchLabel + exe.Path + " (" + strings.Join(dirs, ", ") + ")"
		for _, b := range bins {
			if _, ok := ggmlBackendFile(path.Base(b.Path)); !ok || b.GGMLSearch != "" {
				continue
			}
			if d := path.Dir(b.Path); d == dirs[0] || d == wd {
				b.GGMLSearch = label
			}
		}
	}
	for _, b := range bins {
		if envPath != "" && b.Path == path.Clean(envPath) {
			b.GGMLForced = true
		}
	}
}

// ImageSource says where an image comes from.
type ImageSource struct {
	// Ref is a registry reference, read with the default keychain.
	Ref string
	// Archive is a `docker save` tarball, an OCI image layout directory or an OCI archive
	// (a tar of a layout, what llbuild build --image-out FILE writes).
	Archive string
	// Log is told when ReadImage starts reading the layers, which can be gigabytes; nil tells
	// no one.
	Log *slog.Logger
}

func (s ImageSource) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// ReadImageConfig reads an image's environment from its config alone: its layers are not
// fetched or read. NVIDIA_REQUIRE_CUDA is all the driver question needs; the instruction,
// library and kernel checks need the layers (ReadImage).
func ReadImageConfig(ctx context.Context, src ImageSource) (Input, error) {
	img, label, cleanup, err := openImage(ctx, src)
	if err != nil {
		return Input{}, err
	}
	defer cleanup()
	in := Input{Name: label, Env: map[string]string{}, Read: "the image's config only (--driver-only): the driver check; the instruction, library and kernel checks need its layers and were not made"}
	cfg, err := img.ConfigFile()
	if err != nil {
		return in, fmt.Errorf("reading the config of %s: %w", label, err)
	}
	for _, kv := range cfg.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		in.Env[k] = v
	}
	return in, nil
}

// ReadImage reads an image's environment and the ELF files of its flattened filesystem
// (whiteouts applied). llama.cpp's files (see IsLlamaFile) are decoded; the others are read
// for their libraries and kernels only if they are small, and skipped otherwise.
func ReadImage(ctx context.Context, src ImageSource) (Input, error) {
	img, label, cleanup, err := openImage(ctx, src)
	if err != nil {
		return Input{}, err
	}
	defer cleanup()
	in := Input{Name: label, Env: map[string]string{}}
	cfg, err := img.ConfigFile()
	if err != nil {
		return in, fmt.Errorf("reading the config of %s: %w", label, err)
	}
	for _, kv := range cfg.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		in.Env[k] = v
	}
	layers, err := img.Layers()
	if err != nil {
		return in, fmt.Errorf("reading the layers of %s: %w", label, err)
	}
	var size int64
	for _, l := range layers {
		if n, err := l.Size(); err == nil {
			size += n
		}
	}
	src.logger().Info("reading the image's layers for llama.cpp's files", "image", label, "layers", len(layers), "MiB", size>>20)
	err = walkFlattened(ctx, layers, func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg || h.Size < 64 || !IsLlamaFile(h.Name) {
			return nil
		}
		var head [4]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
		if !IsELF(head[:]) {
			return nil
		}
		data := make([]byte, h.Size)
		copy(data, head[:])
		if _, err := io.ReadFull(r, data[4:]); err != nil {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
		b, err := ReadBinary("/"+strings.TrimPrefix(path.Clean(h.Name), "/"), bytes.NewReader(data))
		if err != nil {
			return err
		}
		in.Binaries = append(in.Binaries, b)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return in, ctx.Err()
		}
		return in, fmt.Errorf("reading the layers of %s: %w", label, err)
	}
	wd := cfg.Config.WorkingDir
	if wd == "" {
		wd = "/"
	}
	assignGGMLSearches(in.Binaries, func(b *Binary) string { return path.Dir(b.Path) }, path.Clean(wd), in.Env["GGML_BACKEND_PATH"])
	return in, nil
}

// openImage opens the image src names. cleanup removes what it unpacked; call it once the
// image has been read.
func openImage(ctx context.Context, src ImageSource) (img v1.Image, label string, cleanup func(), err error) {
	cleanup = func() {}
	if src.Archive != "" {
		if st, err := os.Stat(src.Archive); err == nil && !st.IsDir() && isOCIArchive(src.Archive) {
			dir, err := os.MkdirTemp("", "llbuild-preflight-oci-")
			if err != nil {
				return nil, "", cleanup, err
			}
			cleanup = func() { os.RemoveAll(dir) }
			if err := ocitar.Untar(src.Archive, dir); err != nil {
				cleanup()
				return nil, "", func() {}, fmt.Errorf("reading OCI archive %s: %w", src.Archive, err)
			}
			img, err := imageFromLayout(dir, src.Archive)
			if err != nil {
				cleanup()
				return nil, "", func() {}, err
			}
			return img, src.Archive, cleanup, nil
		}
	}
	img, label, err = openImageSource(ctx, src)
	return img, label, cleanup, err
}

// isOCIArchive reports whether file is a tar holding an OCI layout's oci-layout file.
func isOCIArchive(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if path.Clean(h.Name) == "oci-layout" {
			return true
		}
	}
}

// imageFromLayout returns the first image of the OCI layout in dir; label names it in errors.
func imageFromLayout(dir, label string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", label, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", label, err)
	}
	for _, m := range im.Manifests {
		if m.MediaType.IsImage() {
			img, err := idx.Image(m.Digest)
			if err != nil {
				return nil, fmt.Errorf("reading image %s from %s: %w", m.Digest, label, err)
			}
			return img, nil
		}
	}
	return nil, fmt.Errorf("OCI layout %s holds no image manifest", label)
}

func openImageSource(ctx context.Context, src ImageSource) (v1.Image, string, error) {
	switch {
	case src.Ref != "" && src.Archive != "":
		return nil, "", errors.New("give an image reference or an archive, not both")
	case src.Ref != "":
		ref, err := name.ParseReference(src.Ref)
		if err != nil {
			return nil, "", fmt.Errorf("parsing image reference %q: %w", src.Ref, err)
		}
		img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
		if err != nil {
			return nil, "", fmt.Errorf("fetching image %s: %w", src.Ref, err)
		}
		return img, src.Ref, nil
	case src.Archive != "":
		st, err := os.Stat(src.Archive)
		if err != nil {
			return nil, "", fmt.Errorf("opening image archive: %w", err)
		}
		if st.IsDir() {
			img, err := imageFromLayout(src.Archive, src.Archive)
			return img, src.Archive, err
		}
		img, err := tarball.ImageFromPath(src.Archive, nil)
		if err != nil {
			return nil, "", fmt.Errorf("reading image archive %s (want `docker save` output, an OCI archive or an OCI layout directory): %w", src.Archive, err)
		}
		return img, src.Archive, nil
	}
	return nil, "", errors.New("no image given")
}
