package manifest

import (
	"bytes"
	"os"
	"testing"

	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/manifest/internal/llamaargs"
	"github.com/llbuild/llbuild/patches"
)

// The table of llama-server's options and their environment variables is generated from
// the pinned llama.cpp source and the patch series: regenerating it must give the file in
// the repository, so a new pin or patch that adds an option cannot go unnoticed.
func TestLlamaArgsTableIsCurrent(t *testing.T) {
	src := enginetest.LlamaSource(t)
	series, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	want, err := llamaargs.Table("manifest", src, series)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("llamaargs_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("llamaargs_gen.go differs from the table generated from %s and the patch series: run `go generate ./manifest` with LLBUILD_TEST_LLAMA_SOURCE set", src)
	}
}
