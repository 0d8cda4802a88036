package depcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/llbuild/llbuild"

// A rule names the import paths that pkg must never depend on, directly or through another
// package: a path forbids itself and everything under it.
type rule struct {
	pkg    string
	forbid []string
	why    string
}

var rules = append([]rule{
	{module + "/llamaserver", []string{module + "/shim", module + "/bench"},
		"llamaserver owns llama-server for both the shim and the bench and knows neither"},
	// A bisect reuses the one flow (plan, executor, artifacts, bundle, bench) and adds no builder
	// or bench of its own: it is handed an executor, so it never reaches an engine itself.
	{module + "/bisect", []string{module + "/pipeline/daggerexec", module + "/pipeline/hostexec", "dagger.io/dagger", "github.com/urfave/cli", module + "/shim"},
		"the bisect is handed its executor and measures through the bench (ARCHITECTURE.md)"},
},
	// The manifest is the only thing the shim and the bench read from a bundle; neither, nor
	// llama-server's own package, reaches up to the pipeline, Dagger or the CLI.
	append(below("shim", "bench", "manifest", "llamaserver"), onlyCommands()...)...)

// onlyCommands: internal/cmdutil is what the commands share (usage errors, streams, their
// flags); no library depends on it, so no library learns of the command line through it.
func onlyCommands() []rule {
	var out []rule
	for _, p := range []string{"bench", "bisect", "bundler", "imagebundle", "manifest", "patches", "pipeline", "pipeline/build", "pipeline/executor", "pipeline/image", "pipeline/recorded", "preflight", "publish", "recipes", "shim", "targets", "wheel", "gguf", "artifacts", "llamaserver"} {
		out = append(out, rule{module + "/" + p, []string{module + "/internal/cmdutil"}, "cmdutil is the commands' own (ARCHITECTURE.md, Invariants)"})
	}
	return out
}

func below(pkgs ...string) []rule {
	var out []rule
	for _, p := range pkgs {
		out = append(out, rule{module + "/" + p, []string{module + "/pipeline", "dagger.io/dagger", "github.com/urfave/cli", module},
			"it sits below the pipeline and the commands (ARCHITECTURE.md, Invariants)"})
	}
	return out
}

// forbidden says whether dep is path or a package under it. The module's root package
// forbids only itself: every llbuild package is under it.
func forbidden(dep, path string) bool {
	if path == module {
		return dep == module
	}
	return dep == path || strings.HasPrefix(dep, path+"/")
}

// TestBoundaries: no package depends on what its rule forbids (its non-test imports,
// followed all the way down, as go list -deps reads them).
func TestBoundaries(t *testing.T) {
	var pkgs []string
	for _, r := range rules {
		pkgs = append(pkgs, r.pkg)
	}
	deps, err := listDeps(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		d, ok := deps[r.pkg]
		if !ok {
			t.Errorf("go list did not list %s", r.pkg)
			continue
		}
		for _, dep := range d {
			for _, f := range r.forbid {
				if forbidden(dep, f) {
					t.Errorf("%s depends on %s, which it must not: %s", r.pkg, dep, r.why)
				}
			}
		}
	}
}

// listDeps returns each package's dependencies, transitive, test files left out.
func listDeps(pkgs []string) (map[string][]string, error) {
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Deps,Error"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	deps := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Deps       []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		deps[p.ImportPath] = p.Deps
	}
	return deps, nil
}
