package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/targets"
)

func readTestdata(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseRealNvidiaSMI(t *testing.T) {
	cuda, brands := ParseNvidiaSMIQ(readTestdata(t, "testdata/devrun/results/h200-nvidia-smi-q.txt"))
	if cuda != "13.0" || len(brands) != 1 || brands[0] != "nvidia" {
		t.Errorf("ParseNvidiaSMIQ(H200 -q) = %q, %q; want 13.0, [nvidia]", cuda, brands)
	}
	cuda, brands = ParseNvidiaSMIQ(readTestdata(t, "fatbin/testdata/realbuild/nvidia-smi.txt"))
	if cuda != "13.0" || len(brands) != 0 {
		t.Errorf("ParseNvidiaSMIQ(H200 table) = %q, %q; want 13.0 and no brands", cuda, brands)
	}
	rows, err := ParseNvidiaSMIQuery(readTestdata(t, "testdata/devrun/results/h200-nvidia-smi-query.txt"))
	want := NvidiaSMIRow{Driver: "580.159.04", ComputeCap: "9.0", Name: "NVIDIA H200", PCIID: "10de:2335"}
	if err != nil || len(rows) != 1 || rows[0] != want {
		t.Errorf("ParseNvidiaSMIQuery = %+v, %v; want [%+v]", rows, err, want)
	}
	if _, err := ParseNvidiaSMIQuery("590.44.01\n"); err == nil {
		t.Error("ParseNvidiaSMIQuery(one field) = nil error, want one")
	}
}

func TestParseProcDriverVersion(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"open kernel module (real, H200 host)", readTestdata(t, "fatbin/testdata/realbuild/proc-driver-version.txt"), "580.159.04"},
		{"proprietary module", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.44.01  Tue Nov 25 00:00:00 UTC 2025\nGCC version:  gcc version 13.3.0\n", "590.44.01"},
		{"no driver", "", ""},
	} {
		if got := ParseProcDriverVersion(c.text); got != c.want {
			t.Errorf("%s: ParseProcDriverVersion = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestContainerBrand(t *testing.T) {
	for smi, want := range map[string]string{
		"GeForce": "geforce", "NVIDIA": "nvidia", "NVIDIA RTX": "nvidiartx", "Tesla": "tesla",
		"Quadro RTX": "quadrortx", "NVIDIA Cloud Gaming": "cloudgaming", "Something New": "somethingnew",
	} {
		if got := ContainerBrand(smi); got != want {
			t.Errorf("ContainerBrand(%q) = %q, want %q", smi, got, want)
		}
	}
}

func TestIntelGPUsFromSysfs(t *testing.T) {
	dir := t.TempDir()
	dev := func(addr, vendor, device, class string) {
		p := filepath.Join(dir, addr)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"vendor": vendor, "device": device, "class": class} {
			if err := os.WriteFile(filepath.Join(p, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dev("0000:03:00.0", "0x8086", "0xe223", "0x030000") // Arc Pro B70
	dev("0000:00:02.0", "0x8086", "0x7d67", "0x030000") // an integrated GPU not in the table
	dev("0000:00:14.0", "0x8086", "0x7e7d", "0x0c0330") // a USB controller
	dev("0000:01:00.0", "0x10de", "0x2b85", "0x030000") // an NVIDIA GPU
	gpus, err := IntelGPUsFromSysfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].PCIID != "8086:7d67" || gpus[0].SYCLDevice != "" ||
		gpus[1].PCIID != "8086:e223" || gpus[1].SYCLDevice != "bmg-g31" {
		t.Errorf("IntelGPUsFromSysfs = %+v, want 8086:7d67 (no device name) and 8086:e223 (bmg-g31)", gpus)
	}
	if gpus, err := IntelGPUsFromSysfs(filepath.Join(dir, "missing")); err != nil || gpus != nil {
		t.Errorf("IntelGPUsFromSysfs(missing) = %v, %v; want nothing", gpus, err)
	}
}

// DetectHost's CPU features agree with the kernel's view in /proc/cpuinfo, whose flags Linux
// clears for extensions whose register state it does not enable.
func TestDetectHostAgreesWithProcCPUInfo(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo: %v", err)
	}
	var flags map[string]bool
	for _, line := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags = map[string]bool{}
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			break
		}
	}
	if flags == nil {
		t.Skip("/proc/cpuinfo has no flags line (not x86?)")
	}
	h, err := DetectHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := h.CPU.FeatureSet()
	for f, flag := range map[targets.Feature]string{
		targets.SSE42: "sse4_2", targets.AVX: "avx", targets.AVX2: "avx2", targets.FMA: "fma",
		targets.F16C: "f16c", targets.BMI1: "bmi1", targets.BMI2: "bmi2", targets.AVXVNNI: "avx_vnni",
		targets.AVX512F: "avx512f", targets.AVX512CD: "avx512cd", targets.AVX512VL: "avx512vl",
		targets.AVX512DQ: "avx512dq", targets.AVX512BW: "avx512bw", targets.AVX512VBMI: "avx512vbmi",
		targets.AVX512VNNI: "avx512_vnni", targets.AVX512BF16: "avx512_bf16",
		targets.AMXTile: "amx_tile", targets.AMXInt8: "amx_int8", targets.AMXBF16: "amx_bf16",
	} {
		if got[f] != flags[flag] {
			t.Errorf("DetectHost %s = %v, /proc/cpuinfo %s = %v", f, got[f], flag, flags[flag])
		}
	}
}
