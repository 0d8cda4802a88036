package manifest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

func problemsText(ps []Problem) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, "\n")
}

func TestVerifySoundBundle(t *testing.T) {
	m, contents := sample(t)
	dir := writeBundle(t, m, contents)
	if ps := Verify(dir); len(ps) != 0 {
		t.Errorf("Verify() = \n%s\nwant no problems", problemsText(ps))
	}
	if _, err := Load(dir); err != nil {
		t.Errorf("Load() = %v", err)
	}
}

func TestVerifyFindsProblems(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
		want   []string // each must appear in one problem line
	}{
		{"tampered model", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, "models/model.gguf"), -1)
		}, []string{"models/model.gguf: sha256"}},
		{"truncated draft", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "models/draft.gguf")
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()/2)
		}, []string{"models/draft.gguf: has", "models/draft.gguf: GGUF header does not parse"}},
		{"missing library", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "lib/libllama.so.0.1"))
		}, []string{"lib/libllama.so.0.1: is missing"}},
		{"unlisted file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "bin/extra"), []byte("x"), 0o755)
		}, []string{"bin/extra: is not listed"}},
		{"link leading out", func(t *testing.T, dir string) {
			os.Symlink("/etc/passwd", filepath.Join(dir, "lib/evil"))
		}, []string{"lib/evil: is a link to /etc/passwd, outside the bundle"}},
		{"directory link leading out", func(t *testing.T, dir string) {
			os.Symlink("../../..", filepath.Join(dir, "lib/up"))
		}, []string{"lib/up: is a link to ../../.., outside"}},
		{"listed link retargeted", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "lib/libllama.so.0")
			os.Remove(p)
			os.Symlink("../bin/llama-server", p)
		}, []string{"lib/libllama.so.0: links to ../bin/llama-server"}},
		{"file replaced by a link", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "bin/llama-server")
			os.Remove(p)
			os.Symlink("/bin/true", p)
		}, []string{"bin/llama-server: is a link to /bin/true, outside", "bin/llama-server: is a symbolic link, not a regular file"}},
		{"named pipe", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "lib/pipe"), 0o644); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("mkfifo: %v", err)
				}
				t.Skipf("mkfifo: %v", err)
			}
		}, []string{"lib/pipe: is a named pipe"}},
		{"a listed file made a named pipe is reported once", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "models/model.gguf")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}, []string{"models/model.gguf: is a named pipe, not a regular file"}},
		{"the server not executable", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, "bin/llama-server"), 0o644)
		}, []string{"bin/llama-server: is not executable (mode -rw-r--r--): serve could not start it; chmod +x bin/llama-server"}},
		{"unknown manifest field", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileName)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("{"), []byte(`{"x": 1,`), 1), 0o644)
		}, []string{"manifest.json: does not decode", "unknown field"}},
		{"newer schema", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileName)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("\n  \"schemaVersion\": 3"), []byte("\n  \"schemaVersion\": 4"), 1), 0o644)
		}, []string{"manifest.json: schemaVersion is 4"}},
		{"missing manifest", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, FileName))
		}, []string{"manifest.json: cannot read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, contents := sample(t)
			dir := writeBundle(t, m, contents)
			tt.change(t, dir)
			got := problemsText(Verify(dir))
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Verify() =\n%s\nwant a problem containing %q", got, w)
				}
				if n := strings.Count(got, w); n > 1 {
					t.Errorf("Verify() =\n%s\nsays %q %d times", got, w, n)
				}
			}
		})
	}
}

func TestVerifyComparesGGUFFacts(t *testing.T) {
	m, contents := sample(t)
	m.Models.Model.GGUF.Name = "another name"
	dir := writeBundle(t, m, contents)
	got := problemsText(Verify(dir))
	if !strings.Contains(got, "models/model.gguf: GGUF facts") {
		t.Errorf("Verify() =\n%s\nwant the model's facts reported as different", got)
	}
}

func flipByte(t *testing.T, p string, at int64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at = int64(len(b)) + at
	}
	b[at] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tarOf packs a bundle directory the simple way (sorted, no compression).
func tarOf(t testing.TB, dir string, extra ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var paths []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if p != dir {
			paths = append(paths, p)
		}
		return err
	})
	sort.Strings(paths)
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		fi, _ := os.Lstat(p)
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, _ := tar.FileInfoHeader(fi, link)
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		tw.WriteHeader(h)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			tw.Write(b)
		}
	}
	for _, h := range extra {
		tw.WriteHeader(h)
		tw.Write(make([]byte, h.Size))
	}
	tw.Close()
	return buf.Bytes()
}

func TestVerifyTar(t *testing.T) {
	m, contents := sample(t)
	dir := writeBundle(t, m, contents)
	if ps := VerifyTar(bytes.NewReader(tarOf(t, dir))); len(ps) != 0 {
		t.Errorf("VerifyTar(sound) =\n%s\nwant no problems", problemsText(ps))
	}
	tests := []struct {
		name  string
		extra *tar.Header
		want  string
	}{
		{"path traversal", &tar.Header{Name: "../../etc/cron.d/x", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}, `../../etc/cron.d/x: entry "../../etc/cron.d/x" escapes the bundle`},
		{"absolute path", &tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "/etc/passwd: entry"},
		{"link out", &tar.Header{Name: "lib/x", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "lib/x: is a link to /etc/passwd, outside"},
		{"device", &tar.Header{Name: "lib/sda", Typeflag: tar.TypeBlock, Devmajor: 8}, "lib/sda: is a block device entry"},
		{"hard link", &tar.Header{Name: "lib/h", Typeflag: tar.TypeLink, Linkname: "bin/llama-server"}, "lib/h: is a hard link entry"},
		{"under a link", &tar.Header{Name: "lib/libllama.so.0/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "lib/libllama.so.0/x: passes through the link lib/libllama.so.0"},
		{"unlisted", &tar.Header{Name: "models/more.gguf", Typeflag: tar.TypeReg, Size: 4, Mode: 0o644}, "models/more.gguf: is not listed"},
		{"second manifest", &tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644}, "manifest.json: appears twice in the archive"},
		{"second file", &tar.Header{Name: "./bin/llama-server", Typeflag: tar.TypeReg, Size: 2, Mode: 0o755}, "bin/llama-server: appears twice in the archive"},
		{"second directory", &tar.Header{Name: "lib/", Typeflag: tar.TypeDir, Mode: 0o755}, "lib: appears twice in the archive"},
		{"file over a directory", &tar.Header{Name: "lib", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "lib: appears twice in the archive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsText(VerifyTar(bytes.NewReader(tarOf(t, dir, tt.extra))))
			if !strings.Contains(got, tt.want) {
				t.Errorf("VerifyTar() =\n%s\nwant a problem containing %q", got, tt.want)
			}
		})
	}
	t.Run("tampered", func(t *testing.T) {
		flipByte(t, filepath.Join(dir, "models/draft.gguf"), 100)
		got := problemsText(VerifyTar(bytes.NewReader(tarOf(t, dir))))
		if !strings.Contains(got, "models/draft.gguf: sha256") {
			t.Errorf("VerifyTar() =\n%s\nwant the tampered draft named", got)
		}
	})
	t.Run("no manifest", func(t *testing.T) {
		os.Remove(filepath.Join(dir, FileName))
		got := problemsText(VerifyTar(bytes.NewReader(tarOf(t, dir))))
		if !strings.Contains(got, "manifest.json: is missing") {
			t.Errorf("VerifyTar() =\n%s\nwant the manifest missing", got)
		}
	})
	t.Run("truncated stream", func(t *testing.T) {
		b := tarOf(t, dir)
		got := problemsText(VerifyTar(bytes.NewReader(b[:len(b)/2])))
		if !strings.Contains(got, "unexpected EOF") {
			t.Errorf("VerifyTar(truncated) =\n%s\nwant a read error", got)
		}
	})
}

func TestCopyAndHash(t *testing.T) {
	for _, n := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 5*chunkSize + 3} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + i>>9)
		}
		want := sha256.Sum256(data)
		var out bytes.Buffer
		got, sum, err := CopyAndHash(&out, bytes.NewReader(data))
		if err != nil || got != int64(n) || sum != hex.EncodeToString(want[:]) || !bytes.Equal(out.Bytes(), data) {
			t.Errorf("CopyAndHash(%d bytes) = %d, %s, %v; want %d, %x, nil and an exact copy", n, got, sum, err, n, want)
		}
		got, sum, err = CopyAndHash(nil, bytes.NewReader(data))
		if err != nil || got != int64(n) || sum != hex.EncodeToString(want[:]) {
			t.Errorf("CopyAndHash(nil, %d bytes) = %d, %s, %v", n, got, sum, err)
		}
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, syscall.ENOSPC
	}
	w.after--
	return len(p), nil
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, syscall.EIO
	}
	r.n--
	return len(p), nil
}

func TestCopyAndHashErrors(t *testing.T) {
	big := bytes.NewReader(make([]byte, 20*chunkSize))
	if _, _, err := CopyAndHash(&failingWriter{after: 2}, big); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("CopyAndHash(full disk) = %v, want ENOSPC", err)
	}
	if _, _, err := CopyAndHash(io.Discard, &failingReader{n: 3}); !errors.Is(err, syscall.EIO) {
		t.Errorf("CopyAndHash(failing read) = %v, want EIO", err)
	}
}

func TestCopyAndHashFileMapsLargeFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "large")
	data := make([]byte, mapMin+mapStep+3)
	for i := range data {
		data[i] = byte(i>>12) ^ byte(i)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	var progress atomic.Int64
	n, sum, err := CopyAndHashFile(context.Background(), &out, f, &progress)
	if err != nil || n != int64(len(data)) || sum != hex.EncodeToString(want[:]) || !bytes.Equal(out.Bytes(), data) || progress.Load() != n {
		t.Errorf("CopyAndHashFile() = %d, %s, %v (progress %d); want %d, %x and an exact copy", n, sum, err, progress.Load(), len(data), want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := CopyAndHashFile(ctx, nil, f, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("CopyAndHashFile(cancelled) = %v, want context.Canceled", err)
	}
}

// truncatingWriter truncates the file being copied on its first write, as a file changed
// under a bundle would be.
type truncatingWriter struct {
	path string
	once bool
}

func (w *truncatingWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		if err := os.Truncate(w.path, mapStep); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func TestCopyAndHashFileSourceTruncatedIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "large")
	if err := os.WriteFile(p, make([]byte, mapMin+1), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, _, err = CopyAndHashFile(context.Background(), &truncatingWriter{path: p}, f, nil)
	if err == nil {
		t.Fatal("CopyAndHashFile() of a file truncated while read = nil error")
	}
	t.Logf("error: %v", err)
}
