package recipes

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
)

func TestLoadServerTakesOnlyAServerRecipe(t *testing.T) {
	wheelFile := filepath.Join(t.TempDir(), "wheel.yaml")
	raw, err := Raw("wheel")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wheelFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, recipe string
		builtin      bool
		want         string // "" for the server recipe
	}{
		{"none given", "", false, ""},
		{"the built-in one", "server", false, ""},
		{"a built-in name where only files go", "wheel", false, "--recipe takes a server recipe FILE.yaml"},
		{"a built-in name where names go", "wheel", true, `is the "wheel" recipe`},
		{"an unknown name", "nope", true, `unknown recipe "nope"`},
		{"a file of another recipe", wheelFile, false, `is the "wheel" recipe`},
		{"a missing file", filepath.Join(t.TempDir(), "none.yaml"), false, "reading recipe file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := LoadServer(tc.recipe, tc.builtin)
			if tc.want == "" {
				if err != nil || r.Name != "server" {
					t.Fatalf("LoadServer(%q) = %v, %v; want the server recipe", tc.recipe, r, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !inputerr.Is(err) {
				t.Errorf("LoadServer(%q) = %v, want an inputerr.Error containing %q", tc.recipe, err, tc.want)
			}
		})
	}
}

func TestWriteListHasARowPerRecipeOrItsJSON(t *testing.T) {
	var text bytes.Buffer
	if err := WriteList(&text, false); err != nil {
		t.Fatal(err)
	}
	server, err := Load("server")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != len(Names())+1 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("WriteList() wrote %q, want a header and a row per recipe", text.String())
	}
	if !strings.Contains(text.String(), server.Source.Commit+"  "+strings.Join(server.BuildTargets, ",")) {
		t.Errorf("WriteList() = %q, want the server recipe's commit and build targets", text.String())
	}
	var js bytes.Buffer
	if err := WriteList(&js, true); err != nil {
		t.Fatal(err)
	}
	var all []Recipe
	if err := json.Unmarshal(js.Bytes(), &all); err != nil || len(all) != len(Names()) {
		t.Errorf("WriteList(json) = %q (%v), want the %d recipes", js.String(), err, len(Names()))
	}
}
