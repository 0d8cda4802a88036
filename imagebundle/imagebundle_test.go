package imagebundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsImageRefTellsAnImageFromABundle(t *testing.T) {
	dir := t.TempDir()
	// A path that exists is a bundle even where its name could be a reference.
	tagged := filepath.Join(dir, "today:v1")
	if err := os.Mkdir(tagged, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref   string
		image bool
	}{
		{"ghcr.io/you/llama-server:olares-one", true},
		{"localhost:5000/llama-server", true},
		{"127.0.0.1:34567/llbuild/llama-server:cpu-v3", true},
		{"ghcr.io/you/llama-server@sha256:" + strings.Repeat("a", 64), true},
		{"oci-archive:today.oci.tar", true},
		{"oci-layout:" + dir, true},
		{"today", false},
		{"gate/today", false},
		{dir, false},
		{tagged, false},
	} {
		if got := IsImageRef(tc.ref); got != tc.image {
			t.Errorf("IsImageRef(%q) = %v, want %v", tc.ref, got, tc.image)
		}
	}
}
