package ocitar

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func writeTar(t *testing.T, entries map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for name, body := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	f.Close()
	return p
}

func TestUntar(t *testing.T) {
	dst := t.TempDir()
	if err := Untar(writeTar(t, map[string]string{"oci-layout": "{}", "blobs/sha256/ab": "x"}), dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "blobs/sha256/ab")); err != nil || string(b) != "x" {
		t.Errorf("Untar() wrote %q, %v", b, err)
	}
	out := t.TempDir()
	if err := Untar(writeTar(t, map[string]string{"../escape": "x"}), filepath.Join(out, "d")); err == nil {
		t.Error("Untar() accepted an entry leaving the archive")
	}
	if _, err := os.Stat(filepath.Join(out, "escape")); !os.IsNotExist(err) {
		t.Error("an escaping entry was written")
	}
}

func TestReadBlobChecksDigestAndSize(t *testing.T) {
	d, _, _ := v1.SHA256(strings.NewReader("config"))
	other, _, _ := v1.SHA256(strings.NewReader("other"))
	file := writeTar(t, map[string]string{
		"index.json":                "{}",
		"blobs/sha256/" + d.Hex:     "config",
		"blobs/sha256/" + other.Hex: "tampered",
	})
	if b, err := ReadBlob(file, d, 100); err != nil || string(b) != "config" {
		t.Errorf("ReadBlob() = %q, %v; want \"config\"", b, err)
	}
	if _, err := ReadBlob(file, d, 3); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("ReadBlob(max 3) = %v, want a refusal of a blob over the limit", err)
	}
	if _, err := ReadBlob(file, other, 100); err == nil || !strings.Contains(err.Error(), "holds bytes of digest") {
		t.Errorf("ReadBlob(tampered) = %v, want a digest mismatch", err)
	}
	missing, _, _ := v1.SHA256(strings.NewReader("missing"))
	if _, err := ReadBlob(file, missing, 100); err == nil || !strings.Contains(err.Error(), "has no blob") {
		t.Errorf("ReadBlob(missing) = %v, want 'has no blob'", err)
	}
}
