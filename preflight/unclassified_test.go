package preflight

import (
	"bytes"
	"strings"
	"testing"
)

// TestUnnamedInstructionIsUnknown: an instruction the classifier cannot name may need any
// extension, so the file cannot be "ok". Encodings checked with objdump -D -b binary
// -mi386:x86-64.
func TestUnnamedInstructionIsUnknown(t *testing.T) {
	for _, c := range []struct {
		name, evidence string
		code           []byte
	}{
		// vsm3msg1 %xmm2,%xmm1,%xmm0: SM3, VEX.128.NP.0F38.W0 DA, which the tables do not
		// name (objdump 2.40 does not know it either).
		{"VEX opcode the tables lack", "c4e270dac2", []byte{0xc4, 0xe2, 0x70, 0xda, 0xc2, 0xc3}},
		// An SSE4.1-era map with an opcode the tables lack: 66 0F 38 F8 is movdir64b.
		{"legacy 0F38 opcode the tables lack", "660f38f800", []byte{0x66, 0x0f, 0x38, 0xf8, 0x00, 0xc3}},
		// APX: a REX2 prefix (D5, add %r16d,%eax) and an EVEX map-4 instruction (add with a
		// new data destination). Neither is decoded; they must not pass.
		{"APX REX2", "d5", []byte{0xd5, 0x40, 0x01, 0xc0, 0xc3}},
		{"APX EVEX map 4", "62f4", []byte{0x62, 0xf4, 0x7c, 0x18, 0x01, 0xc1, 0xc3}},
		// 06 is invalid in 64-bit mode: objdump prints (bad).
		{"undecodable byte", "06", []byte{0x90, 0x06, 0xc3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := ReadBinary("lib/libx.so", bytes.NewReader(buildELF(c.code, nil, "libx.so")))
			if err != nil {
				t.Fatal(err)
			}
			r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Binaries: []*Binary{b}})
			v := verdictFor(r, CheckCPU, "lib/libx.so")
			if v == nil || v.Status != Unknown {
				t.Fatalf("cpu verdict = %+v, want unknown", v)
			}
			ev := strings.Join(v.Evidence, "\n")
			if !strings.Contains(ev, c.evidence) || !strings.Contains(ev, ".text+0x") {
				t.Errorf("evidence = %q, want the address and bytes %s", v.Evidence, c.evidence)
			}
		})
	}
}

// TestCMPccXADDNeedsItsFeature: CMPccXADD (VEX.128.66.0F38.W0 E6, cmpbexadd %eax,%ecx,(%rdx)
// per objdump) was counted as AVX, so an AVX2 host passed it.
func TestCMPccXADDNeedsItsFeature(t *testing.T) {
	b, err := ReadBinary("lib/libx.so", bytes.NewReader(buildELF([]byte{0xc4, 0xe2, 0x79, 0xe6, 0x0a, 0xc3}, nil, "libx.so")))
	if err != nil {
		t.Fatal(err)
	}
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Binaries: []*Binary{b}})
	if v := verdictFor(r, CheckCPU, "lib/libx.so"); v == nil || v.Status != Fail || !strings.Contains(v.Reason, "CMPCCXADD") {
		t.Errorf("cpu verdict = %+v, want would fail naming CMPCCXADD", v)
	}
}
