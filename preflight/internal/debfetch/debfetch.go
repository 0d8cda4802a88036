package debfetch

import (
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/internal/llamatest"
)

// Root returns the cached Debian sid sysroot holding llama-server and its libraries
// (llama.cpp-tools, libllama0, libggml0, ...). When it cannot be had the test fails if
// CI=true and is skipped otherwise.
func Root(t testing.TB) string {
	t.Helper()
	return llamatest.Server(t).Root
}

// GGMLBackends returns the directory of Debian's libggml0 that holds libggml-cpu-*.so.
func GGMLBackends(t testing.TB) string {
	t.Helper()
	root := Root(t)
	matches, _ := filepath.Glob(filepath.Join(root, "usr/lib/*/ggml/backends0"))
	if len(matches) != 1 {
		t.Fatalf("the sid sysroot %s has %d ggml/backends0 directories, want 1", root, len(matches))
	}
	return matches[0]
}
