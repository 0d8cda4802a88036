package pipeline

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCUDAProbe(t *testing.T) {
	debian := "nvcc=/usr/bin/nvcc\nversion=Cuda compilation tools, release 12.4, V12.4.131\nstubs=/usr/lib/x86_64-linux-gnu/stubs\n"
	tc, err := ParseCUDAProbe(debian, "the devel image x")
	if err != nil || tc.Release != "12.4.131" || tc.Stubs != "/usr/lib/x86_64-linux-gnu/stubs" || tc.Driver != "" {
		t.Fatalf("ParseCUDAProbe(debian) = %+v, %v", tc, err)
	}
	for _, tt := range []struct{ out, want string }{
		{"nvcc=\n", "no nvcc in the devel image x"},
		{"nvcc=/usr/bin/nvcc\nversion=\nstubs=/s\n", "printed no release line"},
		{"nvcc=/usr/bin/nvcc\nversion=Cuda compilation tools, release 12.4, V12.4.131\n", "no CUDA driver stub (stubs/libcuda.so) in the devel image x"},
	} {
		if _, err := ParseCUDAProbe(tt.out, "the devel image x"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCUDAProbe(%q) = %v, want an error containing %q", tt.out, err, tt.want)
		}
	}
}

func TestCheckToolkitComparesTheRelease(t *testing.T) {
	p := &Plan{CUDA: &CUDAPlan{Toolkit: "12.4.1", RequireCUDA: "cuda>=12.4"}}
	if err := p.CheckToolkit(&CUDAToolchain{Release: "12.4.131"}, "x"); err != nil {
		t.Errorf("nvcc 12.4.131 for toolkit 12.4.1: %v", err)
	}
	err := p.CheckToolkit(&CUDAToolchain{Release: "13.0.88", VersionLine: "release 13.0, V13.0.88"}, "the devel image y")
	if err == nil || !strings.Contains(err.Error(), "nvcc in the devel image y is 13.0.88") || !strings.Contains(err.Error(), "use a devel image of CUDA 12.4") {
		t.Errorf("nvcc 13.0 for toolkit 12.4.1: %v", err)
	}
}

// The probe script, run by sh, on a toolkit laid out as Debian's (nvcc on PATH, the stub
// under /usr/lib/<triplet>/stubs) is simulated under a directory: CUDA_HOME finds the stub, and
// a fake nvcc prints a real nvcc's version text.
func TestCUDAProbeScriptFindsToolkitAndStub(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	stubs := filepath.Join(dir, "lib64", "stubs")
	for _, d := range []string{bin, stubs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nvcc := "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, release 12.4, V12.4.131'\necho 'Build cuda_12.4.r12.4/compiler.34097967_0'\n"
	if err := os.WriteFile(filepath.Join(bin, "nvcc"), []byte(nvcc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stubs, "libcuda.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", CUDAProbeScript)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ParseCUDAProbe(string(out), "here")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if tc.NVCC != filepath.Join(bin, "nvcc") || tc.Release != "12.4.131" || tc.Stubs != stubs {
		t.Errorf("probe = %+v, want nvcc %s, release 12.4.131, stubs %s (the toolkit nvcc belongs to)", tc, filepath.Join(bin, "nvcc"), stubs)
	}
}

// A shared library compiled from a file named as nvcc names its host-side temporary file
// carries that name as a file symbol: normalizeStrtab zeroes the process id in place, and
// two such libraries built under different process ids come out identical.
func TestNormalizeStrtabZeroesNvccTempNames(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found")
	}
	build := func(pid string) string {
		dir := t.TempDir()
		src := filepath.Join(dir, "tmpxft_"+pid+"_00000000-6_ggml-cuda.cudafe1.c")
		// a static initializer: GCC names it after the file, as _GLOBAL__sub_I_tmpxft_<pid>_…
		// in C++, a local symbol; here a local symbol of that shape
		code := "static int k(void) { return 1; }\nint f(void) { return k(); }\n__attribute__((used)) static int _GLOBAL__sub_I_tmpxft_" + pid + "_00000000_6_ggml_cuda(void) { return 2; }\n"
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		lib := filepath.Join(dir, "lib.so")
		// with a build ID, as Ubuntu's toolchain links: ld's ID does not cover .strtab
		if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O0", "-Wl,--build-id=sha1", "-o", lib, src).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		// the compiler's input directory differs too: keep only the file symbol's difference
		return lib
	}
	a, b := build("00000025"), build("0000001b")
	for _, lib := range []string{a, b} {
		changed, err := normalizeStrtab(lib)
		if err != nil || !changed {
			t.Fatalf("normalizeStrtab(%s) = %v, %v, want a change", lib, changed, err)
		}
		data, _ := os.ReadFile(lib)
		if !bytes.Contains(data, []byte("tmpxft_00000000_00000000-6_ggml-cuda.cudafe1.c")) || !bytes.Contains(data, []byte("_GLOBAL__sub_I_tmpxft_00000000_00000000_6_ggml_cuda")) {
			t.Errorf("%s: the names are not all normalized", lib)
		}
		if again, _ := normalizeStrtab(lib); again {
			t.Errorf("a second pass changed %s again", lib)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Errorf("the two libraries differ after normalizing")
	}
	if out, err := exec.Command("readelf", "-n", a).Output(); err != nil || !bytes.Contains(out, []byte("Build ID: ")) {
		t.Errorf("readelf -n: %v\n%s", err, out)
	}
	text := filepath.Join(t.TempDir(), "x.txt")
	os.WriteFile(text, []byte("tmpxft_00000025_00000000-"), 0o644)
	if changed, err := normalizeStrtab(text); changed || err != nil {
		t.Errorf("normalizeStrtab(a text file) = %v, %v, want it left alone", changed, err)
	}
}
