// Package kjvtext gives tests a public-domain English text: the King James Version of the
// Bible from Debian's bible-kjv package (the bible command; scripts/test.sh installs it), as
// the Old Testament, to make models from, and the New Testament, held out to score them on.
package kjvtext

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/enginetest"
)

// ref is the verse reference bible -f starts each line with ("Ge1:1 ").
var ref = regexp.MustCompile(`(?m)^\S+ `)

// Files returns the two texts' files, made once under the test cache; without the bible
// command the test skips (fails under CI=true).
func Files(t testing.TB) (train, heldOut string) {
	t.Helper()
	if _, err := exec.LookPath("bible"); err != nil {
		enginetest.SkipUnlessCI(t, "the bible command (Debian's bible-kjv) is not installed: apt-get install bible-kjv (scripts/test.sh does)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "llbuild-test", "kjv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	train, heldOut = filepath.Join(dir, "old-testament.txt"), filepath.Join(dir, "new-testament.txt")
	for f, books := range map[string]string{train: "Gen1:1-Mal4:6", heldOut: "Mat1:1-Rev22:21"} {
		if _, err := os.Stat(f); err == nil {
			continue
		}
		out, err := exec.Command("bible", "-f", books).Output()
		if err != nil || len(out) < 100000 {
			t.Fatalf("bible -f %s: %v (%d bytes)", books, err, len(out))
		}
		if err := atomicfile.WriteFile(f, ref.ReplaceAll(out, nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return train, heldOut
}
