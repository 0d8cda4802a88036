package pybuild

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestEnsureGivesImportableBuildTools(t *testing.T) {
	site := Need(t)
	py := "/usr/bin/python" + Python(t)
	cmd := exec.Command(py, "-c", "import build, scikit_build_core, packaging, pathspec; print(build.__version__, scikit_build_core.__version__)")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+site)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import the build tools from %s: %v\n%s", py, site, err, out)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "1.") || !strings.Contains(got, " 0.") {
		t.Errorf("versions = %q, want build 1.x and scikit-build-core 0.x", got)
	}
	// A second call finds the complete tree and returns the same directory.
	again := Need(t)
	if again != site {
		t.Errorf("Need() = %s, then %s", site, again)
	}
}
