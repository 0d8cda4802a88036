package patches

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/llbuild/llbuild/internal/enginetest"
)

var patchedFile = regexp.MustCompile(`(?m)^(?:---|\+\+\+) [ab]/(\S+)`)

// TestSeriesAppliesToPinnedCommit applies the built-in series in order, then the candidates of
// candidates/ in name order (patches waiting for the measurement that lets them in), each patch
// checked with git apply --check first, to the files it touches copied from the recipe's pinned
// llama.cpp: the run fails the moment a patch stops applying.
func TestSeriesAppliesToPinnedCommit(t *testing.T) {
	src := enginetest.LlamaSource(t)
	series, err := Series()
	if err != nil {
		t.Fatal(err)
	}
	candidates, err := filepath.Glob(filepath.Join("candidates", "*.patch"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range candidates {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		series = append(series, Patch{Name: filepath.Base(f), Data: b})
	}
	dir := t.TempDir()
	for _, p := range series {
		for _, m := range patchedFile.FindAllStringSubmatch(string(p.Data), -1) {
			rel := m[1]
			dst := filepath.Join(dir, rel)
			if _, err := os.Stat(dst); err == nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join(src, rel))
			if os.IsNotExist(err) {
				continue // a file the patch creates
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range series {
		file := filepath.Join(t.TempDir(), p.Name)
		if err := os.WriteFile(file, p.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"apply", "--check", "--whitespace=nowarn", file}, {"apply", "--whitespace=nowarn", file}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s does not apply to %s after the patches before it: git %v: %v\n%s", p.Name, src, args[:len(args)-1], err, out)
			}
		}
	}
}
