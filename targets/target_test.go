package targets

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestBuiltinTargetsLoadAndValidate(t *testing.T) {
	names := Names()
	want := []string{"b70", "cpu-v3", "h200", "olares-one", "rtx3090"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v, want %v", names, want)
	}
	for _, n := range names {
		tg, err := Load(n)
		if err != nil {
			t.Errorf("Load(%q) = %v", n, err)
			continue
		}
		if tg.Name != n {
			t.Errorf("Load(%q).Name = %q", n, tg.Name)
		}
		if tg.Build.ISA["GGML_AVX512"] {
			t.Errorf("%s: GGML_AVX512 on, but no shipped host has AVX-512", n)
		}
	}
}

func TestOlaresOneFacts(t *testing.T) {
	tg, err := Load("olares-one")
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.Build.CUDA.Architectures; len(got) != 1 || got[0] != "120" {
		t.Errorf("architectures = %v, want [120]", got)
	}
	arch, _ := ParseCUDAArch("120")
	if arch.CMakeName() != "120a" || !arch.RunsOn("12.0") || arch.RunsOn("12.1") {
		t.Errorf("120 = %+v (%s); want 120a that runs on 12.0 only", arch, arch.CMakeName())
	}
	if tg.Host.Driver.Version != "590.44.01" || tg.Host.Driver.CUDA != "13.1" {
		t.Errorf("driver = %+v", tg.Host.Driver)
	}
	if !tg.Build.ISA["GGML_AVX2"] || !tg.Build.ISA["GGML_AVX_VNNI"] || tg.Build.ISA["GGML_AVX512"] {
		t.Errorf("isa = %v", tg.Build.ISA)
	}
}

const validTarget = `schemaVersion: 1
name: mybox
host:
  cpu:
    features: [SSE42, AVX, AVX2, FMA, F16C, BMI2]
  gpus:
    - {vendor: nvidia, computeCapability: "8.6"}
  driver: {version: 590.44.01, cuda: "13.1"}
build:
  backend: cuda
  cuda: {toolkit: 13.1.1, architectures: ["86"]}
  isa: {GGML_SSE42: true, GGML_AVX: true, GGML_AVX_VNNI: false, GGML_AVX2: true, GGML_BMI2: true, GGML_AVX512: false, GGML_AVX512_VBMI: false, GGML_AVX512_VNNI: false, GGML_AVX512_BF16: false, GGML_FMA: true, GGML_F16C: true, GGML_AMX_TILE: false, GGML_AMX_INT8: false, GGML_AMX_BF16: false}
  images:
    devel: nvidia/cuda:13.1.1-devel-ubuntu24.04@sha256:9cf8694a27722418a1f175d90f85d5afb5a728fd4a9907d7f0565efecfa14d32
    runtime: nvidia/cuda:13.1.1-runtime-ubuntu24.04@sha256:12e26235ebe186000d71f8e457a9ad2aed6c0cb743a7935f0443bacef206aa34
`

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(string) string
		wantAll []string // every fragment must appear in the one error
	}{
		{"unknown key is an error", func(s string) string { return s + "colour: blue\n" }, []string{"field colour not found"}},
		{"AVX-512 on a CPU without it", func(s string) string {
			return strings.Replace(s, "GGML_AVX512: false", "GGML_AVX512: true", 1)
		}, []string{"mybox", "build.isa.GGML_AVX512", "AVX512BW", "SIGILL", "set it to false"}},
		{"ISA option left unset", func(s string) string { return strings.Replace(s, "GGML_FMA: true, ", "", 1) }, []string{"build.isa.GGML_FMA", "is not set"}},
		{"GGML_NATIVE on", func(s string) string {
			return strings.Replace(s, "build:\n", "build:\n  cmake: [-DGGML_NATIVE=ON]\n", 1)
		}, []string{"build.cmake[0]", "GGML_NATIVE=ON"}},
		{"arch the toolkit cannot compile", func(s string) string { return strings.Replace(s, `["86"]`, `["61"]`, 1) }, []string{"build.cuda.architectures[0]", "sm_61 cannot be compiled by CUDA 13.1.1"}},
		{"arch the GPU cannot run", func(s string) string { return strings.Replace(s, `["86"]`, `["90"]`, 1) }, []string{"does not run on host.gpus[0]", "no kernel image", `use "86"`}},
		{"an arch given twice", func(s string) string { return strings.Replace(s, `["86"]`, `["86", "86"]`, 1) }, []string{"build.cuda.architectures[1]", `"86" is given twice (also [0])`}},
		{"toolkit newer than the driver", func(s string) string { return strings.Replace(s, "toolkit: 13.1.1", "toolkit: 13.3.0", 1) }, []string{"build.cuda.toolkit", "newer than the driver's cap 13.1", "cuda>=13.3"}},
		{"malformed digest", func(s string) string { return strings.Replace(s, "@sha256:9cf8", "@sha256:XXXX", 1) }, []string{"build.images.devel", "malformed digest"}},
		{"a compute capability that is none", func(s string) string {
			return strings.Replace(s, `computeCapability: "8.6"`, `computeCapability: "-9.0"`, 1)
		}, []string{"host.gpus[0].computeCapability", `"-9.0" is not a compute capability`, `"12.0"`}},
		{"a driver version that is none", func(s string) string { return strings.Replace(s, "version: 590.44.01", "version: banana", 1) }, []string{"host.driver.version", `"banana" is not a driver version`}},
		{"wrong schema version", func(s string) string { return strings.Replace(s, "schemaVersion: 1", "schemaVersion: 9", 1) }, []string{"schemaVersion", "set schemaVersion: 1"}},
		{"every problem reported together", func(s string) string {
			s = strings.Replace(s, `["86"]`, `["61"]`, 1)
			return strings.Replace(s, "GGML_AVX512: false", "GGML_AVX512: true", 1)
		}, []string{"sm_61", "GGML_AVX512"}},
		{"unknown keys reported with the other problems", func(s string) string {
			s = strings.Replace(s, `["86"]`, `["61"]`, 1)
			return s + "colour: blue\nshape: round\n"
		}, []string{"field colour not found", "field shape not found", "sm_61"}},
	}
	if _, err := Parse("mybox.yaml", []byte(validTarget)); err != nil {
		t.Fatalf("valid target: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("mybox.yaml", []byte(tt.edit(validTarget)))
			if err == nil {
				t.Fatal("Parse() = nil error")
			}
			for _, w := range tt.wantAll {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error = %q, want it to contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "mybox.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestUnknownTargetSuggestsNearest(t *testing.T) {
	_, err := Load("olares")
	if !errors.Is(err, ErrUnknownTarget) || !strings.Contains(err.Error(), `did you mean "olares-one"`) {
		t.Errorf("Load(olares) = %v, want unknown target suggesting olares-one", err)
	}
	_, err = Load("rtx-3090")
	if !strings.Contains(err.Error(), `"rtx3090"`) {
		t.Errorf("Load(rtx-3090) = %v, want suggestion rtx3090", err)
	}
}

func TestRunsOn(t *testing.T) {
	tests := []struct {
		arch, cc string
		want     bool
	}{
		{"86", "8.6", true}, {"86", "8.9", true}, {"86", "9.0", false}, {"80", "8.6", true},
		{"90", "9.0", true}, {"90a", "9.0", true}, {"120", "12.0", true}, {"120", "12.1", false},
		{"90-virtual", "12.0", true}, {"90-virtual", "8.6", false},
	}
	for _, tt := range tests {
		a, err := ParseCUDAArch(tt.arch)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.RunsOn(tt.cc); got != tt.want {
			t.Errorf("%s.RunsOn(%s) = %v, want %v", tt.arch, tt.cc, got, tt.want)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	tg, err := Load("olares-one")
	if err != nil {
		t.Fatal(err)
	}
	b, err := tg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("roundtrip.yaml", b)
	if err != nil {
		t.Fatalf("Parse(Marshal()) = %v\n%s", err, b)
	}
	if back.Host.Driver != tg.Host.Driver || len(back.Build.ISA) != len(tg.Build.ISA) {
		t.Errorf("round trip changed the target")
	}
}

func TestISAFromFeatures(t *testing.T) {
	fs := FeatureSet{SSE42: true, AVX: true, AVX2: true, FMA: true, F16C: true, BMI2: true}
	isa := ISAFromFeatures(fs)
	if !isa["GGML_AVX2"] || isa["GGML_AVX512"] || isa["GGML_AVX_VNNI"] || len(isa) != len(ISAFlags) {
		t.Errorf("ISAFromFeatures() = %v", isa)
	}
	fs[AVX512F] = true // F alone is not ggml's AVX512 set
	if ISAFromFeatures(fs)["GGML_AVX512"] {
		t.Error("GGML_AVX512 on with only AVX512F")
	}
}

func TestFromHost(t *testing.T) {
	v3 := CPU{Features: []Feature{SSE42, AVX, AVX2, FMA, F16C, BMI1, BMI2}}
	tests := []struct {
		name        string
		host        Host
		wantBackend Backend
		wantToolkit string
		wantArch    string
		wantWarn    bool
	}{
		{"590 driver gets CUDA 13.1.1 and its one arch", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorNVIDIA, ComputeCapability: "12.0"}}, Driver: Driver{Version: "590.44.01", CUDA: "13.1"}}, BackendCUDA, "13.1.1", "120", false},
		{"580 driver gets CUDA 13.0.2", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorNVIDIA, ComputeCapability: "9.0"}}, Driver: Driver{Version: "580.159.04", CUDA: "13.0"}}, BackendCUDA, "13.0.2", "90", false},
		{"610 driver still gets the newest pinned image", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorNVIDIA, ComputeCapability: "8.6"}}, Driver: Driver{CUDA: "13.3"}}, BackendCUDA, "13.1.1", "86", false},
		{"CUDA 12 driver has no pinned image", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorNVIDIA, ComputeCapability: "8.6"}}, Driver: Driver{CUDA: "12.4"}}, BackendCUDA, "", "86", true},
		{"B70 is a SYCL host", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorIntel, PCIID: "8086:e223"}}}, BackendSYCL, "", "bmg-g31", true},
		// the one PCI table: detection knows what preflight knows (it used to build B580 hosts for the CPU)
		{"B580 is a SYCL host", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorIntel, PCIID: "8086:E20B"}}}, BackendSYCL, "", "bmg-g21", true},
		{"an unknown Intel GPU is CPU only, with a warning", Host{CPU: v3, GPUs: []GPU{{Vendor: VendorIntel, PCIID: "8086:7d67"}}}, BackendCPU, "", "", true},
		{"no GPU is CPU only", Host{CPU: v3}, BackendCPU, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, warns := FromHost("box", tt.host)
			if tg.Build.Backend != tt.wantBackend || (len(warns) > 0) != tt.wantWarn {
				t.Fatalf("FromHost() backend %s warnings %v, want %s (warnings %v)", tg.Build.Backend, warns, tt.wantBackend, tt.wantWarn)
			}
			if tt.wantBackend == BackendSYCL && (tg.Build.SYCL == nil || tg.Build.SYCL.DeviceArch != tt.wantArch) {
				t.Errorf("sycl = %+v, want device %s", tg.Build.SYCL, tt.wantArch)
			}
			if tt.wantBackend == BackendCUDA && (tg.Build.CUDA.Toolkit != tt.wantToolkit || tg.Build.CUDA.Architectures[0] != tt.wantArch) {
				t.Errorf("cuda = %+v, want toolkit %s arch %s", tg.Build.CUDA, tt.wantToolkit, tt.wantArch)
			}
			if tg.Build.ISA["GGML_AVX512"] || !tg.Build.ISA["GGML_AVX2"] {
				t.Errorf("isa = %v", tg.Build.ISA)
			}
			if !tt.wantWarn {
				data, _ := tg.Marshal()
				if _, err := Parse("detected.yaml", data); err != nil {
					t.Errorf("detected target does not load: %v", err)
				}
			}
		})
	}
}

func TestResolveHostTakesAHostOnlyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hostOnly := write("zen3.yaml", "schemaVersion: 1\nname: zen3\nhost:\n  cpu:\n    features: [SSE42, AVX, AVX2, FMA, F16C, BMI1, BMI2]\n")
	tg, err := ResolveHost("", hostOnly)
	if err != nil {
		t.Fatalf("ResolveHost(host-only file) = %v", err)
	}
	if !tg.Host.CPU.FeatureSet().Has(AVX2) || tg.Host.CPU.FeatureSet().Has(AVX512F) {
		t.Errorf("host = %+v", tg.Host)
	}
	if _, err := ResolveHost("", write("typo.yaml", "schemaVersion: 1\nname: x\nhost:\n  cpu:\n    features: [AVX3]\n")); err == nil || !strings.Contains(err.Error(), `unknown CPU feature "AVX3"`) {
		t.Errorf("ResolveHost(unknown feature) = %v", err)
	}
	// A file with a build section is a full target and is validated as one.
	if _, err := ResolveHost("", write("half.yaml", "schemaVersion: 1\nname: x\nhost:\n  cpu:\n    features: [AVX2]\nbuild:\n  backend: cpu\n")); err == nil || !strings.Contains(err.Error(), "build.isa.GGML_AVX2") {
		t.Errorf("ResolveHost(file with a partial build) = %v, want the full validation", err)
	}
	if _, err := ResolveHost("cpu-v3", ""); err != nil {
		t.Errorf("ResolveHost(cpu-v3) = %v", err)
	}
}

func TestNearestName(t *testing.T) {
	names := []string{"b70", "cpu-v3", "h200", "olares-one", "rtx3090"}
	for in, want := range map[string]string{"olares": "olares-one", "olres": "olares-one", "rtx3909": "rtx3090", "cpu-v9": "cpu-v3", "h20": "h200", "zzzzzzzz": ""} {
		if got := Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
