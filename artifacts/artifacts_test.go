package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func writeSrc(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func input(t *testing.T, server string) Input {
	src := t.TempDir()
	lib := writeSrc(t, src, "libllama.so.0", "lib bytes")
	if err := os.Symlink("libllama.so.0", filepath.Join(src, "libllama.so")); err != nil {
		t.Fatal(err)
	}
	return Input{
		Target:   "cpu-v3",
		PlanHash: hash,
		Files: []InputFile{
			{Path: "llama-server", From: writeSrc(t, src, "llama-server", server), Kind: KindExecutable},
			{Path: "libllama.so.0", From: lib, Kind: KindLibrary},
			{Path: "libllama.so", From: filepath.Join(src, "libllama.so"), Kind: KindLibrary},
		},
		Provenance: Provenance{
			Materials: Materials{
				Source:  Source{URL: "https://example.com/llama.cpp", Commit: strings.Repeat("a", 40)},
				Patches: []Patch{{Name: "0001-x.patch", SHA256: strings.Repeat("b", 64)}},
				Images:  []Image{{Role: "devel", Ref: "ubuntu:24.04@sha256:" + strings.Repeat("c", 64), Digest: "sha256:" + strings.Repeat("c", 64)}},
			},
			Plan:    json.RawMessage(`{"target":"cpu-v3"}`),
			Builder: Builder{Name: "llbuild", Version: "test", Executor: "host"},
		},
	}
}

func TestWriteThenOpenVerifies(t *testing.T) {
	out := t.TempDir()
	dir, err := Write(out, input(t, "server v1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "cpu-v3", hash[:12]); dir != want {
		t.Errorf("Write() dir = %s, want %s", dir, want)
	}
	a, err := Open(dir)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if got := len(a.Manifest.Files); got != 3 {
		t.Fatalf("Open() files = %d, want 3", got)
	}
	// Files are sorted by path, so the manifest is the same whatever order outputs came in.
	var paths []string
	for _, f := range a.Manifest.Files {
		paths = append(paths, f.Path)
	}
	if got, want := strings.Join(paths, ","), "libllama.so,libllama.so.0,llama-server"; got != want {
		t.Errorf("manifest paths = %s, want %s", got, want)
	}
	sum := sha256.Sum256([]byte("server v1"))
	if got := a.Files(KindExecutable); len(got) != 1 || got[0].SHA256 != hex.EncodeToString(sum[:]) || got[0].Size != int64(len("server v1")) {
		t.Errorf("executables = %+v", got)
	}
	if a.Provenance.Materials.Source.Commit != strings.Repeat("a", 40) || a.Provenance.Builder.Executor != "host" {
		t.Errorf("provenance = %+v", a.Provenance)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("artifact directory mode = %v (%v), want 0755", fi.Mode(), err)
	}
	fi, err := os.Stat(a.Path(a.Files(KindExecutable)[0]))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("llama-server mode = %v (%v), want 0755", fi.Mode(), err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(out, "cpu-v3", ".tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary directories left: %v", leftovers)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	var got [2][]byte
	for i := range got {
		dir, err := Write(t.TempDir(), input(t, "same"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{ManifestFile, ProvenanceFile} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], b...)
		}
	}
	if string(got[0]) != string(got[1]) {
		t.Errorf("two writes of the same input differ:\n%s\n---\n%s", got[0], got[1])
	}
}

func TestWriteReplacesPreviousAtomically(t *testing.T) {
	out := t.TempDir()
	if _, err := Write(out, input(t, "server v1")); err != nil {
		t.Fatal(err)
	}
	in := input(t, "server v2")
	in.Files = append(in.Files, InputFile{Path: "missing", From: filepath.Join(t.TempDir(), "nope"), Kind: KindLibrary})
	dir, err := Write(out, in)
	if err == nil {
		t.Fatalf("Write() with a missing file = %s, want an error", dir)
	}
	a, err := Open(Dir(out, "cpu-v3", hash))
	if err != nil {
		t.Fatalf("previous artifacts after a failed write: %v", err)
	}
	b, _ := os.ReadFile(a.Path(a.Files(KindExecutable)[0]))
	if string(b) != "server v1" {
		t.Errorf("after a failed write llama-server = %q, want the previous %q", b, "server v1")
	}
	leftovers, _ := filepath.Glob(filepath.Join(out, "cpu-v3", ".tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary directories left after a failure: %v", leftovers)
	}
	if _, err := Write(out, input(t, "server v2")); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(Dir(out, "cpu-v3", hash), "llama-server"))
	if string(b) != "server v2" {
		t.Errorf("after a good write llama-server = %q, want %q", b, "server v2")
	}
}

func TestOpenDetects(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(dir string) error
		want   string
	}{
		{"changed bytes", func(d string) error { return os.WriteFile(filepath.Join(d, "llama-server"), []byte("evil v1"), 0o755) }, "llama-server has size"},
		{"missing file", func(d string) error { return os.Remove(filepath.Join(d, "libllama.so.0")) }, "libllama.so.0"},
		{"extra file", func(d string) error { return os.WriteFile(filepath.Join(d, "extra.so"), nil, 0o644) }, "extra.so is not listed"},
		{"redirected link", func(d string) error {
			os.Remove(filepath.Join(d, "libllama.so"))
			return os.Symlink("llama-server", filepath.Join(d, "libllama.so"))
		}, `libllama.so links to "llama-server"`},
		{"unknown manifest field", func(d string) error {
			return os.WriteFile(filepath.Join(d, ManifestFile), []byte(`{"schemaVersion":1,"bogus":1}`), 0o644)
		}, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := Write(t.TempDir(), input(t, "server v1"))
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.tamper(dir); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Input)
		want   string
	}{
		{"path escaping the directory", func(in *Input) { in.Files[0].Path = "../x" }, "not a clean relative path"},
		{"unknown kind", func(in *Input) { in.Files[0].Kind = "blob" }, "kind"},
		{"target with a slash", func(in *Input) { in.Target = "a/b" }, "bad target"},
		{"link to a file that is not an output", func(in *Input) { in.Files = in.Files[:1:1]; in.Files = append(in.Files, input(t, "").Files[2]) }, "not among the outputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(t, "x")
			tt.change(&in)
			out := t.TempDir()
			_, err := Write(out, in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Write() = %v, want an error containing %q", err, tt.want)
			}
			if _, serr := os.Stat(Dir(out, "cpu-v3", hash)); serr == nil {
				t.Errorf("Write() failed but left %s", Dir(out, "cpu-v3", hash))
			}
		})
	}
}

// FuzzOpen feeds arbitrary artifacts.json contents to the reader: it must refuse or accept
// without panicking, and never accept a path that leaves the directory.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"target":"t","planHash":"h","files":[{"path":"a","kind":"library","size":0,"link":"b"}]}`))
	f.Add([]byte(`{"schemaVersion":1,"files":[{"path":"../x","kind":"executable","size":1,"sha256":"00"}]}`))
	f.Add([]byte(`{}`))
	prov := []byte(`{"schemaVersion":1,"target":"t","planHash":"h","materials":{"source":{"url":"","commit":""},"patches":[],"images":[]},"plan":{},"builder":{"name":"","version":"","executor":""}}`)
	f.Fuzz(func(t *testing.T, manifest []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ManifestFile), manifest, 0o644)
		os.WriteFile(filepath.Join(dir, ProvenanceFile), prov, 0o644)
		a, err := Open(dir)
		if err != nil {
			return
		}
		for _, f := range a.Manifest.Files {
			if checkRel(f.Path) != nil {
				t.Errorf("Open() accepted path %q", f.Path)
			}
		}
	})
}
