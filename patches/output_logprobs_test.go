package patches_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
)

// TestOutputLogprobsAPI compiles tests/output-logprobs.c against a llama.cpp build of the
// series and runs it on the tiny model: patch 0005's libllama API (targets, the log
// probabilities computed in the graph against the host's log softmax of the same logits,
// the logits kept for outputs without a target, and the refusals). It needs the build
// (LLBUILD_PATCHED_LLAMA_SERVER: its directory holds libllama) and the patched source tree
// for the headers (LLBUILD_PATCHED_LLAMA_SOURCE, e.g. the src directory of the pipeline's
// work directory); scripts/test.sh builds both from ../shared/llama.cpp.
func TestOutputLogprobsAPI(t *testing.T) {
	server, src := os.Getenv("LLBUILD_PATCHED_LLAMA_SERVER"), os.Getenv("LLBUILD_PATCHED_LLAMA_SOURCE")
	if server == "" || src == "" {
		enginetest.SkipUnlessCI(t, "LLBUILD_PATCHED_LLAMA_SERVER and LLBUILD_PATCHED_LLAMA_SOURCE are not both set: this test needs a llama.cpp build of the series and its source tree (scripts/test.sh builds them when ../shared/llama.cpp is beside the repository)")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	lib := filepath.Dir(server)
	dir := t.TempDir()
	bin := filepath.Join(dir, "output-logprobs")
	build := exec.Command(cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join(src, "include"), "-I", filepath.Join(src, "ggml", "include"),
		filepath.Join("tests", "output-logprobs.c"), "-o", bin,
		"-L", lib, "-lllama", "-lggml", "-lggml-base", "-lm", "-Wl,-rpath,"+lib)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("compiling tests/output-logprobs.c: %v\n%s", err, out)
	}
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, model).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("output-logprobs: %v", err)
	}
}
