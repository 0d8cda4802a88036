package preflight

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// ReadSources reads binaries and a bundle together into one input named after both.
func TestReadSourcesJoinsEveryInput(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "liba.so"), filepath.Join(dir, "libb.so")
	os.WriteFile(a, buildELF([]byte{0xc3}, nil, "liba.so"), 0o755)
	os.WriteFile(b, buildELF([]byte{0xc3}, nil, "libb.so"), 0o755)
	bundle := filepath.Join(dir, "bundle")
	os.MkdirAll(filepath.Join(bundle, "lib"), 0o755)
	os.WriteFile(filepath.Join(bundle, "lib", "libc.so"), buildELF([]byte{0xc3}, nil, "libc.so"), 0o755)

	in, err := ReadSources(context.Background(), Sources{Binaries: []string{a, b}, Bundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	// a directory without manifest.json is read as a build's artifacts, and the name says so
	if want := a + " " + b + " + " + bundle + " (no manifest.json: every ELF file under bin/ and lib/ read; not a bundle llbuild serve would start)"; in.Name != want {
		t.Errorf("ReadSources().Name = %q, want %q", in.Name, want)
	}
	os.WriteFile(filepath.Join(bundle, "manifest.json"), []byte("{}"), 0o644)
	if in, _ := ReadSources(context.Background(), Sources{Bundle: bundle}); in.Name != bundle {
		t.Errorf("ReadSources(a bundle with a manifest).Name = %q, want %q", in.Name, bundle)
	}
	if len(in.Binaries) != 3 || in.Env != nil {
		t.Errorf("ReadSources() = %d binaries, env %v; want 3 and no image environment", len(in.Binaries), in.Env)
	}
	if _, err := ReadSources(context.Background(), Sources{Binaries: []string{a, filepath.Join(dir, "missing.so")}}); err == nil {
		t.Error("ReadSources(a missing file) = nil error")
	}
	if (Sources{Image: ImageSource{Archive: "x.tar"}}).HasImage() != true || (Sources{Bundle: "b"}).HasImage() {
		t.Error("HasImage() does not say whether an image is named")
	}
}
