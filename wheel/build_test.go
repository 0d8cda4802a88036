package wheel

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

func TestArchitecturesSplitsAndTrims(t *testing.T) {
	got := Architectures([]string{"86, 90", "", " 120 ,,"})
	if want := []string{"86", "90", "120"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Architectures() = %q, want %q", got, want)
	}
}

func TestIsPythonVersionTakesThreeDotN(t *testing.T) {
	for v, want := range map[string]bool{"3.12": true, "3.9": true, "3": false, "3.": false, "2.7": false, "3.123": false, "3.1a": false, "": false} {
		if got := IsPythonVersion(v); got != want {
			t.Errorf("IsPythonVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestTargetNamedOrByArchitectures(t *testing.T) {
	load := func(name, file string) (*targets.Target, error) { return targets.Resolve(name, file) }
	for _, tc := range []struct {
		name  string
		tname string
		archs []string
		want  string // target name, or a piece of the error
		archW []string
	}{
		{"archs alone: the built-in target that builds them", "", []string{"86"}, "rtx3090", []string{"86"}},
		{"a named target keeps its architectures", "rtx3090", nil, "rtx3090", []string{"86"}},
		{"archs replace the named target's", "rtx3090", []string{"80", "86"}, "rtx3090", []string{"80", "86"}},
		{"no built-in target builds them", "", []string{"61"}, "no built-in target builds CUDA architectures 61", nil},
		{"a CPU target takes no archs", "cpu-v3", []string{"86"}, "CUDA targets only", nil},
	} {
		got, err := Target(tc.tname, "", tc.archs, load)
		if tc.archW == nil {
			if err == nil || !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: Target() error = %v, want an inputerr.Error with %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Target() error = %v", tc.name, err)
			continue
		}
		if got.Name != tc.want || !reflect.DeepEqual(got.Build.CUDA.Architectures, tc.archW) {
			t.Errorf("%s: Target() = %s %v, want %s %v", tc.name, got.Name, got.Build.CUDA.Architectures, tc.want, tc.archW)
		}
	}
	loadErr := errors.New("unreadable")
	if _, err := Target("x", "", nil, func(string, string) (*targets.Target, error) { return nil, loadErr }); err != loadErr {
		t.Errorf("Target() error = %v, want load's error as it is", err)
	}
}

func TestSetupValidateRefusesWhatNoBuildCanUse(t *testing.T) {
	src, llama := t.TempDir(), t.TempDir()
	file := filepath.Join(src, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	host := Setup{Executor: pipeline.ExecutorHost, Package: src, Llama: llama, Out: t.TempDir(), OutDefault: true}
	with := func(f func(*Setup)) Setup { s := host; f(&s); return s }
	for _, tc := range []struct {
		name  string
		setup Setup
		want  string
	}{
		{"host with both sources", host, ""},
		{"dagger fetches what it is not given", Setup{Executor: pipeline.ExecutorDagger, Out: "out", OutDefault: true}, ""},
		{"a chosen --out may be inside a source", with(func(s *Setup) { s.Out, s.OutDefault = filepath.Join(src, "out"), false }), ""},
		{"a source that is a file", with(func(s *Setup) { s.Llama = file }), "--llama-source " + file + " is not a directory"},
		{"a source that is not there", with(func(s *Setup) { s.Package = filepath.Join(src, "nope") }), "--source " + filepath.Join(src, "nope")},
		{"the default --out inside a source", with(func(s *Setup) { s.Out = filepath.Join(llama, "out") }), "is inside --llama-source"},
		{"a runtime base", with(func(s *Setup) { s.Bases = map[string]string{"runtime": "x"} }), "no use for a wheel"},
		{"an engine for host", with(func(s *Setup) { s.Engine = "tcp://x:1" }), "--engine and --base are for --executor dagger"},
		{"host without llama.cpp", with(func(s *Setup) { s.Llama = "" }), "fetches nothing"},
		{"an unknown executor", with(func(s *Setup) { s.Executor = "podman" }), `got "podman"`},
	} {
		err := tc.setup.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want an inputerr.Error with %q", tc.name, err, tc.want)
		}
	}
}

func TestFindWantsOneWheel(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir); err == nil || !strings.Contains(err.Error(), "holds 0 wheels") {
		t.Errorf("Find(empty) error = %v, want holds 0 wheels", err)
	}
	whl := pureWheel(t, dir, "0.3.34+cpu.avx2")
	if got, err := Find(dir); got != whl || err != nil {
		t.Errorf("Find() = %q, %v; want %q", got, err, whl)
	}
	pureWheel(t, dir, "0.3.35+cpu.avx2")
	if _, err := Find(dir); err == nil || !strings.Contains(err.Error(), "holds 2 wheels") {
		t.Errorf("Find(two) error = %v, want holds 2 wheels", err)
	}
}

func TestIndexSaysWhatItWrote(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	artifactWith(t, a, "rtx3090", "0.3.34+cu131.sm86.avx2")
	artifactWith(t, a, "cpu-v3", "0.3.34+cpu.avx2")
	artifactWith(t, b, "olares-one", "0.3.34+cu131.sm120a.avx2.vnni")
	idx := filepath.Join(t.TempDir(), "index")
	var out bytes.Buffer
	if err := Index(t.Context(), []string{a, b}, idx, &out); err != nil {
		t.Fatal(err)
	}
	want := "cpu\t" + filepath.Join(idx, "cpu", "simple") + "\t1\ncu131\t" + filepath.Join(idx, "cu131", "simple") + "\t2\n"
	if out.String() != want {
		t.Errorf("Index() wrote %q, want %q", out.String(), want)
	}
	err := Index(t.Context(), []string{filepath.Join(a, "nope")}, idx, &bytes.Buffer{})
	if err == nil || !inputerr.Is(err) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Index(a missing root) = %v, want an inputerr.Error that is fs.ErrNotExist", err)
	}
	if err := Index(t.Context(), []string{t.TempDir()}, idx, &bytes.Buffer{}); err == nil || inputerr.Is(err) {
		t.Errorf("Index(no wheels) = %v, want an error that is not the caller's usage mistake", err)
	}
}
