package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"dagger.io/dagger"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/preflight/fatbin"
)

// TestServerBuildsCUDAFixtureThroughEngine is the CUDA job through the real engine, as a user
// runs it: `llbuild build --target-file` of the CUDA stand-in targets (scripts/mk-cuda-standin.sh
// target), the devel and runtime stand-ins as --base, --image-out. The fixture's ggml-cuda is a
// shared library with a real kernel that calls cudart, cuBLAS and the driver API, linked into
// llama-server through llama as ggml links it, and no patch. The devel image holds no
// libcuda.so.1, so the link of llama-server, which must resolve libggml-cuda's driver symbols,
// can only go through the stub (CMake 3.31's FindCUDAToolkit passes a stub found under stubs/ to
// the links of the library's consumers itself). The fat binary holds exactly the plan's
// architecture; preflight's verdicts on the image follow from it.
func TestServerBuildsCUDAFixtureThroughEngine(t *testing.T) {
	enginetest.Engine(t)
	devel, runtime := enginetest.CUDADevelImage(t), enginetest.CUDARuntimeImage(t)

	t.Run("the devel image has the stub and no driver", func(t *testing.T) {
		t.Parallel()
		names := imageFileNames(t, devel, regexp.MustCompile(`(^|/)(libcuda\.so[.0-9]*|nvcc|cuobjdump)$`))
		if !slices.Contains(names, "usr/lib/x86_64-linux-gnu/stubs/libcuda.so") {
			t.Errorf("no stub libcuda.so in the devel image; found %v", names)
		}
		for _, n := range names {
			if strings.Contains(n, "libcuda.so.") {
				t.Errorf("the devel image holds %s: a driver library, which would hide a link that needs the stub", n)
			}
		}
		if !slices.Contains(names, "usr/bin/nvcc") {
			t.Errorf("no nvcc in the devel image; found %v", names)
		}
	})

	targetFiles := map[string]string{}
	for _, arch := range []string{"86", "90"} {
		targetFiles[arch] = cudaStandinTarget(t, arch, devel, runtime, "", "")
	}
	other := map[string]string{"86": "90", "90": "86"}
	for _, arch := range []string{"86", "90"} {
		t.Run("sm_"+arch, func(t *testing.T) {
			t.Parallel()
			build := func(src string) (*artifacts.Artifacts, string, string) {
				out := t.TempDir()
				img := filepath.Join(t.TempDir(), "image.tar")
				code, stdout, stderr := runCLI(t, "build", "--target-file", targetFiles[arch], "--source", src,
					"--series", filepath.Join("pipeline", "testdata", "patches", "none.series"),
					"--base", "devel=oci-archive:"+devel, "--base", "runtime=oci-archive:"+runtime,
					"--image-out", img, "--out", out)
				if code != 0 {
					t.Fatalf("llbuild build exit %d; stderr (its end):\n%s", code, tailOf(stderr))
				}
				dirs, _ := filepath.Glob(filepath.Join(out, "standin-cuda-sm"+arch, "*"))
				if len(dirs) != 1 {
					t.Fatalf("artifact directories under %s: %v", out, dirs)
				}
				a, err := artifacts.Open(dirs[0])
				if err != nil {
					t.Fatal(err)
				}
				return a, img, strings.TrimSpace(stdout)
			}
			a, img, digest := build(fixtureCopy(t))

			cuda := a.Provenance.Materials.CUDA
			if cuda == nil || cuda.Release != "12.4.131" || cuda.Stubs != "/usr/lib/x86_64-linux-gnu/stubs" || cuda.DriverLibrary {
				t.Errorf("provenance's CUDA toolkit = %+v, want release 12.4.131 (the image's nvcc), stubs /usr/lib/x86_64-linux-gnu/stubs, no driver library", cuda)
			}
			bins, err := preflight.ReadFiles(context.Background(), []string{filepath.Join(a.Dir, "llama-server"), filepath.Join(a.Dir, "libggml-cuda.so.0.9.4")})
			if err != nil {
				t.Fatal(err)
			}
			server, lib := bins[0], bins[1]
			if !slices.Contains(server.Needed, "libllama.so.0") {
				t.Errorf("llama-server's DT_NEEDED = %v, want libllama.so.0", server.Needed)
			}
			for _, want := range []string{"libcuda.so.1", "libcudart.so.12", "libcublas.so.12"} {
				if !slices.Contains(lib.Needed, want) {
					t.Errorf("libggml-cuda's DT_NEEDED = %v, want %s", lib.Needed, want)
				}
			}
			var ours []string
			for _, e := range lib.Fatbin {
				kind := "sm"
				if e.Kind == fatbin.PTX {
					kind = "compute"
				}
				ours = append(ours, kind+"_"+strconv.Itoa(e.SM))
			}
			ours = sortedUnique(ours)
			if want := []string{"compute_" + arch, "sm_" + arch}; !slices.Equal(ours, want) {
				t.Errorf("the fat binary holds %v (project's reader; %s), want %v", ours, lib.FatbinError, want)
			}
			if theirs := cuobjdumpArchs(t, devel, filepath.Join(a.Dir, "libggml-cuda.so.0.9.4")); !slices.Equal(theirs, ours) {
				t.Errorf("the image's cuobjdump lists %v, the project's fatbin reader %v", theirs, ours)
			}

			// preflight on the runtime image: ok for the target's own GPU, CUDA error 209 for the
			// other architecture's, and the driver's cap against the image's NVIDIA_REQUIRE_CUDA.
			verdict := func(targetFile string) (int, string) {
				code, stdout, stderr := runCLI(t, "preflight", "--image-archive", img, "--target-file", targetFile)
				return code, stdout + stderr
			}
			if code, out := verdict(targetFiles[arch]); code != 0 {
				t.Errorf("preflight of the sm_%s image for its own host: exit %d\n%s", arch, code, out)
			}
			code, out := verdict(targetFiles[other[arch]])
			switch arch {
			case "90":
				// compute_90 PTX cannot be JIT-compiled for an older GPU
				if code != 1 || !strings.Contains(out, "CUDA error 209") {
					t.Errorf("preflight of the sm_90 image for a compute capability 8.6 host: exit %d, want 1 with CUDA error 209\n%s", code, out)
				}
			case "86":
				// CMAKE_CUDA_ARCHITECTURES=86 also embeds compute_86 PTX, which the driver
				// JIT-compiles for a newer GPU: it runs (slowly at first start), as preflight says
				if code != 0 || !strings.Contains(out, "JIT-compiles compute_86 PTX") {
					t.Errorf("preflight of the sm_86 image for a compute capability 9.0 host: exit %d, want 0 with the JIT note\n%s", code, out)
				}
			}
			old := cudaStandinTarget(t, arch, devel, runtime, "535.230.02", "12.2")
			if code, out := verdict(old); code != 1 || !strings.Contains(out, "cuda>=12.4") {
				t.Errorf("preflight of the image for a driver whose cap is CUDA 12.2: exit %d, want 1 naming cuda>=12.4\n%s", code, out)
			}
			newer := cudaStandinTarget(t, arch, devel, runtime, "580.159.04", "13.0")
			if code, out := verdict(newer); code != 0 {
				t.Errorf("preflight of the image for a driver whose cap is CUDA 13.0: exit %d, want 0\n%s", code, out)
			}
			rt := imageFileNames(t, img, regexp.MustCompile(`(^|/)(libcuda\.so[.0-9]*|nvcc|libcudart\.so\.12|libcublas\.so\.12)$`))
			for _, n := range rt {
				if strings.Contains(n, "libcuda.so") || strings.HasSuffix(n, "nvcc") {
					t.Errorf("the runtime image holds %s", n)
				}
			}
			if !slices.ContainsFunc(rt, func(n string) bool { return strings.HasSuffix(n, "libcublas.so.12") }) {
				t.Errorf("the runtime image has no libcublas.so.12: %v", rt)
			}

			// The image turned back into a bundle (bundle --image): the server, its CUDA runtime
			// libraries from the image (cudart, cuBLAS), its loader and C library; never libcuda.
			model := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
				t.Fatal(err)
			}
			bdir := filepath.Join(t.TempDir(), "bundle")
			if code, _, stderr := runCLI(t, "bundle", "--target-file", targetFiles[arch], "--image", "oci-archive:"+img, "--model", model, "-o", bdir, "-q"); code != 0 {
				t.Fatalf("bundle --image of the CUDA image: exit %d\n%s", code, stderr)
			}
			bm, err := manifest.Load(bdir)
			if err != nil {
				t.Fatal(err)
			}
			var libs []string
			for _, f := range bm.Files {
				libs = append(libs, f.Path)
			}
			for _, want := range []string{"lib/libcudart.so.12", "lib/libcublas.so.12", "lib/libggml-cuda.so.0.9.4", "lib/libc.so.6"} {
				if !slices.Contains(libs, want) {
					t.Errorf("the CUDA image's bundle lacks %s: %v", want, libs)
				}
			}
			if slices.ContainsFunc(libs, func(p string) bool { return strings.Contains(p, "libcuda.so") }) || bm.Server.Loader == "" || bm.Build.PlanHash != a.Manifest.PlanHash {
				t.Errorf("the CUDA image's bundle: files %v, loader %q, plan %s: want no libcuda, the image's loader, the plan %s", libs, bm.Server.Loader, bm.Build.PlanHash, a.Manifest.PlanHash)
			}

			// Past the engine's cache (a source it has not seen: another tree, by its nonce file),
			// the same bytes and the same layer of them; the images differ only in the plan their
			// config records, which names each tree.
			a2, img2, digest2 := build(fixtureCopy(t))
			sameBuiltFiles(t, a, a2.Dir)
			if l1, l2 := appLayer(t, img), appLayer(t, img2); l1 == "" || l1 != l2 {
				t.Errorf("the server layers of the two images are %q and %q, want one", l1, l2)
			}
			if digest == "" || digest == digest2 {
				t.Errorf("runtime image digests %q and %q: two trees are two plans, whose images differ", digest, digest2)
			}
		})
	}
}

// appLayer is the digest of the last layer of the image in an OCI archive: the one that holds
// the server's files.
func appLayer(t *testing.T, archive string) string {
	t.Helper()
	img, cleanup, err := image.Open(context.Background(), "oci-archive:"+archive)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers of %s: %d (%v)", archive, len(layers), err)
	}
	d, err := layers[len(layers)-1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// cudaStandinTarget writes the target file scripts/mk-cuda-standin.sh prints for arch, with the
// host driver replaced by driver and its CUDA cap by cap when given.
func cudaStandinTarget(t *testing.T, arch, devel, runtime, driver, cap string) string {
	t.Helper()
	out, err := exec.Command("bash", "scripts/mk-cuda-standin.sh", "target", arch, devel, runtime).Output()
	if err != nil {
		t.Fatalf("mk-cuda-standin.sh target %s: %v", arch, err)
	}
	if cap != "" {
		// another host: its driver and CUDA cap, and builds of its own cap's toolkit (a target
		// file may not describe builds its own driver could not run)
		out = bytes.Replace(out, []byte(`cuda: "12.4"`), []byte(`cuda: "`+cap+`"`), 1)
		out = bytes.Replace(out, []byte("version: 550.163.01"), []byte("version: "+driver), 1)
		out = bytes.Replace(out, []byte("toolkit: 12.4.1"), []byte("toolkit: "+cap+".0"), 1)
	}
	f := filepath.Join(t.TempDir(), "sm"+arch+".yaml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// fixtureCopy is the fixture with a file of random content beside it, so that the engine
// compiles and links instead of answering from its cache.
func fixtureCopy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fakellama")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("pipeline", "testdata", "fakellama"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llbuild-test-nonce"), []byte(rand.Text()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// imageFileNames lists the files of an OCI archive's layers whose names match re, reading the
// layers' tar streams (no whiteouts are applied: the stand-ins and their assembled images
// delete nothing).
func imageFileNames(t *testing.T, archive string, re *regexp.Regexp) []string {
	t.Helper()
	return walkImageFiles(t, archive, re, "")
}

// walkImageFiles lists the matching files of an OCI archive's layers, as imageFileNames, and
// writes each regular one to dir under its base name when dir is not empty.
func walkImageFiles(t *testing.T, archive string, re *regexp.Regexp, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if !strings.HasPrefix(h.Name, "blobs/sha256/") || h.Typeflag != tar.TypeReg {
			continue
		}
		br := bufio.NewReaderSize(tr, 1<<20)
		if magic, _ := br.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
			continue
		}
		zr, err := gzip.NewReader(br)
		if err != nil {
			t.Fatalf("%s: %s: %v", archive, h.Name, err)
		}
		lr := tar.NewReader(zr)
		for {
			lh, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", archive, h.Name, err)
			}
			n := strings.TrimPrefix(strings.TrimPrefix(lh.Name, "./"), "/")
			if !re.MatchString(n) {
				continue
			}
			names = append(names, n)
			if dir != "" && lh.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(lr)
				if err != nil {
					t.Fatalf("%s: %s: %v", archive, n, err)
				}
				if err := os.WriteFile(filepath.Join(dir, path.Base(n)), b, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// cuobjdumpArchs lists a library's fat binary with the devel image's own cuobjdump, run in the
// engine, as sm_XX (cubins) and compute_XX (PTX).
func cuobjdumpArchs(t *testing.T, devel, lib string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := dagger.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Container().Import(c.Host().File(devel)).
		WithMountedFile("/lib.so", c.Host().File(lib)).
		WithExec([]string{"cuobjdump", "--list-elf", "--list-ptx", "/lib.so"}).Stdout(ctx)
	if err != nil {
		t.Fatalf("cuobjdump in the devel image: %v", err)
	}
	var archs []string
	for _, m := range regexp.MustCompile(`(?m)^(ELF|PTX) file\s+\d+: \S*\.(sm_\d+a?)\.(cubin|ptx)$`).FindAllStringSubmatch(out, -1) {
		a := m[2]
		if m[1] == "PTX" {
			a = "compute_" + strings.TrimPrefix(a, "sm_")
		}
		archs = append(archs, a)
	}
	if len(archs) == 0 {
		t.Fatalf("cuobjdump listed nothing it could read:\n%s", out)
	}
	return sortedUnique(archs)
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}
