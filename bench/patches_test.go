package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/manifest"
)

// A run keeps the patches its bundle carries in the campaign by sha256, once however many runs
// use them, and lists one it has no bytes for without a file.
func TestKeepPatchesByDigest(t *testing.T) {
	bdir, camp := t.TempDir(), t.TempDir()
	data := []byte("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	sum := sha256.Sum256(data)
	hexsum := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(bdir, "patches"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "patches", "0001-x.patch"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{
		Build: manifest.Build{Patches: []manifest.Patch{{Name: "0001-x.patch", SHA256: hexsum}, {Name: "0002-y.patch", SHA256: "sha256:" + hexsum[:63] + "0"}}},
		Files: []manifest.File{{Path: "patches/0001-x.patch", Kind: manifest.KindPatch, Size: int64(len(data)), SHA256: hexsum}},
	}
	b := &Bundle{Dir: bdir, Manifest: m}
	for i := 0; i < 2; i++ {
		kept := keepPatches(camp, b, nil)
		if len(kept) != 2 || kept[0].File != "patches/"+hexsum+".patch" || kept[1].File != "" || kept[1].Name != "0002-y.patch" {
			t.Fatalf("run %d: kept %+v, want 0001 kept by digest and 0002 without bytes", i, kept)
		}
	}
	got, err := os.ReadFile(filepath.Join(camp, "patches", hexsum+".patch"))
	if err != nil || string(got) != string(data) {
		t.Errorf("campaign's copy = %q (%v), want the patch's bytes", got, err)
	}
	entries, _ := os.ReadDir(filepath.Join(camp, "patches"))
	if len(entries) != 1 {
		t.Errorf("campaign patches/ holds %d entries, want 1", len(entries))
	}
}
