//go:build gpu

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
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
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/preflight"
)

// The environment of TestBundleImageUpstreamCUDA, which scripts/gpu-upstream-image.sh sets on
// the GPU machine.
const (
	// upstreamAppEnv names a directory laid out as /app of upstream's server-cuda image: the
	// build's llama-server and every *.so* it made (libllama, libggml, libggml-base, the
	// libggml-cpu-<variant>.so of GGML_CPU_ALL_VARIANTS, libggml-cuda.so), symbolic links kept.
	upstreamAppEnv = "LLBUILD_UPSTREAM_CUDA_APP"
	// upstreamTargetEnv is the target it is bundled and preflighted for (default h200).
	upstreamTargetEnv = "LLBUILD_UPSTREAM_CUDA_TARGET"
	// upstreamSysrootEnv is the root the image's runtime (the C and C++ libraries, libgomp,
	// cudart and cuBLAS, the loader) is taken from (default /, this machine's: on the GPU
	// machine the CUDA toolkit's libraries stand in for nvidia/cuda's runtime image).
	upstreamSysrootEnv = "LLBUILD_UPSTREAM_CUDA_SYSROOT"
	// LLBUILD_UPSTREAM_CUDA_BENCH_DIR keeps the bench's campaign (default a temporary
	// directory); LLBUILD_UPSTREAM_CUDA_ROUNDS is its --rounds (default 1).
)

// upstreamRuntimeDirs are where the runtime's libraries are looked for under the sysroot, the
// CUDA toolkit's first (as nvidia/cuda's images list it in ld.so.conf.d).
var upstreamRuntimeDirs = []string{"/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib64",
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// upstreamCUDALib is where an nvidia/cuda runtime image keeps the toolkit's libraries (its
// ld.so.conf.d names the directory).
const upstreamCUDALib = "/usr/local/cuda/targets/x86_64-linux/lib"

// upstreamCUDAImage is an image of app shaped as ghcr.io/ggml-org/llama.cpp:server-cuda is
// (.devops/cuda.Dockerfile's server stage): every file of app in /app, the working directory
// and the entrypoint's, LLAMA_ARG_HOST=0.0.0.0, on a base holding the runtime the files need
// (the libraries they load that are not in app, taken from sysroot, the driver's left to the
// host as a container runtime mounts them): the C runtime where Ubuntu has it, cudart and
// cuBLAS in the CUDA toolkit's directory with the ld.so.conf.d file that names it.
func upstreamCUDAImage(t *testing.T, app, sysroot string) v1.Image {
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
	add := func(to, from string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		mkdirs(to)
		if err := tw.WriteHeader(&tar.Header{Name: to, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	addBytes := func(to string, b []byte) {
		mkdirs(to)
		if err := tw.WriteHeader(&tar.Header{Name: to, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}

	// /app: what the Dockerfile copies there (find build -name "*.so*" -exec cp -P, and the server)
	entries, err := os.ReadDir(app)
	if err != nil {
		t.Fatal(err)
	}
	inApp := map[string]bool{}
	var elves []string
	for _, e := range entries {
		p := filepath.Join(app, e.Name())
		inApp[e.Name()] = true
		if e.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				t.Fatal(err)
			}
			mkdirs("app/" + e.Name())
			if err := tw.WriteHeader(&tar.Header{Name: "app/" + e.Name(), Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		add("app/"+e.Name(), p)
		elves = append(elves, p)
	}
	if !inApp["llama-server"] {
		t.Fatalf("%s=%s has no llama-server", upstreamAppEnv, app)
	}

	// the runtime: the closure of what app's ELF files need outside app, from sysroot
	find := func(soname string) (string, string) {
		for _, d := range upstreamRuntimeDirs {
			p := filepath.Join(sysroot, d, soname)
			if _, err := os.Stat(p); err == nil {
				return d, p
			}
		}
		return "", ""
	}
	done := map[string]bool{}
	cuda := false
	for len(elves) > 0 {
		file := elves[0]
		elves = elves[1:]
		f, err := elf.Open(file)
		if err != nil {
			continue // not an ELF file (a script, a Python file)
		}
		needed, _ := f.ImportedLibraries()
		var interp string
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				b, _ := io.ReadAll(p.Open())
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
		f.Close()
		if interp != "" && !done[interp] {
			done[interp] = true
			// as Ubuntu has it: the loader among the libraries, PT_INTERP's path a link to it
			// (libc needs it by its soname too)
			base := path.Base(interp)
			if d, p := find(base); p != "" {
				done[base] = true
				add(strings.TrimPrefix(d, "/")+"/"+base, p)
				mkdirs(strings.TrimPrefix(interp, "/"))
				if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(interp, "/"), Typeflag: tar.TypeSymlink, Linkname: d + "/" + base, Mode: 0o777}); err != nil {
					t.Fatal(err)
				}
			} else {
				add(strings.TrimPrefix(interp, "/"), filepath.Join(sysroot, interp))
			}
		}
		for _, n := range needed {
			if done[n] || inApp[n] {
				continue
			}
			done[n] = true
			if strings.HasPrefix(n, "libcuda.so") || strings.HasPrefix(n, "libnvidia-") {
				continue // the driver's: the container runtime mounts the host's
			}
			d, p := find(n)
			if p == "" {
				t.Fatalf("%s needs %s, which is neither in %s nor under %s %v", file, n, app, sysroot, upstreamRuntimeDirs)
			}
			to := d
			if strings.HasPrefix(d, "/usr/local/cuda") {
				to, cuda = upstreamCUDALib, true
			}
			add(strings.TrimPrefix(to, "/")+"/"+n, p)
			elves = append(elves, p)
		}
	}
	// Ubuntu's ld.so.conf, which brings in ld.so.conf.d, where the toolkit names its directory
	addBytes("etc/ld.so.conf", []byte("include /etc/ld.so.conf.d/*.conf\n"))
	if cuda {
		addBytes("etc/ld.so.conf.d/988_cuda.conf", []byte(upstreamCUDALib+"\n"))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// cuBLAS makes the layer about a GiB: compressed fast
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the image's layer: %d MiB uncompressed", len(b)>>20)
	img, err := mutate.AppendLayers(imagetest.BaseImage(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	// nvidia/cuda's runtime image's environment and the server stage's. The build tree's
	// binaries have RUNPATH "BUILD/bin:", a directory the image does not have and an empty entry,
	// which glibc reads as the working directory, /app: that is how upstream's server finds its
	// libraries. A server without such an entry (Debian's, standing in off the GPU machine)
	// gets LD_LIBRARY_PATH=/app, as the upstream layout of TestBundleImageTakesTheGGMLBackends.
	ldPath := "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"
	if !relativeRunpath(t, filepath.Join(app, "llama-server")) {
		ldPath = "/app:" + ldPath
	}
	cfg := v1.Config{
		Env: []string{"PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LD_LIBRARY_PATH=" + ldPath, "NVIDIA_VISIBLE_DEVICES=all",
			"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "LLAMA_ARG_HOST=0.0.0.0"},
		Entrypoint: []string{"/app/llama-server"}, WorkingDir: "/app",
		Labels: map[string]string{"org.opencontainers.image.title": "llama.cpp", "org.opencontainers.image.version": "upstream-cuda-test",
			"org.opencontainers.image.source": "https://github.com/ggml-org/llama.cpp"},
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// relativeRunpath says file's RPATH or RUNPATH has an empty or relative entry, which the loader
// reads against the working directory.
func relativeRunpath(t *testing.T, file string) bool {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		v, _ := f.DynString(tag)
		for _, s := range v {
			for _, d := range strings.Split(s, ":") {
				if !strings.HasPrefix(d, "/") && !strings.HasPrefix(d, "$ORIGIN") && !strings.HasPrefix(d, "${ORIGIN}") {
					return true
				}
			}
		}
	}
	return false
}

// Issue 55's upstream CUDA image, on the GPU machine (scripts/gpu-upstream-image.sh builds the
// pinned llama.cpp with .devops/cuda.Dockerfile's flags into an /app-shaped directory and runs
// this test on it): bundle --image takes llama-server, its libraries and every backend out of
// an image shaped as ghcr.io/ggml-org/llama.cpp:server-cuda; preflight --bundle finds the CUDA
// backend for the target's GPU and chooses a CPU variant; serve answers a completion with echo
// and logprobs; the bench runs it against llbuild's own build of the target (the artifacts of
// LLBUILD_PATCHED_LLAMA_SERVER, if set) with every canary passing. Pointed at an app directory
// without libggml-cuda.so (a CPU build, as Debian's packages give one), it checks the same but
// for the GPU's backend.
func TestBundleImageUpstreamCUDA(t *testing.T) {
	app := os.Getenv(upstreamAppEnv)
	if app == "" {
		// built only with -tags gpu, by the GPU stage that makes the directory: without it, the
		// stage is broken, not this machine short of something
		t.Fatal(upstreamAppEnv + " names no upstream-shaped /app directory: scripts/gpu-upstream-image.sh builds one and runs this test (built with -tags gpu) on the GPU machine")
	}
	if testing.Short() {
		t.Skip("starts real llama-servers")
	}
	target := os.Getenv(upstreamTargetEnv)
	if target == "" {
		target = "h200"
	}
	sysroot := os.Getenv(upstreamSysrootEnv)
	if sysroot == "" {
		sysroot = "/"
	}
	_, err := os.Stat(filepath.Join(app, "libggml-cuda.so"))
	withCUDA := err == nil
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	bundle := func(name string, from ...string) (string, *manifest.Manifest) {
		t.Helper()
		o := filepath.Join(dir, name)
		args := append([]string{"bundle", "-t", target, "--model", model, "--ctx-size", "1024", "--parallel", "1", "-o", o, "-q"}, from...)
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

	layout := imagetest.WriteLayout(t, upstreamCUDAImage(t, app, sysroot))
	up, m := bundle("upstream-cuda", "--image", "oci-layout:"+layout)
	g := m.Server.GGML
	if g == nil || g.CPU == "" {
		t.Fatalf("server.ggml = %+v, want the backends with a CPU variant chosen for %s", g, target)
	}
	var cpus, cudas int
	for _, b := range g.Backends {
		if !strings.HasPrefix(b.From, "/app/") || b.Search != "the server's directory" {
			t.Errorf("backend %+v, want it from /app found in the server's directory", b)
		}
		switch b.Backend {
		case "cpu":
			cpus++
		case "cuda":
			cudas++
		}
	}
	if cpus < 2 || (cudas == 1) != withCUDA {
		t.Errorf("backends %+v: %d CPU variants, %d CUDA; want every variant and the CUDA backend (%v)", g.Backends, cpus, cudas, withCUDA)
	}
	if m.Build.Image == nil || !m.Build.Image.Foreign || m.Build.Image.Server != "/app/llama-server" {
		t.Errorf("image origin %+v, want a foreign image's /app/llama-server", m.Build.Image)
	}
	t.Logf("%s: %d backends, CPU %s, CUDA %v, libraries found through the working directory %v", target, len(g.Backends), g.CPU, withCUDA,
		relativeRunpath(t, filepath.Join(app, "llama-server")))

	code, stdout, stderr := runCLI(t, "preflight", "--bundle", up, "-t", target, "--json")
	var r preflight.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("preflight --bundle: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	var cpuV, gpuV []preflight.Verdict
	for _, v := range r.Verdicts {
		if v.Check == preflight.CheckGGMLBackends {
			if strings.HasPrefix(v.Subject, "CPU") {
				cpuV = append(cpuV, v)
			} else if strings.HasPrefix(v.Subject, "GPU") {
				gpuV = append(gpuV, v)
			}
		}
	}
	if code != 0 || len(cpuV) != 1 || cpuV[0].Status != preflight.OK || !strings.Contains(cpuV[0].Reason, g.CPU) {
		t.Errorf("preflight --bundle -t %s: exit %d, CPU backend %+v; want ok with %s\n%s", target, code, cpuV, g.CPU, stdout)
	}
	for _, v := range gpuV {
		if v.Status != preflight.OK || withCUDA != strings.Contains(v.Reason, "libggml-cuda.so") {
			t.Errorf("preflight --bundle -t %s: %s: %s %s; want ok, the CUDA backend loaded (%v)", target, v.Subject, v.Status, v.Reason, withCUDA)
		}
	}
	if withCUDA && len(gpuV) == 0 {
		t.Errorf("preflight --bundle -t %s: no verdict on the GPU's backend\n%s", target, stdout)
	}

	srv := startServe(t, up)
	if rows := srv.echoRows(t, "the upstream bundle"); len(rows) < 4 || rows[0] != nil || rows[1] == nil {
		t.Errorf("echo rows %v, want null then logprobs", rows)
	}
	if withCUDA && !strings.Contains(srv.stderr.String(), "CUDA") {
		t.Logf("serve's log does not name CUDA (is there a GPU?):\n%s", srv.stderr.String())
	}
	if c := srv.stop(t); c != 0 {
		t.Errorf("serve exited %d:\n%s", c, srv.stderr.String())
	}

	own := os.Getenv("LLBUILD_PATCHED_LLAMA_SERVER")
	if own == "" {
		t.Log("LLBUILD_PATCHED_LLAMA_SERVER is not set: no bench against an own build")
		return
	}
	a, err := artifacts.Open(filepath.Dir(own))
	if err != nil {
		t.Fatal(err)
	}
	ownB, _ := bundle("own", "--artifacts", a.Dir)
	benchDir := os.Getenv("LLBUILD_UPSTREAM_CUDA_BENCH_DIR")
	if benchDir == "" {
		benchDir = t.TempDir()
	}
	rounds := os.Getenv("LLBUILD_UPSTREAM_CUDA_ROUNDS")
	if rounds == "" {
		rounds = "1"
	}
	code, stdout, stderr = benchRun(t, ownB, up, "--dir", benchDir, "--rounds", rounds, "--canaries", "2", "--prompt-tokens", "128", "--generate", "32", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Runs) < 2 {
		t.Fatalf("bench --json: %v, want a run of each bundle\n%s", err, stdout)
	}
	for _, r := range readRecords(t, benchDir).Runs {
		if c := readRecord(t, filepath.Join(benchDir, r.Dir, "record.json")).Canary; c.Checks != 2 || c.Passed != 2 {
			t.Errorf("%s: canaries %d/%d, want 2/2", r.Bundle, c.Passed, c.Checks)
		}
	}
	t.Logf("bench (own %s against upstream's image shape):\n%s", target, stderr)
}
