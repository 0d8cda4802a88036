package preflight

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

// debianServer is Debian's real llama-server executable.
func debianServer(t *testing.T) []byte {
	t.Helper()
	return mustRead(t, filepath.Join(debfetch.Root(t), "usr/bin/llama-server"))
}

func variantFile(t *testing.T, v string) []byte {
	t.Helper()
	return mustRead(t, filepath.Join(debfetch.GGMLBackends(t), "libggml-cpu-"+v+".so"))
}

// TestImageScoresItsSearchDirectoriesTogether: ggml's loader, started as /app/llama-server
// in an image whose working directory is /srv, scores the variants of /app and /srv
// together and loads the best one of all (haswell, in /srv, on an AVX2 host), not the best
// of each directory.
func TestImageScoresItsSearchDirectoriesTogether(t *testing.T) {
	l := tarLayer(t, map[string][]byte{
		"app/llama-server":            debianServer(t),
		"app/libggml-cpu-x64.so":      variantFile(t, "x64"),
		"app/libggml-cpu-skylakex.so": variantFile(t, "skylakex"),
		"srv/libggml-cpu-haswell.so":  variantFile(t, "haswell"),
		"opt/libggml-cpu-sse42.so":    variantFile(t, "sse42"),
	})
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{WorkingDir: "/srv"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	in, err := ReadImage(context.Background(), ImageSource{Archive: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", in)
	var search *GGMLChoice
	for i, c := range r.GGML {
		if strings.HasPrefix(c.Dir, "ggml backend search of /app/llama-server") {
			search = &r.GGML[i]
		}
	}
	if search == nil || search.Loaded != "/srv/libggml-cpu-haswell.so" || len(search.Scores) != 3 {
		t.Fatalf("GGML choices = %+v, want one search over /app and /srv loading /srv's haswell among 3 variants", r.GGML)
	}
	if v := verdictFor(r, CheckCPU, "/app/libggml-cpu-x64.so"); v == nil || v.Status != OK || !strings.Contains(v.Reason, "not loaded") {
		t.Errorf("x64 verdict = %+v, want ok: not loaded (haswell in /srv scores higher)", v)
	}
	// /opt is in no search: scored on its own, as if it were the compiled-in GGML_BACKEND_DIR.
	if len(r.GGML) != 2 {
		t.Errorf("GGML choices = %d, want the search and /opt", len(r.GGML))
	}
}

// TestBundleFollowsGGMLLoaderRules: in a bundle, llbuild serve starts bin/llama-server in
// the bundle's root, so ggml searches bin/ and the root together; with every variant at 0
// it loads the plain libggml-cpu.so; it skips names that do not end in exactly ".so".
func TestBundleFollowsGGMLLoaderRules(t *testing.T) {
	for _, c := range []struct {
		name       string
		files      map[string]string // bundle path → Debian variant (or "server")
		wantGGML   Status
		wantLoaded string // file ggml loads, "" for none
		server     string // the manifest's server object, if any
	}{
		{"bin/ and the root are one search", map[string]string{"bin/llama-server": "server", "bin/libggml-cpu-x64.so": "x64", "libggml-cpu-haswell.so": "haswell"},
			OK, "libggml-cpu-haswell.so", ""},
		{"every variant at 0 loads libggml-cpu.so", map[string]string{"lib/libggml-cpu-skylakex.so": "skylakex", "lib/libggml-cpu.so": "x64"},
			OK, "lib/libggml-cpu.so", ""},
		{"a .so.0 name is not a backend", map[string]string{"lib/libggml-cpu-skylakex.so": "skylakex", "lib/libggml-cpu-haswell.so.0": "haswell"},
			Fail, "", ""},
		{"run by the bundle's loader, ggml searches the loader's directory and the root",
			map[string]string{"bin/llama-server": "server", "lib/ld-linux-x86-64.so.2": "x64", "lib/libggml-cpu-haswell.so": "haswell", "libggml-cpu-x64.so": "x64"},
			OK, "lib/libggml-cpu-haswell.so", `{"executable":"bin/llama-server","loader":"lib/ld-linux-x86-64.so.2","libraryPath":["lib"]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var files []map[string]any
			for p, v := range c.files {
				data := debianServerOrVariant(t, v)
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, p), data, 0o755); err != nil {
					t.Fatal(err)
				}
				kind := "library"
				if v == "server" {
					kind = "executable"
				}
				files = append(files, map[string]any{"path": p, "kind": kind, "size": len(data)})
			}
			man := map[string]any{"files": files}
			if c.server != "" {
				man["server"] = json.RawMessage(c.server)
			}
			m, _ := json.Marshal(man)
			if err := os.WriteFile(filepath.Join(dir, "manifest.json"), m, 0o644); err != nil {
				t.Fatal(err)
			}
			bins, err := ReadBundle(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Name: dir, Binaries: bins})
			if len(r.GGML) != 1 {
				t.Fatalf("GGML choices = %+v, want one", r.GGML)
			}
			got := r.GGML[0]
			if got.Loaded != c.wantLoaded {
				t.Errorf("loaded = %q, want %q (scores %+v)", got.Loaded, c.wantLoaded, got.Scores)
			}
			for _, s := range got.Scores {
				if strings.HasSuffix(s.File, ".so.0") {
					t.Errorf("scored %s, which ggml's loader skips", s.File)
				}
			}
			if v := verdictFor(r, CheckGGMLVariant, got.Dir); v == nil || v.Status != c.wantGGML {
				t.Errorf("ggml verdict = %+v, want %s", v, c.wantGGML)
			}
		})
	}
}

func debianServerOrVariant(t *testing.T, v string) []byte {
	if v == "server" {
		return debianServer(t)
	}
	return variantFile(t, v)
}

// TestGGMLBackendPathLoadsWhateverItScores: ggml_backend_load_all loads the file
// GGML_BACKEND_PATH names after its searches, without scoring it. An AVX-512 variant named
// there runs on an AVX2 host even though the search picks haswell: its code is judged, not
// reported "not loaded".
func TestGGMLBackendPathLoadsWhateverItScores(t *testing.T) {
	host := loadTarget(t, "cpu-v3")
	t.Run("--binary", func(t *testing.T) {
		dir := dlBuild(t, "haswell")
		other := t.TempDir()
		linkInto(t, other, filepath.Join(debfetch.GGMLBackends(t), "libggml-cpu-skylakex.so"))
		t.Setenv("GGML_BACKEND_PATH", filepath.Join(other, "libggml-cpu-skylakex.so"))
		bins, err := ReadFiles(context.Background(), []string{filepath.Join(dir, "llama-server")})
		if err != nil {
			t.Fatal(err)
		}
		r := Check(host, "cpu-v3", Input{Name: "llama-server", Binaries: bins})
		if v := cpuVerdictEnding(r, "libggml-cpu-skylakex.so"); v == nil || v.Status != Fail || !strings.Contains(v.Reason, "GGML_BACKEND_PATH") {
			t.Errorf("skylakex verdict = %+v, want would fail, loaded by GGML_BACKEND_PATH", v)
		}
		if r.ExitCode() != 1 {
			t.Errorf("ExitCode = %d, want 1", r.ExitCode())
		}
	})
	t.Run("image", func(t *testing.T) {
		l := tarLayer(t, map[string][]byte{
			"app/llama-server":            debianServer(t),
			"app/libggml-cpu-haswell.so":  variantFile(t, "haswell"),
			"app/libggml-cpu-skylakex.so": variantFile(t, "skylakex"),
		})
		img, err := mutate.AppendLayers(empty.Image, l)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.Config(img, v1.Config{WorkingDir: "/app", Env: []string{"GGML_BACKEND_PATH=/app/libggml-cpu-skylakex.so"}}); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "oci")
		p, err := layout.Write(dir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendImage(img); err != nil {
			t.Fatal(err)
		}
		in, err := ReadImage(context.Background(), ImageSource{Archive: dir})
		if err != nil {
			t.Fatal(err)
		}
		r := Check(host, "cpu-v3", in)
		if len(r.GGML) != 1 || r.GGML[0].Loaded != "/app/libggml-cpu-haswell.so" {
			t.Errorf("GGML choices = %+v, want the search to pick haswell", r.GGML)
		}
		if v := verdictFor(r, CheckCPU, "/app/libggml-cpu-skylakex.so"); v == nil || v.Status != Fail {
			t.Errorf("skylakex verdict = %+v, want would fail (GGML_BACKEND_PATH loads it)", v)
		}
	})
}

// TestVariantsGGMLOnlyScoresStillRunTheirConstructors: ggml's loader dlopens every variant
// to call its ggml_backend_score, so a variant it does not pick still runs its constructors.
// One whose constructor is AVX-512 code kills an AVX2 host while ggml loads its backends, and
// must not read "ok: not loaded"; one whose constructor calls through a table of function
// pointers cannot be followed and is unknown. Code that only lies after a call that never
// returns (abort, __stack_chk_fail: the next function, as in upstream's own CUDA image, where
// ggml_backend_score.cold's stack check is followed by ggml_graph_compute's .cold part) is not
// run, with the file's symbols and stripped.
func TestVariantsGGMLOnlyScoresStillRunTheirConstructors(t *testing.T) {
	const abortsBeforeAVX512 = `#include <stdlib.h>
int ggml_backend_score(void) { if (getenv("GGML_SCORE_OFF")) return 0; abort(); }
void fill(float *t) { for (int i = 0; i < 1024; i++) t[i] = i * 0.5f; }
`
	for _, c := range []struct {
		name, src string
		want      Status
		mentions  string
		flags     []string
	}{
		{"an AVX-512 constructor", `float table[1024];
__attribute__((constructor)) static void fill(void) { for (int i = 0; i < 1024; i++) table[i] = i * 0.5f; }
int ggml_backend_score(void) { return 0; }
`, Fail, "AVX512F", nil},
		{"a constructor calling through a table", `static void a(void) {} static void b(void) {}
void (*hooks[])(void) = {a, b};
int n_hooks = 2;
__attribute__((constructor)) static void run(void) { for (int i = 0; i < n_hooks; i++) hooks[i](); }
int ggml_backend_score(void) { return 0; }
`, Unknown, "function pointers", nil},
		{"a baseline constructor", `int ready;
__attribute__((constructor)) static void init(void) { ready = 1; }
int ggml_backend_score(void) { return 0; }
`, OK, "not loaded", nil},
		{"a score ending in abort before AVX-512 code", abortsBeforeAVX512, OK, "not loaded", []string{"-fno-reorder-blocks-and-partition"}},
		{"a stripped score ending in abort before AVX-512 code", abortsBeforeAVX512, OK, "not loaded", []string{"-fno-reorder-blocks-and-partition", "-s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := gccBuild(t, dir, "libggml-cpu-skylakex.so", c.src, append([]string{"-shared", "-fPIC", "-mavx512f"}, c.flags...)...)
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := ReadBinary("backends/libggml-cpu-skylakex.so", f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			bins := append(readGGML(t, "haswell"), ours)
			r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Name: "backends", Binaries: bins})
			if len(r.GGML) != 1 || r.GGML[0].Loaded != "backends/libggml-cpu-haswell.so" {
				t.Fatalf("GGML choices = %+v, want haswell picked", r.GGML)
			}
			v := verdictFor(r, CheckCPU, "backends/libggml-cpu-skylakex.so")
			if v == nil || v.Status != c.want || !strings.Contains(v.Reason, c.mentions) {
				t.Errorf("skylakex verdict = %+v, want %s mentioning %q", v, c.want, c.mentions)
			}
		})
	}
}
