package bisect

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// A campaign shows the same from its directory and from its log carried apart, as text, JSON or
// verdict lines; a campaign restarted from its log holds the same verdicts, and not where one is.
func TestShowAndRestart(t *testing.T) {
	p := path(10)
	dir := t.TempDir()
	run(t, Options{Dir: dir, Settings: settings(p), Path: p, Builder: &fakeBuilder{},
		Bencher: &fakeBencher{speed: step(4, 0.2), noise: 0.01, rng: rand.New(rand.NewSource(1))}, MaxProbes: 3})
	show := func(name string, f Format) string {
		t.Helper()
		var b bytes.Buffer
		if err := Show(&b, name, f, nil); err != nil {
			t.Fatalf("Show(%s, %+v): %v", name, f, err)
		}
		return b.String()
	}
	text := show(dir, Format{})
	if !strings.HasPrefix(text, "range:     "+p[0].Short()) || !strings.Contains(text, "probing: ") {
		t.Errorf("text:\n%s\nwant the range and the campaign probing", text)
	}
	copied := filepath.Join(t.TempDir(), "carried.log")
	b, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := show(copied, Format{}); got != text {
		t.Errorf("the log file shows\n%s\nthe campaign\n%s", got, text)
	}
	lines := show(dir, Format{Verdicts: true})
	// three measurements: the ends, then two probes, each a verdict line
	if n := strings.Count(lines, "\n"); n != 2 || strings.Count(lines, "# ") != 2 || strings.Contains(lines, p[10].Hash) {
		t.Errorf("verdict lines:\n%s\nwant the two probes'", lines)
	}
	var sum struct {
		Dir     string
		Phase   string
		Commits int
		Probes  []Probe
	}
	if err := json.Unmarshal([]byte(show(dir, Format{JSON: true, Verdicts: true})), &sum); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if sum.Dir != dir || sum.Phase != PhaseProbing || sum.Commits != 10 || len(sum.Probes) != 2 {
		t.Errorf("JSON %+v, want %s probing 10 commits with 2 probes", sum, dir)
	}
	if err := Show(&bytes.Buffer{}, t.TempDir(), Format{}, nil); !inputerr.Is(err) || !errors.Is(err, ErrNoLog) {
		t.Errorf("Show of a directory without a log: %v, want the caller's ErrNoLog", err)
	}

	again := filepath.Join(t.TempDir(), "again")
	var out bytes.Buffer
	if err := Restart(&out, copied, again, "", 0, Format{Verdicts: true}, nil); err != nil {
		t.Fatal(err)
	}
	if out.String() != lines || show(again, Format{Verdicts: true}) != lines {
		t.Errorf("restarted campaign's verdicts:\n%s\nwant\n%s", out.String(), lines)
	}
	if err := Restart(&out, copied, again, "", 0, Format{}, nil); !inputerr.Is(err) || !strings.Contains(err.Error(), "already holds a campaign") {
		t.Errorf("Restart into a campaign: %v, want the caller's mistake", err)
	}
	if err := Restart(&out, copied, t.TempDir(), "t-test", 0, Format{}, nil); !inputerr.Is(err) {
		t.Errorf("Restart with an unknown test: %v, want the caller's mistake", err)
	}
}
