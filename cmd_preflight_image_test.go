package main

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/preflight"
)

// preflight --driver-only answers the driver question from the image's config alone: an
// image whose layer blob is gone from its OCI layout (as a registry's layers are never fetched)
// is judged against a driver that meets NVIDIA_REQUIRE_CUDA and one that does not, and says
// that the other checks were not made; the full check needs the layers and fails on the gone one.
func TestPreflightDriverOnlyReadsTheConfigAlone(t *testing.T) {
	layer, err := random.Layer(1<<20, "application/vnd.oci.image.layer.v1.tar+gzip")
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	// nvidia/cuda:13.1.1-runtime's requirement, as the image sets it
	cf.Config.Env = []string{"PATH=/usr/bin", "NVIDIA_REQUIRE_CUDA=cuda>=13.1 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "blobs", d.Algorithm, d.Hex)); err != nil {
		t.Fatalf("removing the layer blob: %v", err)
	}

	code, stdout, stderr := runCLI(t, "preflight", "--image-archive", dir, "--driver-only", "--target", "olares-one")
	if code != exitOK || !strings.Contains(stdout, "driver 590.44.01 (CUDA 13.1) meets") || !strings.Contains(stdout, "read: the image's config only") {
		t.Errorf("driver 590 (CUDA 13.1): exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "preflight", "--image-archive", dir, "--driver-only", "--target", "h200")
	if code != exitFailed || !strings.Contains(stdout, "would fail") || !strings.Contains(stdout, "cuda>=13.1") {
		t.Errorf("driver 580 (CUDA 13.0): exit %d, want 1\n%s", code, stdout)
	}
	if code, full, stderr := runCLI(t, "preflight", "--image-archive", dir, "--target", "olares-one"); code != exitUsage || !strings.Contains(stderr, "layers") {
		t.Logf("full:\n%s", full)
		t.Errorf("the full check of an image without its layer: exit %d, want it to fail reading the layers\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "preflight", "--bundle", t.TempDir(), "--driver-only"); code != exitUsage || !strings.Contains(stderr, "checks an image alone") {
		t.Errorf("--driver-only with a bundle: exit %d %s", code, stderr)
	}
}

// NVIDIA's libraries ship fat binary containers for one GPU generation each and launch those
// of the GPU they run on: the CUDA stand-in runtime image's real cuBLAS and cuBLASLt (Debian's
// CUDA 12.4.1) have sm_90 code in most containers and sm_50-sm_89 code alone in others, and on
// an H200 preflight says ok, naming those as other GPUs' code, where it said "would fail"
// (CUDA error 209) of libraries that run there (upstream's CUDA image on an H100 had the same
// shape in cuBLAS 13 and NCCL). On an RTX 3090 their sm_86 code runs.
func TestPreflightNVIDIALibrariesPickTheirKernelsByGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the CUDA stand-in runtime image (about 430 MiB)")
	}
	dir := t.TempDir()
	libs := walkImageFiles(t, enginetest.CUDARuntimeImage(t), regexp.MustCompile(`/libcublas(Lt)?\.so\.\d+\.\d+\.\d+\.\d+$`), dir)
	if len(libs) != 2 {
		t.Fatalf("the CUDA runtime image's cuBLAS libraries: %v, want libcublas and libcublasLt", libs)
	}
	for _, c := range []struct {
		target string
		want   preflight.Status
		says   string
	}{
		{"h200", preflight.OK, "code only for other GPUs"},
		{"rtx3090", preflight.OK, "sm_86 cubin runs on compute capability 8.6"},
	} {
		args := []string{"preflight", "-t", c.target, "--json"}
		for _, l := range libs {
			args = append(args, "--binary", filepath.Join(dir, path.Base(l)))
		}
		code, stdout, stderr := runCLI(t, args...)
		var r preflight.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("preflight -t %s: exit %d, %v\n%s", c.target, code, err, stderr)
		}
		n := 0
		for _, v := range r.Verdicts {
			if v.Check != preflight.CheckGPUKernels {
				continue
			}
			n++
			if v.Status != c.want || !strings.Contains(v.Reason, c.says) {
				t.Errorf("-t %s: %s: %s %s; want %s mentioning %q", c.target, v.Subject, v.Status, v.Reason, c.want, c.says)
			}
		}
		if n != len(libs) {
			t.Errorf("-t %s: %d GPU kernel verdicts, want one per library (%d)", c.target, n, len(libs))
		}
	}
}
