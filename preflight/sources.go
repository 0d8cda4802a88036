package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/manifest"
)

// Sources are the files a preflight reads: ELF files named one by one, a bundle's, an image's.
type Sources struct {
	Binaries []string
	Bundle   string
	Image    ImageSource
	// DriverOnly reads the image's config alone (its NVIDIA_REQUIRE_CUDA), not its layers.
	DriverOnly bool
}

// HasImage says whether an image is named, in a registry or as an archive.
func (s Sources) HasImage() bool { return s.Image.Ref != "" || s.Image.Archive != "" }

// ReadSources reads every file s names into one Input, named after all of them.
func ReadSources(ctx context.Context, s Sources) (Input, error) {
	var in Input
	var names []string
	if len(s.Binaries) > 0 {
		b, err := ReadFiles(ctx, s.Binaries)
		if err != nil {
			return in, err
		}
		in.Binaries = append(in.Binaries, b...)
		names = append(names, strings.Join(s.Binaries, " "))
	}
	if s.Bundle != "" {
		b, err := ReadBundle(ctx, s.Bundle)
		if err != nil {
			return in, err
		}
		in.Binaries = append(in.Binaries, b...)
		name := s.Bundle
		if _, err := os.Stat(filepath.Join(s.Bundle, manifest.FileName)); err != nil {
			// a build's artifacts, or a bundle that lost its manifest: what was read, said
			name += " (no " + manifest.FileName + ": every ELF file under bin/ and lib/ read; not a bundle llbuild serve would start)"
		}
		names = append(names, name)
	}
	if s.HasImage() {
		read := ReadImage
		if s.DriverOnly {
			read = ReadImageConfig
		}
		img, err := read(ctx, s.Image)
		if err != nil {
			return in, err
		}
		in.Binaries = append(in.Binaries, img.Binaries...)
		in.Env = img.Env
		in.Read = img.Read
		names = append(names, img.Name)
	}
	in.Name = strings.Join(names, " + ")
	return in, nil
}
