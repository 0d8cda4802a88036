package preflight

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/targets"
)

// TestLegacyEncodedExtensions: instructions without VEX or EVEX that still need an
// extension (bytes checked with objdump -D -b binary -mi386:x86-64) against hosts that
// have it and hosts that do not, including a host file describing a baseline CPU.
func TestLegacyEncodedExtensions(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "k8.yaml")
	if err := os.WriteFile(old, []byte("schemaVersion: 1\nname: k8\nhost:\n  cpu:\n    model: AMD Athlon 64\n    features: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k8, err := targets.ResolveHost("", old)
	if err != nil {
		t.Fatalf("a host file with features: [] = %v, want it accepted", err)
	}
	host := func(fs ...targets.Feature) targets.Host { return targets.Host{CPU: targets.CPU{Features: fs}} }
	for _, c := range []struct {
		name string
		code []byte
		host targets.Host
		want Status
	}{
		{"fisttpl on a baseline CPU", []byte{0xdb, 0x08}, k8.Host, Fail},
		{"fisttpl on an SSE4.2 CPU (SSE3 implied)", []byte{0xdb, 0x08}, host(targets.SSE42), OK},
		{"popcnt on a baseline CPU", []byte{0xf3, 0x48, 0x0f, 0xb8, 0xd8}, k8.Host, Fail},
		{"popcnt on a CPU listing POPCNT alone", []byte{0xf3, 0x48, 0x0f, 0xb8, 0xd8}, host(targets.POPCNT), OK},
		{"lzcnt without BMI1 or LZCNT", []byte{0xf3, 0x48, 0x0f, 0xbd, 0xd8}, host(targets.SSE42), Fail},
		{"cmpxchg16b on a baseline CPU", []byte{0xf0, 0x48, 0x0f, 0xc7, 0x0f}, k8.Host, Fail},
		{"rdrand without RDRAND", []byte{0x48, 0x0f, 0xc7, 0xf0}, loadTarget(t, "cpu-v3"), Fail},
		{"rdrand with RDRAND", []byte{0x48, 0x0f, 0xc7, 0xf0}, host(targets.RDRAND), OK},
		{"xbegin without RTM", []byte{0xc7, 0xf8, 0, 0, 0, 0}, loadTarget(t, "cpu-v3"), Fail},
		{"xgetbv on an AVX host (XSAVE implied)", []byte{0x0f, 0x01, 0xd0}, loadTarget(t, "cpu-v3"), OK},
		{"xgetbv on a baseline CPU", []byte{0x0f, 0x01, 0xd0}, k8.Host, Fail},
		{"rdpkru without PKU", []byte{0x0f, 0x01, 0xee}, loadTarget(t, "cpu-v3"), Fail},
		{"rdtscp without RDTSCP", []byte{0x0f, 0x01, 0xf9}, k8.Host, Fail},
		{"extrq (SSE4A) on an Intel-like host", []byte{0x66, 0x0f, 0x78, 0xc0, 0x04, 0x08}, loadTarget(t, "cpu-v3"), Fail},
		{"clwb without CLWB", []byte{0x66, 0x0f, 0xae, 0x30}, loadTarget(t, "cpu-v3"), Fail},
		{"movbe without MOVBE", []byte{0x0f, 0x38, 0xf0, 0x00}, loadTarget(t, "cpu-v3"), Fail},
		{"aesenc with AES", []byte{0x66, 0x0f, 0x38, 0xdc, 0xc1}, host(targets.SSE42, targets.AES), OK},
		{"aesenc without AES", []byte{0x66, 0x0f, 0x38, 0xdc, 0xc1}, loadTarget(t, "cpu-v3"), Fail},
		{"femms (3DNow!)", []byte{0x0f, 0x0e}, loadTarget(t, "cpu-v3"), Fail},
		{"xstore-rng (VIA PadLock), which no host feature names", []byte{0x0f, 0xa7, 0xc0}, loadTarget(t, "cpu-v3"), Unknown},
		{"vrcp28pd (AVX512ER, Xeon Phi only) on an AVX-512 host", []byte{0x62, 0xf2, 0xfd, 0x48, 0xca, 0xd1}, host(targets.AVX512Foundation...), Unknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			code := append(append([]byte(nil), c.code...), 0xc3)
			b, err := ReadBinary("lib/libx.so", bytes.NewReader(buildELF(code, nil, "libx.so")))
			if err != nil {
				t.Fatal(err)
			}
			r := Check(c.host, c.name, Input{Binaries: []*Binary{b}})
			v := verdictFor(r, CheckCPU, "lib/libx.so")
			if v == nil || v.Status != c.want {
				t.Errorf("cpu verdict = %+v, want %s", v, c.want)
			}
			if c.want == Fail && (len(v.Evidence) == 0 || !strings.Contains(v.Evidence[0], ".text+0x1000")) {
				t.Errorf("evidence = %q, want the instruction's address", v.Evidence)
			}
			// lzcnt does not trap on a CPU without it: it runs as bsr, with another result
			if strings.HasPrefix(c.name, "lzcnt") && (strings.Contains(v.Reason, "SIGILL (") || !strings.Contains(v.Reason, "wrong results") || !strings.Contains(v.Fix, "-mno-lzcnt") || !strings.Contains(v.Fix, "libx.so")) {
				t.Errorf("lzcnt verdict %q (fix %q), want wrong results, not SIGILL, and a fix for the file", v.Reason, v.Fix)
			}
			if !strings.HasPrefix(c.name, "lzcnt") && c.want == Fail && !strings.Contains(v.Reason, "SIGILL") {
				t.Errorf("verdict %q, want SIGILL", v.Reason)
			}
		})
	}
}

// TestAVX512SubsetsOnKnightsLanding: Knights Landing has AVX512F and CD but not BW, DQ or
// VL; kunpckwd and EVEX vpackusdw need BW (they were counted as F, so it passed them).
func TestAVX512SubsetsOnKnightsLanding(t *testing.T) {
	knl := targets.Host{CPU: targets.CPU{Features: []targets.Feature{targets.SSE42, targets.AVX, targets.AVX2,
		targets.FMA, targets.F16C, targets.BMI1, targets.BMI2, targets.AVX512F, targets.AVX512CD}}}
	for _, c := range []struct {
		name string
		code []byte
		want Status
	}{
		{"kunpckwd %k1,%k2,%k3", []byte{0xc5, 0xec, 0x4b, 0xd9}, Fail},
		{"vpackusdw %zmm0,%zmm1,%zmm2", []byte{0x62, 0xf2, 0x75, 0x48, 0x2b, 0xd0}, Fail},
		{"kunpckbw %k1,%k2,%k3", []byte{0xc5, 0xed, 0x4b, 0xd9}, OK},
		{"vmovlhps %xmm16,%xmm1,%xmm2", []byte{0x62, 0xb1, 0x74, 0x08, 0x16, 0xd0}, OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := ReadBinary("lib/libx.so", bytes.NewReader(buildELF(append(c.code, 0xc3), nil, "libx.so")))
			if err != nil {
				t.Fatal(err)
			}
			r := Check(knl, "knl", Input{Binaries: []*Binary{b}})
			if v := verdictFor(r, CheckCPU, "lib/libx.so"); v == nil || v.Status != c.want {
				t.Errorf("cpu verdict = %+v, want %s", v, c.want)
			}
		})
	}
}
