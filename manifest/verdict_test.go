package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyPathSaysSoundOrListsProblems(t *testing.T) {
	m, contents := sample(t)
	dir := writeBundle(t, m, contents)
	v, err := VerifyPath(dir, true)
	if err != nil || !v.OK || v.Problems == nil || len(v.Problems) != 0 {
		t.Fatalf("VerifyPath(sound) = %+v, %v; want OK with no problems", v, err)
	}
	if b, _ := json.Marshal(v); !strings.Contains(string(b), `"problems":[]`) {
		t.Errorf("JSON of a sound verdict = %s, want problems []", b)
	}
	if err := VerifyError(dir, "b"); err != nil {
		t.Errorf("VerifyError(sound) = %v, want nil", err)
	}

	os.Remove(filepath.Join(dir, "lib/libllama.so.0.1"))
	v, err = VerifyPath(dir, true)
	if err != nil || v.OK || len(v.Problems) == 0 {
		t.Fatalf("VerifyPath(missing library) = %+v, %v; want problems", v, err)
	}
	var out strings.Builder
	if err := v.WriteProblems(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "lib/libllama.so.0.1: is missing\n") {
		t.Errorf("WriteProblems() = %q, want the missing library on a line", out.String())
	}
	err = VerifyError(dir, "b")
	if err == nil || !strings.HasPrefix(err.Error(), "bundle b does not verify:\n  ") || !strings.Contains(err.Error(), "lib/libllama.so.0.1: is missing") {
		t.Errorf("VerifyError(missing library) = %v, want the bundle named and the problem listed", err)
	}
}

func TestVerifyPathRefusesWhatIsNoArchive(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bundle.zip")
	os.WriteFile(f, []byte("PK"), 0o644)
	if v, err := VerifyPath(f, false); err == nil {
		t.Errorf("VerifyPath(%s) = %+v, want an error for a compression it does not read", f, v)
	}
}
