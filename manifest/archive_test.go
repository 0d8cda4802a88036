package manifest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// TestUnpackRefusesEntriesThroughLinks checks the second line of defence, used after
// verification in case the archive changed in between: entries under a link, links leading
// out and names that escape are refused while unpacking.
func TestUnpackRefusesEntriesThroughLinks(t *testing.T) {
	tests := []struct {
		name    string
		headers []tar.Header
		want    string
	}{
		{"entry under a link", []tar.Header{
			{Name: "lib/d", Typeflag: tar.TypeSymlink, Linkname: "../models"},
			{Name: "lib/d/evil", Typeflag: tar.TypeReg, Mode: 0o644},
		}, "passes through the link lib/d"},
		{"link out", []tar.Header{{Name: "lib/out", Typeflag: tar.TypeSymlink, Linkname: "../../.."}}, "outside the bundle"},
		{"dot-dot name", []tar.Header{{Name: "models/../../x", Typeflag: tar.TypeReg, Mode: 0o644}}, "escapes the bundle"},
		{"device", []tar.Header{{Name: "lib/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, "character device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for _, h := range tt.headers {
				tw.WriteHeader(&h)
			}
			tw.Close()
			zw.Close()
			archive := filepath.Join(dir, "a.tar.gz")
			os.WriteFile(archive, buf.Bytes(), 0o644)
			tmp := filepath.Join(dir, "tmp")
			os.Mkdir(tmp, 0o755)
			err := UnpackArchive(context.Background(), archive, tmp)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("UnpackArchive() = %v, want an error containing %q", err, tt.want)
			}
			if _, err := os.Lstat(filepath.Join(dir, "models")); err == nil {
				t.Error("something was written outside the unpack directory")
			}
		})
	}
}

// plan diff reads a bundle archive's manifest without the rest; what holds none is refused as
// the user's to mend.
func TestReadArchiveManifestNeedsAManifest(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "bin/x", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	gz.Close()
	name := filepath.Join(t.TempDir(), "not-a-bundle.tar.gz")
	os.WriteFile(name, buf.Bytes(), 0o644)
	if _, err := ReadArchiveManifest(name); !inputerr.Is(err) || !strings.Contains(err.Error(), "has no manifest.json") {
		t.Errorf("ReadArchiveManifest(an archive without a manifest) = %v, want an inputerr.Error saying so", err)
	}
	if _, err := ReadArchiveManifest(filepath.Join(t.TempDir(), "b.zip")); !inputerr.Is(err) {
		t.Errorf("ReadArchiveManifest(b.zip) = %v, want an inputerr.Error naming the suffixes", err)
	}
}
