package executor

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/daggerexec"
	"github.com/llbuild/llbuild/pipeline/hostexec"
)

func TestParseBases(t *testing.T) {
	layout := t.TempDir()
	got, err := ParseBases([]string{"devel=oci-layout:" + layout, "runtime=r@sha256:ab"})
	if want := map[string]string{"devel": "oci-layout:" + layout, "runtime": "r@sha256:ab"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseBases() = %v, %v; want %v", got, err, want)
	}
	// an archive or layout that is not there is said before anything is resolved or built
	for _, bad := range [][]string{{"builder=x"}, {"devel="}, {"devel"}, {"devel=a", "devel=b"}, {"devel=oci-archive:/nonexistent.tar"}, {"runtime=oci-layout:/nonexistent"}} {
		if _, err := ParseBases(bad); !inputerr.Is(err) || !strings.Contains(err.Error(), "--base") {
			t.Errorf("ParseBases(%q) = %v, want an inputerr.Error about --base", bad, err)
		}
	}
}

func TestCheckRefusesWhatDoesNotGoWithTheExecutor(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" when the options go together
	}{
		{"dagger without a source", Options{Executor: pipeline.ExecutorDagger}, ""},
		{"host with a source", Options{Executor: pipeline.ExecutorHost, Source: dir}, ""},
		{"host with an engine", Options{Executor: pipeline.ExecutorHost, Source: dir, Engine: "tcp://x"}, "--engine is for --executor dagger"},
		{"host with a devel image", Options{Executor: pipeline.ExecutorHost, Source: dir, Bases: map[string]string{"devel": "x"}}, "--base devel= is for --executor dagger"},
		{"host without a source", Options{Executor: pipeline.ExecutorHost}, "--executor host needs --source DIR"},
		{"another executor", Options{Executor: "podman"}, `--executor must be dagger or host, got "podman"`},
		{"a missing source", Options{Executor: pipeline.ExecutorDagger, Source: filepath.Join(dir, "none")}, "no such file"},
		{"a source that is a file", Options{Executor: pipeline.ExecutorDagger, Source: file}, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Check()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Check() = %v, want nil", err)
				}
				return
			}
			if !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() = %v, want an inputerr.Error containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckDefaultOutRefusesOnlyTheDefaultInsideTheSource(t *testing.T) {
	src := t.TempDir()
	inside := Options{Source: src, Out: filepath.Join(src, "out")}
	if err := inside.CheckDefaultOut(false); !inputerr.Is(err) || !strings.Contains(err.Error(), "the default --out "+inside.Out+" is inside the source") {
		t.Errorf("CheckDefaultOut(default out inside) = %v, want an inputerr.Error", err)
	}
	if err := inside.CheckDefaultOut(true); err != nil {
		t.Errorf("CheckDefaultOut(out given) = %v, want nil: a given --out is the caller's choice", err)
	}
	if err := (Options{Source: src, Out: t.TempDir()}).CheckDefaultOut(false); err != nil {
		t.Errorf("CheckDefaultOut(out elsewhere) = %v, want nil", err)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/a/../c", "/a", false}, {"/x/..b", "/x", true}} {
		if got := Within(tc.p, tc.dir); got != tc.want {
			t.Errorf("Within(%s, %s) = %v, want %v", tc.p, tc.dir, got, tc.want)
		}
	}
}

func TestNewStartsTheExecutorNamed(t *testing.T) {
	ex, err := New(Options{Executor: pipeline.ExecutorHost, Source: t.TempDir(), WorkDir: t.TempDir()}, Env{Version: "v-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ex.(*hostexec.Executor); !ok {
		t.Errorf("New(host) = %T, want the host executor", ex)
	}
	w, err := NewWheel(Options{Executor: pipeline.ExecutorHost, Source: t.TempDir(), WorkDir: t.TempDir()}, Env{}, nil, t.TempDir(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.(*hostexec.WheelExecutor); !ok {
		t.Errorf("NewWheel(host) = %T, want the host wheel executor", w)
	}
	o := Options{Executor: pipeline.ExecutorDagger, Engine: "tcp://e", WorkDir: "w", Bases: map[string]string{"devel": "d"}}
	if got, want := o.daggerOptions(Env{Version: "v"}, "src", nil), (daggerexec.Options{Source: "src", Engine: "tcp://e", Devel: "d", Builder: pipeline.Builder{Version: "v", Executor: pipeline.ExecutorDagger}}); !reflect.DeepEqual(got, want) {
		t.Errorf("daggerOptions() = %+v, want %+v", got, want)
	}
}

func TestCheckPinsRefusesWhatItCannotCheckBeforeAskingTheEngine(t *testing.T) {
	pinned := &pipeline.Plan{Target: "t", Recipe: "server", Apt: &pipeline.Apt{Packages: []pipeline.AptPackage{{Name: "cmake", Version: "1"}}, Sources: []string{"deb x"}}}
	unpinned := &pipeline.Plan{Target: "t", Apt: &pipeline.Apt{Packages: []pipeline.AptPackage{{Name: "cmake"}}}}
	for _, tc := range []struct {
		p     *pipeline.Plan
		bases []string
		want  string
	}{
		{&pipeline.Plan{Target: "t", Recipe: "r"}, nil, "the plan installs no apt packages"},
		{unpinned, nil, "not pinned to a snapshot (cmake, "},
		{pinned, []string{"runtime=x"}, "--check-pins asks in the devel image"},
		{pinned, []string{"devel"}, "want devel=REF"},
	} {
		var out strings.Builder
		// No engine is reachable at this address: an error that is not the caller's would say so.
		err := CheckPins(context.Background(), tc.p, "tcp://127.0.0.1:1", tc.bases, Env{}, &out)
		if !inputerr.Is(err) || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("CheckPins(%v) = %v, wrote %q; want an inputerr.Error containing %q and nothing written", tc.bases, err, out.String(), tc.want)
		}
	}
}
