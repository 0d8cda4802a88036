package strictyaml

import (
	"strings"
	"testing"
)

type doc struct {
	Name  string `yaml:"name"`
	Count int    `yaml:"count"`
	Inner struct {
		Size int `yaml:"size"`
	} `yaml:"inner"`
}

func TestDecodeReportsEveryUnknownFieldAndKeepsTheRest(t *testing.T) {
	data := []byte("name: x\nnmae: y\ncount: 3\ninner:\n  size: 2\n  sise: 4\n")
	var d doc
	err := Decode("f.yaml", "test file", data, &d)
	if err == nil {
		t.Fatal("Decode() = nil, want the unknown fields")
	}
	for _, want := range []string{"f.yaml: line 2: field nmae not found", "f.yaml: line 6: field sise not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Decode() = %q, want it to contain %q", err, want)
		}
	}
	if !Partial(err) {
		t.Errorf("Partial(%v) = false, want true: the known fields were decoded and can be validated", err)
	}
	if d.Name != "x" || d.Count != 3 || d.Inner.Size != 2 {
		t.Errorf("decoded %+v, want the known fields kept", d)
	}
}

func TestDecodeSyntaxErrorIsNotPartial(t *testing.T) {
	var d doc
	err := Decode("f.yaml", "test file", []byte("name: [x\n"), &d)
	if err == nil || Partial(err) || !strings.Contains(err.Error(), "f.yaml") {
		t.Errorf("Decode() = %v (partial %v), want a whole-file error naming f.yaml", err, Partial(err))
	}
	err = Decode("f.yaml", "test file", nil, &d)
	if err == nil || Partial(err) || !strings.Contains(err.Error(), "empty test file") {
		t.Errorf("Decode(empty) = %v, want empty test file", err)
	}
}
