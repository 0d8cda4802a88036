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
		// cmpbexadd %eax,%ecx,(%rdx): CMPccXADD, VEX.128.66.0F38.W0 E6, which the tables do
		// not name (once it was counted as AVX).
		{"CMPccXADD", "c4e279e60a", []byte{0xc4, 0xe2, 0x79, 0xe6, 0x0a, 0xc3}},
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
