package bundler

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

func TestEpochFromEnv(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"1784810751", 1784810751, false},
		{"-1", 0, true},
		{"1.5", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		got, err := EpochFromEnv(func(k string) string {
			if k != "SOURCE_DATE_EPOCH" {
				t.Errorf("EpochFromEnv read %s", k)
			}
			return tt.in
		})
		if (err != nil) != tt.wantErr || err == nil && got.Unix() != tt.want {
			t.Errorf("EpochFromEnv(%q) = %v, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestResultWriteTextOneLinePerPathWritten(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{Result{ManifestSHA256: "abc", Dir: "b"}, "abc  b\n"},
		{Result{ManifestSHA256: "abc", Archive: "b.tar.zst"}, "abc  b.tar.zst\n"},
		{Result{ManifestSHA256: "abc", Dir: "b", Archive: "b.tar.gz"}, "abc  b\nabc  b.tar.gz\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := tt.r.WriteText(&b); err != nil || b.String() != tt.want {
			t.Errorf("WriteText(%+v) = %q, %v; want %q", tt.r, b.String(), err, tt.want)
		}
	}
}

// A build whose plan hash no current plan has is warned of; a foreign server (no plan) is not.
func TestWarnStalePlan(t *testing.T) {
	target, err := targets.Resolve("cpu-v3", "")
	if err != nil {
		t.Fatal(err)
	}
	series, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	current, err := pipeline.ResolveRecipe(target, "server", series, pipeline.Options{AllowFloating: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		build manifest.Build
		warn  bool
	}{
		{"another plan", manifest.Build{PlanHash: strings.Repeat("0", 64)}, true},
		{"the current plan", manifest.Build{PlanHash: current.Hash}, false},
		{"a foreign server", manifest.Build{}, false},
	} {
		var log bytes.Buffer
		WarnStalePlan(slog.New(slog.NewTextHandler(&log, nil)), target, tt.build)
		if got := strings.Contains(log.String(), "built from another plan"); got != tt.warn {
			t.Errorf("%s: WarnStalePlan() logged %q, want a warning %v", tt.name, log.String(), tt.warn)
		}
		if tt.warn && !strings.Contains(log.String(), "built=000000000000 ") {
			t.Errorf("%s: WarnStalePlan() logged %q, want the built plan's short hash", tt.name, log.String())
		}
	}
}
