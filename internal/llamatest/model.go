package llamatest

import (
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/gguf"
)

// TinyModel writes the tiny random-weight llama model o describes into the
// test's temporary directory and returns its path. Use gguf.DefaultTiny()
// for a model, gguf.DraftTiny() for a draft with the same vocabulary and
// gguf.OtherVocabTiny() for one that does not match.
func TinyModel(t testing.TB, o gguf.TinyOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(path, o); err != nil {
		t.Fatalf("writing tiny model: %v", err)
	}
	return path
}
