package targets

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
)

func TestSpecsKeepTheOrderNamesThenFiles(t *testing.T) {
	got := Specs([]string{"h200, cpu-v3", "", "b70"}, []string{"mine.yaml"})
	want := []Spec{{Name: "h200"}, {Name: "cpu-v3"}, {Name: "b70"}, {File: "mine.yaml"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Specs() = %v, want %v", got, want)
	}
	if got := Specs(nil, nil); got != nil {
		t.Errorf("Specs(nil, nil) = %v, want none", got)
	}
}

func TestSpecLoadMarksTheCallersMistakes(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("schemaVersion: 1\nname: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spec  Spec
		input bool
		want  string
	}{
		{"no target", Spec{}, true, "no target given: use --target (one of b70, cpu-v3"},
		{"both", Spec{Name: "cpu-v3", File: invalid}, true, "give --target or --target-file, not both"},
		{"an unknown name", Spec{Name: "cpu-v4"}, true, `did you mean "cpu-v3"?`},
		{"a missing file", Spec{File: filepath.Join(dir, "none.yaml")}, true, "reading target file"},
		// the user's file to mend, as a missing one is: exit 2 in every command alike
		{"a file that does not validate", Spec{File: invalid}, true, "invalid.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.spec.Load()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() = %v, want an error containing %q", err, tc.want)
			}
			if inputerr.Is(err) != tc.input {
				t.Errorf("inputerr.Is(%v) = %v, want %v", err, !tc.input, tc.input)
			}
		})
	}
	tg, err := Spec{Name: Default}.Load()
	if err != nil || tg.Name != Default {
		t.Errorf("Spec{Name: %q}.Load() = %v, %v; want the built-in target", Default, tg, err)
	}
}

func TestWriteListHasARowPerTargetOrItsJSON(t *testing.T) {
	var text bytes.Buffer
	if err := WriteList(&text, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != len(Names())+1 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("WriteList() wrote %q, want a header and a row per target", text.String())
	}
	h200, err := Load("h200")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range lines {
		if strings.HasPrefix(l, "h200 ") {
			row = l
		}
	}
	for _, want := range []string{"cuda", "(sm_" + strings.Join(h200.Build.CUDA.Architectures, ",") + ")", "(CUDA " + h200.Host.Driver.CUDA + ")"} {
		if !strings.Contains(row, want) {
			t.Errorf("h200's row %q lacks %q", row, want)
		}
	}
	var js bytes.Buffer
	if err := WriteList(&js, true); err != nil {
		t.Fatal(err)
	}
	var all []Target
	if err := json.Unmarshal(js.Bytes(), &all); err != nil {
		t.Fatalf("WriteList(json) wrote %q: %v", js.String(), err)
	}
	if len(all) != len(Names()) || all[0].Name != Names()[0] {
		t.Errorf("WriteList(json) listed %d targets, the first %q; want %d, %q", len(all), all[0].Name, len(Names()), Names()[0])
	}
}

func TestDetectedLoadsBackOrSaysWhatToEdit(t *testing.T) {
	cpu, err := Load(Default)
	if err != nil {
		t.Fatal(err)
	}
	data, warnings, err := Detected("here", cpu.Host)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("detected", data)
	if err != nil {
		t.Fatalf("the detected target does not load back: %v (warnings %q)", err, warnings)
	}
	if got.Name != "here" || !reflect.DeepEqual(got.Build.ISA, ISAFromFeatures(cpu.Host.CPU.FeatureSet())) {
		t.Errorf("Detected() = %s, want target here with the ISA of its features", data)
	}
	// A driver that says no CUDA version leaves the toolkit out, which the file must name.
	gpu := Host{GPUs: []GPU{{Vendor: VendorNVIDIA, Name: "RTX", ComputeCapability: "8.6"}}}
	_, warnings, err = Detected("gpu", gpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) == 0 || !strings.HasPrefix(warnings[len(warnings)-1], "the detected target needs editing before use:\n") {
		t.Errorf("Detected(a GPU without a CUDA version) warnings = %q, want the problems of the file last", warnings)
	}
}
