package patches

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
)

func TestByNameReadsNamedSeriesAndFiles(t *testing.T) {
	all, err := Series()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", SeriesScoring} {
		if s, err := ByName(name); err != nil || len(s) != len(all) {
			t.Errorf("ByName(%q) = %d patches, %v; want the built-in %d", name, len(s), err, len(all))
		}
	}
	if s, err := ByName(SeriesPlain); err != nil || len(s) != 1 || s[0].Name != BuildPatch {
		t.Errorf("ByName(plain) = %v, %v; want %s alone", s, err, BuildPatch)
	}
	empty := filepath.Join(t.TempDir(), "none.series")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := ByName(empty); err != nil || len(s) != 0 {
		t.Errorf("ByName(an empty file) = %v, %v; want no patches", s, err)
	}
	_, err = ByName(filepath.Join(t.TempDir(), "missing.series"))
	if err == nil || !inputerr.Is(err) || !strings.Contains(err.Error(), "neither a named series (scoring, plain) nor a file") {
		t.Errorf("ByName(a missing file) = %v, want an inputerr.Error saying what --series takes", err)
	}
}
