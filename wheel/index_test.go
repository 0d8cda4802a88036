package wheel

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
)

// pureWheel writes a valid pure-Python wheel of llama_cpp_python at version: what pip needs
// to download and install it (METADATA, WHEEL, RECORD with digests) and a module that says
// its version.
func pureWheel(t testing.TB, dir, version string) string {
	t.Helper()
	name := fmt.Sprintf("llama_cpp_python-%s-py3-none-any.whl", version)
	info := "llama_cpp_python-" + version + ".dist-info/"
	files := []struct{ name, body string }{
		{"llama_cpp/__init__.py", fmt.Sprintf("__version__ = %q\n", version)},
		{info + "METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: %s\nRequires-Python: >=3.8\n\nA test wheel.\n", version)},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: llbuild-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	w, _ := z.Create(info + "RECORD")
	w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// artifactWith writes an artifact directory under out holding one wheel, as llbuild wheel does.
func artifactWith(t testing.TB, out, target, version string) string {
	t.Helper()
	whl := pureWheel(t, t.TempDir(), version)
	sum := sha256.Sum256([]byte(target + version))
	dir, err := artifacts.Write(out, artifacts.Input{
		Target:   target,
		PlanHash: hex.EncodeToString(sum[:]),
		Files:    []artifacts.InputFile{{Path: filepath.Base(whl), From: whl, Kind: artifacts.KindWheel}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"llama_cpp_python":  "llama-cpp-python",
		"Llama.CPP__Python": "llama-cpp-python",
		"llama-cpp-python":  "llama-cpp-python",
		"a-_.b":             "a-b",
	} {
		if got := NormalizeName(in); got != want {
			t.Errorf("NormalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFilename(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Filename
		wantErr bool
	}{
		{"local label kept in the version", "llama_cpp_python-0.3.34+cu131.sm86.avx2-py3-none-linux_x86_64.whl", Filename{"llama_cpp_python", "0.3.34+cu131.sm86.avx2", "", "py3", "none", "linux_x86_64"}, false},
		{"build tag", "pkg-1.0-1-py3-none-any.whl", Filename{"pkg", "1.0", "1", "py3", "none", "any"}, false},
		{"not a wheel", "pkg-1.0.tar.gz", Filename{}, true},
		{"too few parts", "pkg-1.0-py3.whl", Filename{}, true},
		{"a path", "a/pkg-1.0-py3-none-any.whl", Filename{}, true},
		{"an empty part", "pkg--py3-none-any.whl", Filename{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFilename(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseFilename(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseFilename(f *testing.F) {
	for _, s := range []string{"llama_cpp_python-0.3.34+cpu.avx2-py3-none-linux_x86_64.whl", "a-1-2-py3-none-any.whl", "-.whl", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fn, err := ParseFilename(s)
		if err != nil {
			return
		}
		joined := strings.Join([]string{fn.Distribution, fn.Version, fn.Python, fn.ABI, fn.Platform}, "-")
		if fn.Build != "" {
			joined = strings.Join([]string{fn.Distribution, fn.Version, fn.Build, fn.Python, fn.ABI, fn.Platform}, "-")
		}
		if joined+".whl" != s {
			t.Errorf("ParseFilename(%q) = %+v, which does not join back", s, fn)
		}
	})
}

func TestIndexLayoutAndLinks(t *testing.T) {
	out := t.TempDir()
	artifactWith(t, out, "rtx3090", "0.3.99+cu131.sm86.avx2")
	artifactWith(t, out, "cpu-v3", "0.3.99+cpu.avx2")
	artifactWith(t, out, "olares-one", "0.3.99+cu131.sm120a.avx2.vnni")
	es, err := Collect(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "index")
	if err := WriteIndex(idx, es); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(idx, "cu131", "simple", "llama-cpp-python", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`<a href="([^"]+)"[^>]*>([^<]+)</a>`).FindAllStringSubmatch(string(page), -1)
	if len(links) != 2 {
		t.Fatalf("cu131 project page has %d links, want 2:\n%s", len(links), page)
	}
	for _, l := range links {
		file, frag, _ := strings.Cut(l[1], "#sha256=")
		b, err := os.ReadFile(filepath.Join(idx, "cu131", "simple", "llama-cpp-python", file))
		if err != nil {
			t.Fatalf("link %s: %v", l[1], err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != frag {
			t.Errorf("link %s: fragment does not match the file's sha256 %x", l[1], sum)
		}
		if !strings.Contains(l[2], "+cu131.") {
			t.Errorf("cu131 index links %s", l[2])
		}
	}
	if !strings.Contains(string(page), `data-requires-python="&gt;=3.8"`) {
		t.Errorf("project page lacks data-requires-python, HTML-escaped:\n%s", page)
	}
	root, _ := os.ReadFile(filepath.Join(idx, "cpu", "simple", "index.html"))
	if !strings.Contains(string(root), `<a href="llama-cpp-python/">llama-cpp-python</a>`) {
		t.Errorf("cpu root page does not link the normalized project name:\n%s", root)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(idx), ".tmp-*")); len(m) > 0 {
		t.Errorf("temporary directories left: %v", m)
	}

	// Writing again replaces the index whole.
	if err := WriteIndex(idx, es[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(idx, "cu131")); err == nil && es[0].Variant != "cu131" {
		t.Errorf("a rewritten index kept the cu131 variant it no longer has")
	}
}

func TestIndexRefusals(t *testing.T) {
	t.Run("a directory that is not an index is not replaced", func(t *testing.T) {
		out := t.TempDir()
		artifactWith(t, out, "cpu-v3", "0.3.99+cpu.avx2")
		es, err := Collect(context.Background(), out)
		if err != nil {
			t.Fatal(err)
		}
		precious := t.TempDir()
		os.WriteFile(filepath.Join(precious, "notes.txt"), []byte("keep"), 0o644)
		err = WriteIndex(precious, es)
		if err == nil || !strings.Contains(err.Error(), "not a wheel index") {
			t.Errorf("WriteIndex(non-index dir) = %v, want a refusal", err)
		}
		if _, err := os.Stat(filepath.Join(precious, "notes.txt")); err != nil {
			t.Errorf("the directory's file is gone: %v", err)
		}
	})
	t.Run("a wheel changed after it was built is refused", func(t *testing.T) {
		out := t.TempDir()
		dir := artifactWith(t, out, "cpu-v3", "0.3.99+cpu.avx2")
		whls, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
		os.Chmod(whls[0], 0o644)
		f, _ := os.OpenFile(whls[0], os.O_APPEND|os.O_WRONLY, 0)
		f.Write([]byte("x"))
		f.Close()
		if _, err := Collect(context.Background(), out); err == nil || !strings.Contains(err.Error(), "artifacts.json says") {
			t.Errorf("Collect() = %v, want a digest mismatch", err)
		}
	})
	t.Run("a wheel without a local label has no variant", func(t *testing.T) {
		out := t.TempDir()
		artifactWith(t, out, "cpu-v3", "0.3.99")
		if _, err := Collect(context.Background(), out); err == nil || !strings.Contains(err.Error(), "no local label") {
			t.Errorf("Collect() = %v, want a refusal naming the missing label", err)
		}
	})
	t.Run("no wheels", func(t *testing.T) {
		if _, err := Collect(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "no wheels") {
			t.Errorf("Collect(empty) = %v, want an error", err)
		}
	})
	t.Run("two different wheels of one name", func(t *testing.T) {
		a, b := t.TempDir(), t.TempDir()
		artifactWith(t, a, "cpu-v3", "0.3.99+cpu.avx2")
		dir := artifactWith(t, b, "cpu-v3-copy", "0.3.99+cpu.avx2")
		// Same name, other bytes: a rebuilt wheel from a different plan.
		whls, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
		ea, _ := Collect(context.Background(), a)
		eb, _ := Collect(context.Background(), b)
		eb[0].SHA256 = strings.Repeat("0", 64)
		eb[0].From = whls[0]
		err := WriteIndex(filepath.Join(t.TempDir(), "idx"), append(ea, eb...))
		if err == nil || !strings.Contains(err.Error(), "two different wheels") {
			t.Errorf("WriteIndex(clash) = %v, want a refusal", err)
		}
	})
}

// needPip skips (fails in CI) when pip cannot run here.
func needPip(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-m", "pip", "--version").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pip is required in CI (apt-get install python3-pip): %v\n%s", err, out)
		}
		t.Skipf("no pip: %v", err)
	}
	return py
}

func pip(t *testing.T, py string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-m", "pip", "--disable-pip-version-check", "--no-cache-dir", "--retries", "0", "--timeout", "5"}, args...)...)
	cmd.Env = append(os.Environ(), "PIP_CONFIG_FILE=/dev/null", "PIP_NO_INPUT=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPipInstallsFromTheIndex serves the index over HTTP on the loopback and lets the real pip
// find, check (#sha256) and fetch the right wheel, by --index-url and by --extra-index-url.
func TestPipInstallsFromTheIndex(t *testing.T) {
	py := needPip(t)
	out := t.TempDir()
	artifactWith(t, out, "rtx3090", "0.3.99+cu131.sm86.avx2")
	artifactWith(t, out, "cpu-v3", "0.3.99+cpu.avx2")
	es, err := Collect(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "index")
	if err := WriteIndex(idx, es); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(idx)))
	defer srv.Close()

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"download by --index-url, local label pinned", []string{"download", "--no-deps", "--index-url", srv.URL + "/cpu/simple", "llama-cpp-python==0.3.99+cpu.avx2"}, "llama_cpp_python-0.3.99+cpu.avx2-py3-none-any.whl"},
		{"download by --index-url, public version only", []string{"download", "--no-deps", "--index-url", srv.URL + "/cu131/simple", "llama-cpp-python==0.3.99"}, "llama_cpp_python-0.3.99+cu131.sm86.avx2-py3-none-any.whl"},
		{"download by --extra-index-url, the project name as written", []string{"download", "--no-deps", "--index-url", srv.URL + "/cu131/simple", "--extra-index-url", srv.URL + "/cpu/simple", "Llama_CPP.Python==0.3.99+cpu.avx2"}, "llama_cpp_python-0.3.99+cpu.avx2-py3-none-any.whl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := t.TempDir()
			o, err := pip(t, py, append(tt.args, "--dest", dest)...)
			if err != nil {
				t.Fatalf("pip %v: %v\n%s", tt.args, err, o)
			}
			got, _ := filepath.Glob(filepath.Join(dest, "*.whl"))
			if len(got) != 1 || filepath.Base(got[0]) != tt.want {
				t.Fatalf("pip downloaded %v, want %s\n%s", got, tt.want, o)
			}
		})
	}

	t.Run("install --target with --extra-index-url", func(t *testing.T) {
		target := t.TempDir()
		o, err := pip(t, py, "install", "--no-deps", "--target", target, "--index-url", srv.URL+"/cpu/simple", "--extra-index-url", srv.URL+"/cu131/simple", "llama-cpp-python==0.3.99+cu131.sm86.avx2")
		if err != nil {
			t.Fatalf("pip install: %v\n%s", err, o)
		}
		b, err := os.ReadFile(filepath.Join(target, "llama_cpp", "__init__.py"))
		if err != nil || !strings.Contains(string(b), "0.3.99+cu131.sm86.avx2") {
			t.Errorf("installed __init__.py = %q, %v; want the cu131 wheel's", b, err)
		}
	})

	t.Run("a wheel whose bytes do not match the index is refused by pip", func(t *testing.T) {
		f := filepath.Join(idx, "cpu", "simple", "llama-cpp-python", "llama_cpp_python-0.3.99+cpu.avx2-py3-none-any.whl")
		os.Chmod(f, 0o644)
		b, _ := os.ReadFile(f)
		// A hard link shares the artifact's bytes: replace the file rather than write into it.
		os.Remove(f)
		os.WriteFile(f, append(b, 0), 0o644)
		o, err := pip(t, py, "download", "--no-deps", "--dest", t.TempDir(), "--index-url", srv.URL+"/cpu/simple", "llama-cpp-python==0.3.99+cpu.avx2")
		if err == nil || !strings.Contains(o, "sha256") {
			t.Errorf("pip download of a tampered wheel: err %v, output:\n%s\nwant a hash mismatch", err, o)
		}
	})
}
