package preflight

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, mustRead(t, from), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestReadBundle(t *testing.T) {
	backends := debfetch.GGMLBackends(t)
	dir := t.TempDir()
	for _, v := range allX86Variants {
		copyFile(t, filepath.Join(backends, "libggml-cpu-"+v+".so"), filepath.Join(dir, "lib", "libggml-cpu-"+v+".so"))
	}
	copyFile(t, filepath.Join(backends, "../../libggml-base.so.0"), filepath.Join(dir, "lib", "libggml-base.so.0"))
	if _, err := os.Stat("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		copyFile(t, "/lib/x86_64-linux-gnu/libc.so.6", filepath.Join(dir, "lib", "libc.so.6"))
	}
	// A manifest that lists no executables or libraries: the directories are walked.
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"files":[{"path":"models/tiny.gguf","kind":"model","size":8}]}`), 0o644)
	os.MkdirAll(filepath.Join(dir, "models"), 0o755)
	os.WriteFile(filepath.Join(dir, "models", "tiny.gguf"), []byte("GGUF...."), 0o644)

	bins, err := ReadBundle(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	decoded := 0
	for _, b := range bins {
		if strings.HasPrefix(b.Path, "models/") || b.Path == "manifest.json" {
			t.Errorf("ReadBundle read %s, want only bin/ and lib/ ELF files", b.Path)
		}
		if b.Path == "lib/libc.so.6" && b.Code != nil {
			t.Errorf("glibc's code was decoded; its AVX-512 paths are dispatched at run time and must not be judged")
		}
		if b.Code != nil {
			decoded++
		}
	}
	if decoded != len(allX86Variants)+1 {
		t.Errorf("decoded %d files, want %d (the variants and libggml-base)", decoded, len(allX86Variants)+1)
	}
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Name: dir, Binaries: bins})
	if len(r.GGML) != 1 || r.GGML[0].Loaded != "lib/libggml-cpu-haswell.so" || r.ExitCode() != 0 {
		t.Errorf("GGML = %+v, exit %d; want haswell loaded and exit 0", r.GGML, r.ExitCode())
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ggml would load libggml-cpu-haswell.so (score 64)") {
		t.Errorf("text report lacks the chosen variant:\n%s", text.String())
	}
	if err := r.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"exitCode": 0`) {
		t.Errorf("JSON report (%v) lacks exitCode 0", err)
	}
}

func FuzzReadBinary(f *testing.F) {
	fb, _ := os.ReadFile("fatbin/testdata/realbuild/mixed.nv_fatbin")
	f.Add(buildELF([]byte{0x62, 0xf1, 0x75, 0x48, 0xfe, 0xd0, 0xc3}, fb, "libggml-cuda.so", "libcudart.so.13"))
	f.Add(buildELF([]byte{0xc5, 0xf5, 0xfe, 0xd0}, nil, "", "libc.so.6"))
	if _, err := exec.LookPath("gcc"); err == nil {
		// A real ifunc library: resolvers, IRELATIVE or IFUNC symbols, .eh_frame, RELR.
		dir := f.TempDir()
		src := filepath.Join(dir, "c.c")
		os.WriteFile(src, []byte(clonesSrc), 0o644)
		lib := filepath.Join(dir, "libc.so")
		if exec.Command("gcc", "-O2", "-shared", "-fPIC", "-Wl,-z,pack-relative-relocs", "-o", lib, src).Run() == nil ||
			exec.Command("gcc", "-O2", "-shared", "-fPIC", "-o", lib, src).Run() == nil {
			if data, err := os.ReadFile(lib); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Named as a ggml CPU variant, the code its loader runs at dlopen is followed too.
		if _, err := ReadBinary("libggml-cpu-skylakex.so", bytes.NewReader(data)); err != nil {
			return
		}
		b, err := ReadBinary("fuzz.so", bytes.NewReader(data))
		if err != nil {
			return
		}
		_ = b.CUDARuntimeMajor()
		r := Check(nvidiaHost("12.0", "geforce", "590.44.01", "13.1"), "fuzz", Input{Binaries: []*Binary{b}})
		var buf bytes.Buffer
		if err := r.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
	})
}

func TestReadBundleFollowsManifest(t *testing.T) {
	backends := debfetch.GGMLBackends(t)
	dir := t.TempDir()
	copyFile(t, filepath.Join(backends, "libggml-cpu-haswell.so"), filepath.Join(dir, "lib", "libggml-cpu-haswell.so"))
	copyFile(t, filepath.Join(backends, "libggml-cpu-zen4.so"), filepath.Join(dir, "lib", "libggml-cpu-zen4.so")) // not listed
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"files":[
		{"path":"lib/libggml-cpu-haswell.so","kind":"library","size":1},
		{"path":"lib/libggml-cpu-haswell.so.0","kind":"library","link":"libggml-cpu-haswell.so"}]}`), 0o644)
	bins, err := ReadBundle(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(bins) != 1 || bins[0].Path != "lib/libggml-cpu-haswell.so" {
		t.Errorf("ReadBundle = %d binaries (%v), want only the listed lib/libggml-cpu-haswell.so", len(bins), bins)
	}
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"files":[], "extra": 1}`), 0o644)
	if _, err := ReadBundle(context.Background(), dir); err == nil {
		t.Error("ReadBundle with an unknown manifest field = nil error, want one")
	}
}

// TestReadBundleRefusesAFile checks that --bundle given an archive (or any file) is an
// error, not a bundle with nothing to check that passes.
func TestReadBundleRefusesAFile(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "bundle.tar.zst")
	if err := os.WriteFile(archive, []byte("\x28\xb5\x2f\xfd not really zstd"), 0o644); err != nil {
		t.Fatal(err)
	}
	bins, err := ReadBundle(context.Background(), archive)
	if err == nil || !strings.Contains(err.Error(), "not a bundle directory") {
		t.Errorf("ReadBundle(a file) = %d binaries, error %v; want a 'not a bundle directory' error", len(bins), err)
	}
}

// TestReadFilesNamesADirectory checks that --binary given a directory says so and points at
// --bundle, instead of calling the directory "not an ELF file".
func TestReadFilesNamesADirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadFiles(context.Background(), []string{dir})
	if err == nil || !strings.Contains(err.Error(), "is a directory") || !strings.Contains(err.Error(), "--bundle") {
		t.Errorf("ReadFiles(a directory) error = %v, want one saying it is a directory and naming --bundle", err)
	}
}
