package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/gguf"
)

// TestBundleOfAMissingImageIsUsage: an --image that names a file or directory that is not
// there is something named that is not there, exit 2 as the README's table says, in each form.
func TestBundleOfAMissingImageIsUsage(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.TinyOptions{}); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nonexistent")
	for _, spec := range []string{"oci-archive:" + missing, "oci-layout:" + missing, "docker-archive:" + missing, missing + ".tar"} {
		code, _, stderr := runCLI(t, "bundle", "-t", "cpu-v3", "--model", model, "--image", spec, "-o", filepath.Join(dir, "out", "b"))
		if code != 2 || !strings.Contains(stderr, "nonexistent") {
			t.Errorf("bundle --image %s = exit %d, stderr %q; want exit 2 naming the path", spec, code, stderr)
		}
	}
}
