package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/llbuild/llbuild/internal/enginetest"
)

// entry is one tar entry of a test layer: a file (body), a symbolic link (link) or a hard link
// (hard).
type entry struct {
	name, link, hard string
	body             []byte
}

func layerOf(t *testing.T, entries []entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o755}
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		case e.hard != "":
			h.Typeflag, h.Linkname = tar.TypeLink, e.hard
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// elves compiles the ELF files of an image the way a llama.cpp image holds them: a server whose
// RUNPATH is $ORIGIN/../lib, a library in that directory needing another one found only through
// ld.so.conf and the GPU driver's libcuda.so.1, and a backend that nothing names.
func elves(t *testing.T) map[string][]byte {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		enginetest.SkipUnlessCI(t, "no gcc to compile the test's ELF files")
	}
	dir := t.TempDir()
	src := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	o := func(name string) string { return filepath.Join(dir, name) }
	run("-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", o("libcuda.so.1"), src("cuda.c", "int cuInit(unsigned f) { return (int)f; }\n"))
	run("-shared", "-fPIC", "-Wl,-soname,libfoo.so.1", "-o", o("libfoo.so.1.0"), src("foo.c", "int foo(void) { return 1; }\n"))
	if err := os.Symlink("libfoo.so.1.0", o("libfoo.so.1")); err != nil {
		t.Fatal(err)
	}
	run("-shared", "-fPIC", "-Wl,-soname,libbar.so.2", "-Wl,--no-as-needed", "-o", o("libbar.so.2.0"), src("bar.c", "int foo(void); int cuInit(unsigned); int bar(void) { return foo() + cuInit(0); }\n"),
		"-L"+dir, "-l:libfoo.so.1", "-l:libcuda.so.1")
	if err := os.Symlink("libbar.so.2.0", o("libbar.so.2")); err != nil {
		t.Fatal(err)
	}
	// a GGML_BACKEND_DL libggml.so: it links no CPU backend
	run("-shared", "-fPIC", "-Wl,-soname,libggml.so.0", "-o", o("libggml.so.0"), src("ggml.c", "int ggml(void) { return 2; }\n"))
	run("-o", o("llama-server"), src("server.c", "int bar(void); int ggml(void); int main(void) { return bar() + ggml(); }\n"), "-L"+dir, "-l:libbar.so.2", "-l:libggml.so.0", "-Wl,--no-as-needed",
		"-Wl,-rpath,$ORIGIN/../lib", "-Wl,--enable-new-dtags", "-Wl,-rpath-link,"+dir)
	run("-shared", "-fPIC", "-o", o("libggml-cpu-haswell.so"), src("be.c", "int backend(void) { return 3; }\n"))
	files := map[string][]byte{}
	for _, n := range []string{"libfoo.so.1.0", "libbar.so.2.0", "libggml.so.0", "llama-server", "libggml-cpu-haswell.so", "libcuda.so.1"} {
		b, err := os.ReadFile(o(n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("this machine's C library: %v", err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func testImage(t *testing.T, f map[string][]byte, entrypoint []string, env []string, drop string) v1.Image {
	t.Helper()
	base := []entry{
		// merged /usr, as Debian's and Ubuntu's images are: /lib and /lib64 are links
		{name: "lib", link: "usr/lib"},
		{name: "lib64", link: "usr/lib64"},
		{name: "usr/lib/x86_64-linux-gnu/libc.so.6", body: f["libc.so.6"]},
		{name: "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", body: f["ld-linux-x86-64.so.2"]},
		{name: "usr/lib64/ld-linux-x86-64.so.2", link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{name: "etc/ld.so.conf", body: []byte("include /etc/ld.so.conf.d/*.conf\n")},
		{name: "etc/ld.so.conf.d/foo.conf", body: []byte("# the foo library\n/opt/foo/lib\n")},
		// a stub of the driver library, as CUDA devel images hold: never taken
		{name: "usr/local/cuda/lib64/stubs/libcuda.so.1", body: f["libcuda.so.1"]},
	}
	app := []entry{
		{name: "opt/foo/lib/libfoo.so.1.0", body: f["libfoo.so.1.0"]},
		{name: "opt/foo/lib/libfoo.so.1", link: "libfoo.so.1.0"},
		{name: "app/bin/llama-server", body: f["llama-server"]},
		{name: "app/lib/libbar.so.2.0", body: f["libbar.so.2.0"]},
		{name: "app/lib/libbar.so.2", hard: "app/lib/libbar.so.2.0"},
		{name: "app/lib/libggml.so.0", body: f["libggml.so.0"]},
		{name: "app/bin/libggml-cpu-haswell.so", body: f["libggml-cpu-haswell.so"]},
		{name: "app/README", body: []byte(strings.Repeat("not an ELF file\n", 8))},
	}
	var kept []entry
	for _, e := range app {
		if e.name != drop {
			kept = append(kept, e)
		}
	}
	return linuxImage(t, func(c *v1.Config) { c.Entrypoint, c.Env = entrypoint, env }, layerOf(t, base), layerOf(t, kept))
}

// linuxImage is an amd64 Linux image of layers whose config set fills in.
func linuxImage(t *testing.T, set func(*v1.Config), layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	set(&cf.Config)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// The loader's search, on an image shaped as the real ones are: merged /usr links, a RUNPATH
// with $ORIGIN, a library found through ld.so.conf's include, a hard link standing for a soname,
// a GGML_BACKEND_DL backend beside the server, the driver's libcuda.so.1 left to the host (its
// stub in the image never taken), the image's own loader and C library kept.
func TestExtractServerFindsWhatTheLoaderWould(t *testing.T) {
	f := elves(t)
	img := testImage(t, f, []string{"llama-server", "--host", "0.0.0.0"}, []string{"PATH=/usr/bin:/app/bin"}, "")
	s, err := ExtractServer(context.Background(), img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sf := range s.Files {
		switch {
		case sf.Link != "":
			got[sf.Name] = "-> " + sf.Link
		default:
			got[sf.Name] = sf.ImagePath
		}
	}
	want := map[string]string{
		"llama-server":           "/app/bin/llama-server",
		"libbar.so.2.0":          "/app/lib/libbar.so.2.0",
		"libbar.so.2":            "-> libbar.so.2.0",
		"libfoo.so.1.0":          "/opt/foo/lib/libfoo.so.1.0",
		"libfoo.so.1":            "-> libfoo.so.1.0",
		"libc.so.6":              "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"ld-linux-x86-64.so.2":   "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"libggml-cpu-haswell.so": "/app/bin/libggml-cpu-haswell.so",
		"libggml.so.0":           "/app/lib/libggml.so.0",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected file %s (%s)", k, got[k])
		}
	}
	if s.Path != "/app/bin/llama-server" || s.Loader != "ld-linux-x86-64.so.2" || !slices.Equal(s.Host, []string{"libcuda.so.1"}) {
		t.Errorf("server %s, loader %q, host %v: want /app/bin/llama-server, the image's loader, libcuda.so.1 from the host", s.Path, s.Loader, s.Host)
	}
	wantBackends := []Backend{{Name: "libggml-cpu-haswell.so", Backend: "cpu", Variant: "haswell", ImagePath: "/app/bin/libggml-cpu-haswell.so", Search: "the server's directory"}}
	if !slices.Equal(s.Backends, wantBackends) || s.BackendDir != "" || s.BackendPath != "" {
		t.Errorf("backends %+v (dir %q, path %q), want %+v", s.Backends, s.BackendDir, s.BackendPath, wantBackends)
	}
	for _, sf := range s.Files {
		if sf.Link != "" {
			continue
		}
		b, err := os.ReadFile(sf.From)
		if err != nil {
			t.Fatal(err)
		}
		want := f[filepath.Base(sf.ImagePath)]
		if sf.Name == "libbar.so.2.0" {
			want = f["libbar.so.2.0"]
		}
		if !bytes.Equal(b, want) {
			t.Errorf("%s: the extracted bytes are not the image's", sf.Name)
		}
	}
}

// What the loader could not find is named with who needs it, and a server that cannot be told
// apart is refused with the candidates.
func TestExtractServerRefusals(t *testing.T) {
	f := elves(t)
	img := testImage(t, f, []string{"/app/bin/llama-server"}, nil, "opt/foo/lib/libfoo.so.1.0")
	if _, err := ExtractServer(context.Background(), img, t.TempDir()); err == nil || !strings.Contains(err.Error(), "libfoo.so.1 (needed by /app/lib/libbar.so.2.0)") {
		t.Errorf("an image without libfoo: %v, want it named with who needs it", err)
	}
	// no entrypoint, and a second llama-server: which one runs is not clear
	two, err := mutate.AppendLayers(testImage(t, f, nil, nil, ""), layerOf(t, []entry{{name: "usr/local/bin/llama-server", body: f["llama-server"]}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExtractServer(context.Background(), two, t.TempDir()); err == nil || !strings.Contains(err.Error(), "2 llama-server files (/app/bin/llama-server, /usr/local/bin/llama-server)") {
		t.Errorf("two servers: %v, want both named", err)
	}
}

// A CMake build tree's server, as upstream's images hold it: RUNPATH "BUILD/bin:", the build
// directory gone from the image and an empty entry, which glibc's loader reads as the working
// directory: its libraries are found in /app, the image's WORKDIR, and in no other.
func TestExtractServerReadsAnEmptyRunpathEntryAsTheWorkingDirectory(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		enginetest.SkipUnlessCI(t, "no gcc to compile the test's ELF files")
	}
	dir := t.TempDir()
	o := func(name string) string { return filepath.Join(dir, name) }
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-Wl,-soname,libllama.so.0", "-o", o("libllama.so.0"), "-x", "c", "-"},
		{"-o", o("llama-server"), "-x", "c", "-", "-x", "none", "-L" + dir, "-l:libllama.so.0", "-Wl,--no-as-needed", "-Wl,-rpath,/app/build/bin:", "-Wl,--enable-new-dtags"},
	} {
		body := "int llama(void) { return 1; }\n"
		if slices.Contains(args, o("llama-server")) {
			body = "int llama(void); int main(void) { return llama(); }\n"
		}
		cmd := exec.Command(gcc, args...)
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	f := map[string][]byte{}
	for _, p := range []string{o("libllama.so.0"), o("llama-server"), "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("this machine's C library: %v", err)
		}
		f[filepath.Base(p)] = b
	}
	image := func(wd string) v1.Image {
		return linuxImage(t, func(c *v1.Config) { c.Entrypoint, c.WorkingDir = []string{"/app/llama-server"}, wd }, layerOf(t, []entry{
			{name: "lib", link: "usr/lib"},
			{name: "lib64", link: "usr/lib64"},
			{name: "usr/lib/x86_64-linux-gnu/libc.so.6", body: f["libc.so.6"]},
			{name: "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", body: f["ld-linux-x86-64.so.2"]},
			{name: "usr/lib64/ld-linux-x86-64.so.2", link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
			{name: "app/llama-server", body: f["llama-server"]},
			{name: "app/libllama.so.0", body: f["libllama.so.0"]},
		}))
	}
	s, err := ExtractServer(context.Background(), image("/app"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.Files, func(sf ServerFile) bool { return sf.Name == "libllama.so.0" })
	if i < 0 || s.Files[i].ImagePath != "/app/libllama.so.0" {
		t.Errorf("files %+v, want libllama.so.0 from /app, the working directory", s.Files)
	}
	if _, err := ExtractServer(context.Background(), image("/"), t.TempDir()); err == nil || !strings.Contains(err.Error(), "libllama.so.0") {
		t.Errorf("working directory /: %v, want libllama.so.0 missing", err)
	}
}
