package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

func tarLayer(t *testing.T, files map[string][]byte) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testImage is a two-layer image: the first layer holds glibc (whose AVX-512 code sits behind
// run-time dispatch and must not be judged) and the skylakex ggml variant; the second deletes
// that variant with a whiteout and adds the haswell variant and a CUDA library.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	backends := debfetch.GGMLBackends(t)
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no %s to put in the image", libc)
	}
	fb := mustRead(t, "fatbin/testdata/realbuild/mixed.nv_fatbin")
	l1 := tarLayer(t, map[string][]byte{
		"usr/lib/x86_64-linux-gnu/libc.so.6": mustRead(t, libc),
		"app/libggml-cpu-skylakex.so":        mustRead(t, filepath.Join(backends, "libggml-cpu-skylakex.so")),
	})
	l2 := tarLayer(t, map[string][]byte{
		"app/.wh.libggml-cpu-skylakex.so": nil,
		"app/libggml-cpu-haswell.so":      mustRead(t, filepath.Join(backends, "libggml-cpu-haswell.so")),
		"app/libggml-cuda.so":             buildELF([]byte{0xc3}, fb, "libggml-cuda.so", "libcudart.so.13"),
		"app/README":                      []byte("not an ELF file"),
	})
	img, err := mutate.AppendLayers(empty.Image, l1, l2)
	if err != nil {
		t.Fatal(err)
	}
	req := strings.TrimSpace(string(mustRead(t, "cudareq/testdata/cuda-13.3.require")))
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/bin", "CUDA_VERSION=13.3.0", "NVIDIA_REQUIRE_CUDA=" + req}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestReadImageArchives(t *testing.T) {
	img := testImage(t)
	dir := t.TempDir()
	saved := filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(saved, name.MustParseReference("llbuild.test/preflight:1"), img); err != nil {
		t.Fatal(err)
	}
	ociDir := filepath.Join(dir, "oci")
	p, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	// What llbuild build --image-out FILE writes: a tar of an OCI layout.
	ociArchive := filepath.Join(dir, "image.oci.tar")
	if err := image.WriteOCI(ociArchive, img, "llbuild.test/preflight:1"); err != nil {
		t.Fatal(err)
	}
	for _, archive := range []string{saved, ociDir, ociArchive} {
		t.Run(filepath.Base(archive), func(t *testing.T) {
			in, err := ReadImage(context.Background(), ImageSource{Archive: archive})
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, b := range in.Binaries {
				paths = append(paths, b.Path)
			}
			sort.Strings(paths)
			if got, want := strings.Join(paths, " "), "/app/libggml-cpu-haswell.so /app/libggml-cuda.so"; got != want {
				t.Errorf("binaries = %s, want %s (whiteout applied, glibc and non-ELF files skipped)", got, want)
			}
			r := Check(loadTarget(t, "olares-one"), "olares-one", in)
			for _, c := range []struct {
				check, subject string
				want           Status
			}{
				{CheckCUDADriver, archive, Fail},
				{CheckGPUKernels, "/app/libggml-cuda.so on GPU 0", OK},
				{CheckCUDARuntime, "/app/libggml-cuda.so", OK},
				{CheckCPU, "/app/libggml-cpu-haswell.so", OK},
				{CheckGGMLVariant, "/app", OK},
			} {
				v := verdictFor(r, c.check, c.subject)
				if v == nil || v.Status != c.want {
					t.Errorf("%s %s = %+v, want %s", c.check, c.subject, v, c.want)
				}
			}
			if r.ExitCode() != 1 {
				t.Errorf("ExitCode = %d, want 1", r.ExitCode())
			}
		})
	}
}

func TestReadImageErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := ReadImage(ctx, ImageSource{Archive: filepath.Join(t.TempDir(), "missing.tar")}); err == nil {
		t.Error("ReadImage(missing archive) = nil error")
	}
	notTar := filepath.Join(t.TempDir(), "x.tar")
	os.WriteFile(notTar, []byte("hello"), 0o644)
	if _, err := ReadImage(ctx, ImageSource{Archive: notTar}); err == nil {
		t.Error("ReadImage(garbage) = nil error")
	}
	if _, err := ReadImage(ctx, ImageSource{Ref: "a", Archive: "b"}); err == nil {
		t.Error("ReadImage(ref and archive) = nil error")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ReadFiles(cancelled, []string{"x"}); err == nil {
		t.Error("ReadFiles(cancelled) = nil error")
	}
}

// An image pushed to an in-process registry on the loopback interface is read by reference,
// the way --image reads one from a real registry.
func TestReadImageFromRegistry(t *testing.T) {
	img := testImage(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/llbuild/preflight-test:1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	in, err := ReadImage(context.Background(), ImageSource{Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Binaries) != 2 || in.Env["CUDA_VERSION"] != "13.3.0" {
		t.Errorf("ReadImage(%s) = %d binaries, CUDA_VERSION %q; want 2 and 13.3.0", ref, len(in.Binaries), in.Env["CUDA_VERSION"])
	}
}
