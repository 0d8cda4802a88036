package ocitar

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"
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
