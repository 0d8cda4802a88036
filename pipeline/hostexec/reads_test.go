package hostexec

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

// The read set of a CPU build of the fixture: its sources, the headers they include, the
// CMake files the configuration read; not the CUDA backend's files, which a CPU build never
// opens, and nothing outside the tree.
func TestReadsListsWhatTheBuildRead(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	e := newEnv(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, ""), nil)
	ex := e.executor(t, fixture.Source(), nil)
	if _, err := ex.Reads(context.Background(), p); err == nil || !strings.Contains(err.Error(), "no build tree") {
		t.Errorf("Reads before the build: %v, want an error saying there is no build tree", err)
	}
	if _, err := ex.Build(context.Background(), p, e.out); err != nil {
		t.Fatal(err)
	}
	reads, err := ex.Reads(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reads: %v", reads)
	for _, want := range []string{"CMakeLists.txt", "ggml/src/CMakeLists.txt", "ggml/src/ggml.c", "ggml/include/ggml.h", "include/llama.h", "tools/server/server.cpp"} {
		if !slices.Contains(reads, want) {
			t.Errorf("reads lacks %s", want)
		}
	}
	for _, f := range reads {
		if strings.HasPrefix(f, "ggml/src/ggml-cuda/") || strings.HasPrefix(f, "/") || strings.HasPrefix(f, "..") {
			t.Errorf("reads holds %s: a CPU build reads no CUDA file and nothing outside the tree", f)
		}
	}
	if !slices.IsSorted(reads) {
		t.Errorf("reads not sorted: %v", reads)
	}
}
