package shim

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// A directory that is no sound bundle is refused before anything starts.
func TestServeBundleRefusesABundleThatDoesNotVerify(t *testing.T) {
	dir := t.TempDir()
	err := ServeBundle(context.Background(), dir, Options{Addr: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "bundle "+dir+" does not verify:") || !strings.Contains(err.Error(), "manifest.json") {
		t.Errorf("ServeBundle(empty dir) = %v, want it named as not verifying", err)
	}
}
