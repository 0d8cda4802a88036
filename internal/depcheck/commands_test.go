package depcheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// commandOf is the command a file of the root package belongs to: cmd_NAME.go and
// cmd_NAME_PART.go are NAME's, bundle.go is bundle's; "" for main.go, which wires them.
func commandOf(file string) string {
	base := filepath.Base(file)
	if base == "bundle.go" {
		return "bundle"
	}
	if !strings.HasPrefix(base, "cmd_") {
		return ""
	}
	name := strings.TrimSuffix(strings.TrimPrefix(base, "cmd_"), ".go")
	return strings.SplitN(name, "_", 2)[0]
}

// TestCommandFilesUseNoOtherCommand: a command file is wiring; what two commands share lives in
// a library (internal/cmdutil for what only commands share), never in another command's file nor
// in main.go (STYLE.md, Commands). A name a command file uses but does not declare (go/parser's
// unresolved identifiers) must not be declared in another file of the root package.
func TestCommandFilesUseNoOtherCommand(t *testing.T) {
	files, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declaredIn := map[string]string{}
	parsed := map[string]*ast.File{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[f] = af
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declaredIn[d.Name.Name] = f
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declaredIn[s.Name.Name] = f
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declaredIn[n.Name] = f
						}
					}
				}
			}
		}
	}
	if len(parsed) < 10 {
		t.Fatalf("read %d files of the root package: is the test run from internal/depcheck?", len(parsed))
	}
	var bad []string
	for f, af := range parsed {
		cmd := commandOf(f)
		if cmd == "" {
			continue
		}
		for _, id := range af.Unresolved {
			g, ok := declaredIn[id.Name]
			if ok && commandOf(g) != cmd {
				bad = append(bad, filepath.Base(f)+" uses "+id.Name+" from "+filepath.Base(g))
			}
		}
	}
	sort.Strings(bad)
	bad = compactStrings(bad)
	for _, b := range bad {
		t.Errorf("%s: command files use libraries, never another file of the root package", b)
	}
}

func compactStrings(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// rootBudget is how many lines the root package's non-test files may hold together: commands
// that wire libraries (ARCHITECTURE.md, Invariants).
const rootBudget = 2500

// TestRootPackageIsWiring: package main stays within rootBudget lines; what grows past it is
// logic that belongs in a library.
func TestRootPackageIsWiring(t *testing.T) {
	files, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines, n := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
		n++
	}
	if n < 10 {
		t.Fatalf("read %d files of the root package: is the test run from internal/depcheck?", n)
	}
	if lines > rootBudget {
		t.Errorf("package main holds %d lines in %d files, more than %d: move what is not flag wiring into a library", lines, n, rootBudget)
	}
}
