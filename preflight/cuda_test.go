package preflight

import (
	"bytes"
	"debug/elf"
	"os"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/targets"
)

// cudaLib is a generated libggml-cuda.so carrying the fat binary nvcc 13.0 produced for
// sm_86, sm_90a, sm_120a and compute_90 PTX (ISA 9.0), and needing libcudart.so.13.
func cudaLib(t *testing.T) *Binary {
	t.Helper()
	fb, err := os.ReadFile("fatbin/testdata/realbuild/mixed.nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	data := buildELF([]byte{0xc3}, fb, "libggml-cuda.so", "libcudart.so.13", "libcublas.so.13", "libc.so.6")
	b, err := ReadBinary("lib/libggml-cuda.so", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nvidiaHost(cc, brand, driver, cuda string) targets.Host {
	return targets.Host{
		CPU:    targets.CPU{Features: []targets.Feature{targets.SSE42, targets.AVX, targets.AVX2}},
		GPUs:   []targets.GPU{{Vendor: targets.VendorNVIDIA, Name: "test GPU", ComputeCapability: cc, Brand: brand}},
		Driver: targets.Driver{Version: driver, CUDA: cuda},
	}
}

func TestGeneratedCUDALibraryFacts(t *testing.T) {
	b := cudaLib(t)
	if b.SONAME != "libggml-cuda.so" || b.CUDARuntimeMajor() != 13 || len(b.Fatbin) != 7 || b.FatbinError != "" {
		t.Errorf("facts: soname %q, CUDA %d, %d fatbin entries (%s); want libggml-cuda.so, 13, 7", b.SONAME, b.CUDARuntimeMajor(), len(b.Fatbin), b.FatbinError)
	}
}

func TestKernelAndRuntimeVerdicts(t *testing.T) {
	lib := cudaLib(t)
	for _, c := range []struct {
		name       string
		host       targets.Host
		kernel     Status
		kernelSays string
		runtime    Status
	}{
		{"Olares One: RTX 5090 laptop, 12.0", loadTarget(t, "olares-one"), OK, "sm_120a cubin", OK},
		{"H200, 9.0", loadTarget(t, "h200"), OK, "sm_90a cubin", OK},
		{"RTX 3090, 8.6", loadTarget(t, "rtx3090"), OK, "sm_86 cubin", OK},
		{"Ada 8.9 runs the sm_86 cubin", nvidiaHost("8.9", "geforce", "590.44.01", "13.1"), OK, "sm_86 cubin", OK},
		{"12.1 gets no sm_120a; compute_90 PTX JITs with a CUDA 13.0+ driver", nvidiaHost("12.1", "nvidia", "590.44.01", "13.1"), OK, "JIT-compiles compute_90", OK},
		{"12.1 with a CUDA 12.9 driver cannot JIT PTX ISA 9.0", nvidiaHost("12.1", "nvidia", "575.57.08", "12.9"), Fail, "CUDA error 222", Fail},
		{"Turing 7.5: nothing fits", nvidiaHost("7.5", "geforce", "590.44.01", "13.1"), Fail, "CUDA error 209", OK},
		{"Hopper variant 9.0 with unknown driver CUDA", nvidiaHost("9.0", "nvidia", "", ""), OK, "sm_90a", Unknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.host, c.name, Input{Binaries: []*Binary{lib}})
			k := verdictFor(r, CheckGPUKernels, "lib/libggml-cuda.so on GPU 0")
			if k == nil || k.Status != c.kernel || !strings.Contains(k.Reason, c.kernelSays) {
				t.Errorf("kernel verdict = %+v, want %s mentioning %q", k, c.kernel, c.kernelSays)
			}
			rt := verdictFor(r, CheckCUDARuntime, "lib/libggml-cuda.so")
			if rt == nil || rt.Status != c.runtime {
				t.Errorf("runtime verdict = %+v, want %s", rt, c.runtime)
			}
		})
	}
}

func TestCUDAChecksWithoutNVIDIAGPU(t *testing.T) {
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Binaries: []*Binary{cudaLib(t)}})
	k := verdictFor(r, CheckGPUKernels, "lib/libggml-cuda.so")
	if k == nil || k.Status != Unknown {
		t.Errorf("kernel verdict on a GPU-less host = %+v, want unknown", k)
	}
	if r.ExitCode() != 2 {
		t.Errorf("ExitCode = %d, want 2 (could not check)", r.ExitCode())
	}
}

func TestImageRequirementVerdicts(t *testing.T) {
	req133, err := os.ReadFile("cudareq/testdata/cuda-13.3.require")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NVIDIA_REQUIRE_CUDA": strings.TrimSpace(string(req133)), "CUDA_VERSION": "13.3.0"}
	for _, c := range []struct {
		name   string
		host   targets.Host
		want   Status
		reason string
	}{
		{"Olares One (GeForce, R590)", loadTarget(t, "olares-one"), Fail,
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.3, please update your driver to a newer version, or use an earlier cuda container"},
		{"datacenter GPU on R590: the driver-branch terms pass", nvidiaHost("9.0", "tesla", "590.44.01", "13.1"), OK, "meets cuda>=13.3"},
		{"GeForce on R610", nvidiaHost("12.0", "geforce", "610.10", "13.3"), OK, "meets cuda>=13.3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.host, c.name, Input{Name: "image", Env: env})
			v := verdictFor(r, CheckCUDADriver, "image")
			if v == nil || v.Status != c.want || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("driver verdict = %+v, want %s with %q", v, c.want, c.reason)
			}
			if c.want == Fail && !strings.Contains(v.Fix, "R610") {
				t.Errorf("fix = %q, want it to name driver branch R610", v.Fix)
			}
		})
	}
}

func TestSYCLDeviceVerdicts(t *testing.T) {
	// A generated libggml-sycl.so whose data names its ocloc device the way an AOT build's
	// options do. Real SYCL binaries were not available here: the string's location in them
	// is unconfirmed, which is why every data section is searched.
	data := buildELF([]byte{0xc3}, nil, "libggml-sycl.so", "libsycl.so.8")
	data = append(data, []byte("spir64_gen -device bmg-g31 ")...) // trailing bytes outside any section
	lib, err := ReadBinary("lib/libggml-sycl.so", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if lib.SYCL || len(lib.SYCLDevices) != 0 {
		t.Fatalf("bytes outside sections were read as SYCL facts: %+v", lib)
	}
	data = buildELFWith([]byte{0xc3}, nil, []testSection{{name: ".rodata", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC,
		data: []byte("\x00spir64_gen\x00-device bmg-g31 -options -ze-opt-large-register-file\x00")}}, "libggml-sycl.so", "libsycl.so.8")
	lib, err = ReadBinary("lib/libggml-sycl.so", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !lib.SYCL || strings.Join(lib.SYCLDevices, " ") != "bmg-g31" {
		t.Fatalf("SYCL facts = %v %v, want true [bmg-g31]", lib.SYCL, lib.SYCLDevices)
	}
	b70 := targets.Host{GPUs: []targets.GPU{{Vendor: targets.VendorIntel, PCIID: "8086:e223"}}}
	b580 := targets.Host{GPUs: []targets.GPU{{Vendor: targets.VendorIntel, PCIID: "8086:e20b"}}}
	unknownGPU := targets.Host{GPUs: []targets.GPU{{Vendor: targets.VendorIntel, PCIID: "8086:ffff"}}}
	for _, c := range []struct {
		name string
		host targets.Host
		want Status
	}{
		{"B70 (bmg-g31)", b70, OK},
		{"B580 (bmg-g21)", b580, Fail},
		{"an Intel GPU the table does not know", unknownGPU, Unknown},
		{"no Intel GPU", targets.Host{}, Unknown},
	} {
		r := Check(c.host, c.name, Input{Binaries: []*Binary{lib}})
		found := false
		for _, v := range r.Verdicts {
			if v.Check == CheckSYCL {
				found = true
				if v.Status != c.want {
					t.Errorf("%s: SYCL verdict = %+v, want %s", c.name, v, c.want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no SYCL verdict", c.name)
		}
	}
}

func TestDamagedFatbinIsUnknown(t *testing.T) {
	fb, err := os.ReadFile("fatbin/testdata/realbuild/mixed.nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want Status
	}{
		// The first container's sm_120a cubin defines no kernel; axpy's container was not read.
		{"cut inside the second container: only the kernel-less first was listed", fb[:len(fb)-100], Unknown},
		{"cut inside the first container: nothing listed", fb[:40], Unknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			lib, err := ReadBinary("lib/libggml-cuda.so", bytes.NewReader(buildELF([]byte{0xc3}, c.data, "", "libcudart.so.13")))
			if err != nil {
				t.Fatal(err)
			}
			if lib.FatbinError == "" {
				t.Fatal("FatbinError is empty for a truncated section")
			}
			r := Check(loadTarget(t, "olares-one"), "olares-one", Input{Binaries: []*Binary{lib}})
			got := Status("")
			for _, v := range r.Verdicts {
				if v.Check == CheckGPUKernels {
					got = v.Status
				}
			}
			if got != c.want {
				t.Errorf("kernel verdict = %q, want %q (%+v)", got, c.want, r.Verdicts)
			}
		})
	}
}

// TestMissingBrandIsUnknown: the seed story's GeForce with a 590 driver fails a CUDA 13.3
// image, but a host file that leaves the brand out must not pass it.
func TestMissingBrandIsUnknown(t *testing.T) {
	for _, c := range []struct {
		name, file string
		host       targets.Host
		want       Status
	}{
		{"13.3 on R590, brand left out", "cudareq/testdata/cuda-13.3.require", nvidiaHost("12.0", "", "590.44.01", "13.1"), Unknown},
		{"13.3 on R590, geforce", "cudareq/testdata/cuda-13.3.require", nvidiaHost("12.0", "geforce", "590.44.01", "13.1"), Fail},
		{"13.1.1 on R580, brand left out", "cudareq/testdata/cuda-13.1.1.require", nvidiaHost("9.0", "", "580.95.05", "13.0"), Unknown},
		{"13.1.1 on R580, nvidia (datacenter)", "cudareq/testdata/cuda-13.1.1.require", nvidiaHost("9.0", "nvidia", "580.95.05", "13.0"), OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"NVIDIA_REQUIRE_CUDA": strings.TrimSpace(string(req))}
			r := Check(c.host, c.name, Input{Name: "image", Env: env})
			v := verdictFor(r, CheckCUDADriver, "image")
			if v == nil || v.Status != c.want {
				t.Fatalf("driver verdict = %+v, want %s", v, c.want)
			}
			if c.want == Unknown && !strings.Contains(v.Reason, "gpus[0].brand") {
				t.Errorf("reason = %q, want it to say which field to add (gpus[0].brand)", v.Reason)
			}
		})
	}
}
