package manifest

import (
	"bytes"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
)

func TestBundleProgressLine(t *testing.T) {
	r := bundleProgress(500e6, 1000e6, 10*time.Second)
	if want := "bundling [###############...............]  50.0% 500/1000 MB 50 MB/s"; r.Line != want {
		t.Errorf("bundleProgress().Line = %q, want %q", r.Line, want)
	}
	if progress.TermOf(&bytes.Buffer{}) != nil {
		t.Error("progress.TermOf(buffer) is a terminal")
	}
}
