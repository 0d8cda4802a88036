package patches_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	// a build with patch 0014 leaves the log probability nodes out of a decode without targets,
	// one without it computes them: the program checks the one the build's patches say
	kind := "full"
	if lean, err := hasPatch(filepath.Join(lib, "patches"), "-llama-output-logprobs-only-with-targets.patch"); err != nil {
		t.Fatal(err)
	} else if lean {
		kind = "lean"
	}
	t.Logf("the build's patches say %s (0014 %s)", kind, map[string]string{"lean": "applied", "full": "not applied"}[kind])
	out, err := exec.Command(bin, model, kind).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("output-logprobs: %v", err)
	}
}

// hasPatch says whether the patches folder a build keeps beside llama-server (the series it
// applied) holds a patch whose name ends in suffix.
func hasPatch(dir, suffix string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("the build's patches folder (which patches it applied): %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			return true, nil
		}
	}
	return false, nil
}
