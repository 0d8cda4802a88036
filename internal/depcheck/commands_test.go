package depcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// commandOf is the command a file of the root package belongs to: cmd_NAME.go and
// cmd_NAME_PART.go are NAME's, bundle.go is bundle's; "" for the files every command may use
// (main.go, app.go, commands.go, flags.go, inputs.go, errors.go, ...).
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
// a library or in a helper file of the root package, never in another command's file (STYLE.md,
// Commands). A name a command file uses but does not declare (go/parser's unresolved
// identifiers) must not be declared in another command's file.
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
			if ok && commandOf(g) != "" && commandOf(g) != cmd {
				bad = append(bad, filepath.Base(f)+" uses "+id.Name+" from "+filepath.Base(g))
			}
		}
	}
	sort.Strings(bad)
	bad = compactStrings(bad)
	for _, b := range bad {
		t.Errorf("%s: command files use libraries or the root package's helper files, never another command's file", b)
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
