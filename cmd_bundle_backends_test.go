package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/preflight"
)

// debianLib is the multiarch library directory of Debian's packages.
const debianLib = "usr/lib/x86_64-linux-gnu"

// sysrootLayer is a layer of Debian sid's llama.cpp-tools and what it needs, extracted from
// the packages (llamatest's sysroot), laid out by place: each regular file or symlink under
// usr/ and etc/ goes to the image path place returns ("" leaves it out), with merged-usr's
// /lib64, /lib and /bin links added. Files llamatest added to the sysroot are not Debian's and
// stay out.
func sysrootLayer(t *testing.T, root string, place func(rel string) string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdirs := func(p string) {
		var parents []string
		for d := path.Dir(p); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range [][2]string{{"lib64", "usr/lib64"}, {"lib", "usr/lib"}, {"bin", "usr/bin"}} {
		if err := tw.WriteHeader(&tar.Header{Name: l[0], Typeflag: tar.TypeSymlink, Linkname: l[1], Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	for _, top := range []string{"usr", "etc"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == "usr/share" || rel == "usr/include" {
					return filepath.SkipDir
				}
				return nil
			}
			if rel == debianLib+"/ggml/backends0/ld-linux-x86-64.so.2" { // llamatest's copy
				return nil
			}
			to := place(rel)
			if to == "" {
				return nil
			}
			mkdirs(to)
			if d.Type()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				return tw.WriteHeader(&tar.Header{Name: to, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777})
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: to, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))}); err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return layer
}

// sysrootImage is an image of Debian's llama-server in one of the layouts users run:
//
//   - debian: the packages as apt installs them (FROM debian:sid, apt-get install
//     llama.cpp-tools): the server in /usr/bin, its backends in ggml/backends0, the directory
//     compiled into libggml.so;
//   - upstream: shaped as llama.cpp's own server images are (GGML_BACKEND_DL with every CPU
//     variant): the server, llama.cpp's libraries and the backends together in /app, the
//     working directory, and the C runtime from the base;
//   - pinned: a hand-written image that installs into /opt/llama and pins one CPU variant
//     with GGML_BACKEND_PATH (one backend wherever the image runs, so that every machine
//     computes the same bits).
func sysrootImage(t *testing.T, root, layout string) v1.Image {
	t.Helper()
	ours := func(rel string) bool {
		base := path.Base(rel)
		return strings.HasPrefix(rel, debianLib+"/") && (strings.HasPrefix(base, "libggml") || strings.HasPrefix(base, "libllama"))
	}
	var place func(string) string
	cfg := v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Entrypoint: []string{"llama-server"}, Cmd: []string{"--host", "0.0.0.0"}, WorkingDir: "/"}
	switch layout {
	case "debian":
		place = func(rel string) string { return rel }
	case "upstream":
		place = func(rel string) string {
			switch {
			case rel == "usr/bin/llama-server":
				return "app/llama-server"
			case ours(rel):
				return "app/" + path.Base(rel)
			case strings.HasPrefix(rel, "usr/bin/"):
				return ""
			}
			return rel
		}
		// Debian's server finds its libraries through RUNPATH /usr/lib/x86_64-linux-gnu/llama,
		// which this layout does not have; upstream's finds them beside it.
		cfg.Env = append(cfg.Env, "LD_LIBRARY_PATH=/app")
		cfg.Entrypoint, cfg.WorkingDir = []string{"/app/llama-server"}, "/app"
	case "pinned":
		place = func(rel string) string {
			switch {
			case rel == "usr/bin/llama-server":
				return "opt/llama/bin/llama-server"
			case strings.Contains(rel, "/ggml/backends0/"):
				if path.Base(rel) == "libggml-cpu-haswell.so" {
					return "opt/llama/lib/ggml/" + path.Base(rel)
				}
				return ""
			case ours(rel):
				return "opt/llama/lib/" + path.Base(rel)
			case strings.HasPrefix(rel, "usr/bin/"):
				return ""
			}
			return rel
		}
		cfg.Env = append(cfg.Env, "LD_LIBRARY_PATH=/opt/llama/lib", "GGML_BACKEND_PATH=/opt/llama/lib/ggml/libggml-cpu-haswell.so")
		cfg.Entrypoint = []string{"/opt/llama/bin/llama-server"}
	default:
		t.Fatalf("no layout %q", layout)
	}
	img, err := mutate.AppendLayers(imagetest.BaseImage(t), sysrootLayer(t, root, place))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Labels = map[string]string{"org.opencontainers.image.version": "debian-sid-" + layout}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// The Olares One owner's day with the images he would run today: Debian's llama.cpp-tools as
// apt installs it, the same files as upstream's images place them, and a hand-written image
// that pins one CPU variant. bundle --image takes what ggml loads at run time (the backends
// in the directory compiled into libggml.so, beside the server, the one GGML_BACKEND_PATH
// names) and records which one the target's CPU loads; preflight --bundle proves a backend
// loads; serve answers a completion with echo and logprobs; the bench runs all three against
// an own build with every canary passing. The bundle of the image as bundle --image made it
// before (no backends) is a "would fail" with the reason, and serve refuses it before
// starting anything.
func TestBundleImageTakesTheGGMLBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real llama-servers")
	}
	root := llamatest.Server(t).Root
	own := enginetest.PatchedServer(t)
	a, err := artifacts.Open(filepath.Dir(own))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	bundle := func(name string, from ...string) (string, *manifest.Manifest) {
		t.Helper()
		o := filepath.Join(dir, name)
		args := append([]string{"bundle", "-t", "cpu-v3", "--model", model, "--ctx-size", "1024", "--threads", "2", "--parallel", "1", "-o", o, "-q"}, from...)
		code, _, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("bundle %v: exit %d\n%s", from, code, stderr)
		}
		m, err := manifest.Load(o)
		if err != nil {
			t.Fatal(err)
		}
		return o, m
	}
	preflightOf := func(b string, args ...string) (int, *preflight.Report) {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"preflight", "--bundle", b, "--json"}, args...)...)
		var r preflight.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("preflight --bundle %s: exit %d, %v\n%s\n%s", b, code, err, stdout, stderr)
		}
		return code, &r
	}
	backendVerdict := func(r *preflight.Report) preflight.Verdict {
		for _, v := range r.Verdicts {
			if v.Check == preflight.CheckGGMLBackends && strings.HasPrefix(v.Subject, "CPU") {
				return v
			}
		}
		return preflight.Verdict{}
	}

	ownB, _ := bundle("own", "--artifacts", a.Dir)
	layouts := []struct {
		name, cpu, search, from string
		backends                int
	}{
		// cpu-v3 is x86-64-v3 with nothing above: haswell scores highest
		{"debian", "lib/libggml-cpu-haswell.so", "GGML_BACKEND_DIR", "/usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-cpu-haswell.so", 14},
		{"upstream", "lib/libggml-cpu-haswell.so", "the server's directory", "/app/libggml-cpu-haswell.so", 14},
		{"pinned", "lib/ggml-backend-path/libggml-cpu-haswell.so", "GGML_BACKEND_PATH", "/opt/llama/lib/ggml/libggml-cpu-haswell.so", 1},
	}
	var bundles []string
	for _, l := range layouts {
		b, m := bundle(l.name, "--image", "oci-layout:"+imagetest.WriteLayout(t, sysrootImage(t, root, l.name)))
		bundles = append(bundles, b)
		g := m.Server.GGML
		if g == nil || len(g.Backends) != l.backends || g.CPU != l.cpu {
			t.Fatalf("%s: server.ggml = %+v, want %d backends and %s for cpu-v3", l.name, g, l.backends, l.cpu)
		}
		i := slices.IndexFunc(g.Backends, func(b manifest.GGMLBackend) bool { return b.Path == l.cpu })
		if i < 0 || g.Backends[i].Search != l.search || g.Backends[i].From != l.from || g.Backends[i].Variant != "haswell" {
			t.Errorf("%s: backends %+v, want %s from %s found by %s", l.name, g.Backends, l.cpu, l.from, l.search)
		}
		if (l.name == "debian") != (g.CompiledDir == "/usr/lib/x86_64-linux-gnu/ggml/backends0") {
			t.Errorf("%s: compiled backend dir %q", l.name, g.CompiledDir)
		}
		if env := m.Server.Env["GGML_BACKEND_PATH"]; (l.name == "pinned") != (env == l.cpu) {
			t.Errorf("%s: GGML_BACKEND_PATH %q", l.name, env)
		}
		code, r := preflightOf(b, "-t", "cpu-v3")
		if v := backendVerdict(r); code != 0 || v.Status != preflight.OK || !strings.Contains(v.Reason, l.cpu) {
			t.Errorf("%s: preflight --bundle -t cpu-v3: exit %d, CPU backend %+v; want ok with %s", l.name, code, v, l.cpu)
		}
	}
	// a CPU with SSE4.2 alone scores every variant but x64 and sse42 0: the pinned haswell
	// does not load there, and with nothing else nothing loads
	v3, err := os.ReadFile("targets/cpu-v3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v2 := strings.NewReplacer("name: cpu-v3", "name: cpu-v2", "features: [SSE42, AVX, AVX2, FMA, F16C, BMI1, BMI2]", "features: [SSE42]", ": true", ": false").Replace(string(v3))
	v2 = strings.Replace(v2, "GGML_SSE42: false", "GGML_SSE42: true", 1)
	v2File := filepath.Join(dir, "cpu-v2.yaml")
	if err := os.WriteFile(v2File, []byte(v2), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, r := preflightOf(bundles[2], "--target-file", v2File); code != 1 || backendVerdict(r).Status != preflight.Fail {
		t.Errorf("the pinned bundle on cpu-v2: exit %d, CPU backend %+v; want would fail", code, backendVerdict(r))
	}
	if _, r := preflightOf(bundles[0], "--target-file", v2File); backendVerdict(r).Status != preflight.OK || !strings.Contains(backendVerdict(r).Reason, "libggml-cpu-sse42.so") {
		t.Errorf("the Debian bundle on cpu-v2: CPU backend %+v; want sse42", backendVerdict(r))
	}

	for i, b := range bundles {
		srv := startServe(t, b)
		if rows := srv.echoRows(t, layouts[i].name); len(rows) < 4 || rows[0] != nil || rows[1] == nil {
			t.Errorf("%s: echo rows %v, want null then logprobs", layouts[i].name, rows)
		}
		if c := srv.stop(t); c != 0 {
			t.Errorf("%s: serve exited %d:\n%s", layouts[i].name, c, srv.stderr.String())
		}
	}

	benchDir := t.TempDir()
	code, stdout, stderr := benchRun(t, append([]string{ownB}, append(bundles, "--dir", benchDir, "--rounds", "1", "--canaries", "2", "--prompt-tokens", "32", "--generate", "8", "--json")...)...)
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Runs) != 4 {
		t.Fatalf("bench --json: %v, want 4 runs\n%s", err, stdout)
	}
	for _, r := range readRecords(t, benchDir).Runs {
		if c := readRecord(t, filepath.Join(benchDir, r.Dir, "record.json")).Canary; c.Checks != 2 || c.Passed != 2 {
			t.Errorf("%s: canaries %d/%d, want 2/2", r.Bundle, c.Passed, c.Checks)
		}
	}

	// the Debian bundle as bundle --image made it before: no backends
	rewrite := func(name string, change func(m *manifest.Manifest, dir string)) string {
		t.Helper()
		to := filepath.Join(dir, name)
		if err := os.CopyFS(to, os.DirFS(bundles[0])); err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Load(to)
		if err != nil {
			t.Fatal(err)
		}
		change(m, to)
		enc, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, manifest.FileName), enc, 0o644); err != nil {
			t.Fatal(err)
		}
		return to
	}
	old := rewrite("old", func(m *manifest.Manifest, old string) {
		m.SchemaVersion, m.Server.GGML = 2, nil
		m.Files = slices.DeleteFunc(m.Files, func(f manifest.File) bool {
			if strings.HasPrefix(path.Base(f.Path), "libggml-cpu-") {
				os.Remove(filepath.Join(old, f.Path))
				return true
			}
			return false
		})
	})
	if code, r := preflightOf(old, "-t", "cpu-v3"); code != 1 || backendVerdict(r).Status != preflight.Fail || !strings.Contains(backendVerdict(r).Reason, "no backends are loaded") {
		t.Errorf("the bundle without backends: exit %d, CPU backend %+v; want would fail, saying why", code, backendVerdict(r))
	}
	code, _, stderr = runCLI(t, "serve", old, "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "no CPU backend") || strings.Contains(stderr, "restarting") {
		t.Errorf("serve of the bundle without backends: exit %d, want 1 before starting llama-server, saying why\n%s", code, stderr)
	}

	// on a machine where the directory compiled into libggml.so holds backends (Debian's
	// libggml0 installed), ggml would weigh them with the bundle's: serve says so
	here := t.TempDir()
	if err := os.WriteFile(filepath.Join(here, "libggml-cpu-haswell.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	withHost := rewrite("host-backends", func(m *manifest.Manifest, _ string) { m.Server.GGML.CompiledDir = here })
	srv := startServe(t, withHost)
	if c := srv.stop(t); c != 0 || !strings.Contains(srv.stderr.String(), "this machine has ggml backends in the directory compiled into") {
		t.Errorf("serve with backends in the compiled-in directory: exit %d, want a warning\n%s", c, srv.stderr.String())
	}
}
