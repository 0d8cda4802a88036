package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/targets"
)

func TestResolveTargetsKeepsTheOrderAndStopsAtTheCallersMistakes(t *testing.T) {
	in, err := ServerInputs(context.Background(), "", "", "", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	plans, err := ResolveTargets(targets.Specs([]string{"h200,cpu-v3"}, nil), in.Recipe, in.Series, Options{})
	if err != nil || len(plans) != 2 || plans[0].Target != "h200" || plans[1].Target != "cpu-v3" {
		t.Fatalf("ResolveTargets(h200,cpu-v3) = %v, %v; want their plans in that order", plans, err)
	}
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"a target given twice", []string{"cpu-v3,h200,cpu-v3"}, "target cpu-v3 is given twice"},
		{"an unknown target", []string{"cpu-v3,nope"}, `unknown target "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans, err := ResolveTargets(targets.Specs(tc.names, nil), in.Recipe, in.Series, Options{})
			if plans != nil || !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ResolveTargets(%v) = %v, %v; want no plans and an inputerr.Error containing %q", tc.names, plans, err, tc.want)
			}
		})
	}
	// b70's oneAPI image has no digest: without AllowFloating its plan fails, the others' stand.
	plans, err = ResolveTargets(targets.Specs([]string{"b70,cpu-v3"}, nil), in.Recipe, in.Series, Options{})
	if len(plans) != 1 || plans[0].Target != "cpu-v3" || err == nil || inputerr.Is(err) || !strings.HasPrefix(err.Error(), "target b70: ") || !errors.Is(err, ErrFloating) {
		t.Errorf("ResolveTargets(b70,cpu-v3) = %v, %v; want cpu-v3's plan and b70's floating image named", plans, err)
	}
}

func TestInputsResolveHashesAPlainSourceOnce(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte("project(x)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := ServerInputs(context.Background(), "", "plain", "", src, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.PlainSource != src || len(in.Series) != 1 {
		t.Fatalf("ServerInputs(plain, %s) = %+v, want the plain series and the source as a plain directory", src, in)
	}
	specs := []targets.Spec{{Name: "cpu-v3"}}
	plans, err := in.Resolve(specs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := TreeHash(src)
	if err != nil {
		t.Fatal(err)
	}
	if plans[0].Source.Tree != tree {
		t.Errorf("plan's source tree = %q, want the directory's hash %q", plans[0].Source.Tree, tree)
	}
	// Read once: a change to the tree after the first resolution does not reach the plans.
	if err := os.WriteFile(filepath.Join(src, "more.c"), []byte("int x;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := in.Resolve(specs, Options{})
	if err != nil || again[0].Hash != plans[0].Hash {
		t.Errorf("the second Resolve = %v, %v; want the same plan %s", again, err, plans[0].Hash)
	}
	noSource, err := ServerInputs(context.Background(), "", "plain", "", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := noSource.Resolve(specs, Options{})
	if err != nil || other[0].Source.Tree != "" || other[0].Hash == plans[0].Hash {
		t.Errorf("without a source: %v, %v; want a plan without a tree and another hash", other, err)
	}
}

func TestServerInputsMarksTheCallersMistakes(t *testing.T) {
	for _, tc := range []struct{ recipe, series, want string }{
		{"wheel", "", "--recipe takes a server recipe FILE.yaml"},
		{"", filepath.Join(t.TempDir(), "none.series"), "neither a named series"},
	} {
		_, err := ServerInputs(context.Background(), tc.recipe, tc.series, "", "", false, nil)
		if !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ServerInputs(%q, %q) = %v, want an inputerr.Error containing %q", tc.recipe, tc.series, err, tc.want)
		}
	}
}

func TestPrintWritesJSONOrText(t *testing.T) {
	p, err := resolve(t, "cpu-v3", "server", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var js, text bytes.Buffer
	if err := p.Print(&js, true); err != nil || js.String() != string(p.JSON()) {
		t.Errorf("Print(json) = %q, %v; want the plan's JSON", js.String(), err)
	}
	if err := p.Print(&text, false); err != nil || !strings.HasPrefix(text.String(), "plan "+p.ShortHash()) {
		t.Errorf("Print(text) = %q, %v; want the plan's text", text.String(), err)
	}
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ResolveWheelRecipe(tg, nil, WheelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	if err := w.Print(&text, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plan " + w.Plan.ShortHash(), "CMAKE_ARGS:    " + w.CMakeArgsEnv(SourceDirToken), "version label: +" + w.LocalVersion, "wheel plan:    " + w.ShortHash() + "\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("WheelPlan.Print(text) = %q, want it to contain %q", text.String(), want)
		}
	}
	js.Reset()
	var back WheelPlan
	if err := w.Print(&js, true); err != nil || json.Unmarshal(js.Bytes(), &back) != nil || back.Hash != w.Hash {
		t.Errorf("WheelPlan.Print(json) = %q, %v; want the wheel plan's JSON", js.String(), err)
	}
}
