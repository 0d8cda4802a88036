package bench

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/manifest"
)

// PatchesDir is the campaign's directory of patch files, each named by its sha256.
const PatchesDir = "patches"

// KeptPatch is one of a run's patches, kept in the campaign by its sha256.
type KeptPatch struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	// File is where its bytes are, relative to the campaign (patches/SHA256.patch); empty when
	// the bundle did not carry them (artifacts built before builds kept their patches, or a
	// server out of an image).
	File string `json:"file,omitempty"`
}

// keepPatches copies the bundle's patch files into the campaign, once per sha256, and lists the
// server's patches with where their bytes are. A patch it cannot keep is logged, not fatal: the
// run's figures do not depend on it.
func keepPatches(dir string, b *Bundle, log *slog.Logger) []KeptPatch {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := b.Manifest
	var kept []KeptPatch
	for _, p := range m.Build.Patches {
		sum := strings.TrimPrefix(p.SHA256, "sha256:")
		k := KeptPatch{Name: p.Name, SHA256: sum}
		f, ok := m.File(manifest.PatchesDir + "/" + p.Name)
		if ok && f.Kind == manifest.KindPatch && f.SHA256 == sum {
			rel := filepath.Join(PatchesDir, sum+".patch")
			if err := keepFile(filepath.Join(b.Dir, filepath.FromSlash(f.Path)), filepath.Join(dir, rel)); err != nil {
				log.Warn("keeping a patch in the campaign", "patch", p.Name, "err", err)
			} else {
				k.File = filepath.ToSlash(rel)
			}
		}
		kept = append(kept, k)
	}
	return kept
}

// keepFile puts src (a patch: small) at dst unless dst is there: a hard link where the
// filesystem allows, else a copy written whole (atomicfile), so that dst is never partial.
func keepFile(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, data, 0o644)
}
