package x86

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sweepCandidates lists one instruction for every opcode of the legacy 0F, 0F38 and 0F3A
// maps under each mandatory prefix, of VEX maps 1-3 and of EVEX maps 1, 2, 3, 5 and 6
// under each prefix, W and vector length, with a register and a memory operand, and with
// every ModRM.reg where the opcode is a group. Each is followed by a zero immediate byte,
// which objdump and the decoder take or leave alike.
func sweepCandidates() [][]byte {
	var out [][]byte
	modrm := func(group bool) []byte {
		if !group {
			return []byte{0x01, 0xc1}
		}
		return []byte{0x01, 0xc1, 0xc9, 0xd1, 0xd9, 0xe1, 0xe9, 0xf1, 0xf9}
	}
	for _, pfx := range [][]byte{nil, {0x66}, {0xf3}, {0xf2}} {
		for _, esc := range [][]byte{{0x0f}, {0x0f, 0x38}, {0x0f, 0x3a}} {
			for op := 0; op < 256; op++ {
				for _, m := range modrm(true) {
					out = append(out, append(append(append([]byte{}, pfx...), esc...), byte(op), m, 0))
				}
			}
		}
	}
	for mp := byte(1); mp <= 3; mp++ {
		for pp := byte(0); pp < 4; pp++ {
			for w := byte(0); w < 2; w++ {
				for l := byte(0); l < 2; l++ {
					for op := 0; op < 256; op++ {
						group := (mp == 1 && (op >= 0x71 && op <= 0x73 || op == 0xae)) || (mp == 2 && (op == 0xf3 || op == 0x49))
						for _, m := range modrm(group) {
							out = append(out, []byte{0xc4, 0xe0 | mp, w<<7 | 0x78 | l<<2 | pp, byte(op), m, 0})
						}
					}
				}
			}
		}
	}
	for _, mp := range []byte{1, 2, 3, 5, 6} {
		for pp := byte(0); pp < 4; pp++ {
			for w := byte(0); w < 2; w++ {
				for _, l := range []byte{0, 2} {
					for op := 0; op < 256; op++ {
						group := (mp == 1 && op >= 0x71 && op <= 0x73) || (mp == 2 && (op == 0xc6 || op == 0xc7))
						for _, m := range modrm(group) {
							out = append(out, []byte{0x62, 0xf0 | mp, w<<7 | 0x7c | pp, l<<5 | 0x08, byte(op), m, 0})
						}
					}
				}
			}
		}
	}
	return out
}

// TestClassifierAgreesWithObjdumpOverOpcodeSpace holds the classifier against objdump and
// the oracle's table (extoracle_test.go) over the whole opcode space, not only the opcodes
// compilers put in the libraries: every byte pattern objdump names with a mnemonic the table
// knows must be classified as its name implies. Where the decoder says Unclassified the
// verdict is unknown, never a wrong ok, so those are only counted: objdump names some
// encodings the SDM makes #UD (EVEX vdbpsadbw without 66).
func TestClassifierAgreesWithObjdumpOverOpcodeSpace(t *testing.T) {
	const slot = 32 // the 0x90 padding realigns objdump before the next slot
	cands := sweepCandidates()
	code := bytes.Repeat([]byte{0x90}, len(cands)*slot)
	for i, c := range cands {
		copy(code[i*slot:], c)
	}
	path := filepath.Join(t.TempDir(), "sweep.bin")
	if err := os.WriteFile(path, code, 0o644); err != nil {
		t.Fatal(err)
	}
	var stricter, lenMiss, notInTable int
	compared := map[Encoding]int{}
	disagree, examples := map[string]int{}, map[string]string{}
	for _, o := range runObjdump(t, path, "-D", "-w", "-b", "binary", "-mi386:x86-64") {
		addr := o.addr
		if addr%slot != 0 {
			continue
		}
		if objdumpData(o) || strings.Contains(o.text, "{bad}") {
			continue
		}
		in, err := Decode(code[addr : addr+slot])
		if err != nil || int(in.Len) != len(o.bytes) {
			lenMiss++
			if lenMiss <= 5 {
				t.Errorf("%x %q: decoder length %d (err %v), objdump %d", o.bytes, o.text, in.Len, err, len(o.bytes))
			}
			continue
		}
		want, name, known, err := objdumpExt(o)
		switch {
		case !known || err != nil:
			notInTable++
			continue
		case in.Ext == want:
			compared[in.Enc]++
			continue
		case in.Ext&Unclassified != 0:
			stricter++
			continue
		case name == "pextrw (legacy)" && in.Ext == SSE41:
			// 66 0F 3A 15 with a register destination: objdump prints it as SSE2's pextrw.
			compared[in.Enc]++
			continue
		}
		kind := fmt.Sprintf("%s: classified %v, objdump's reading says %v", name, in.Ext, want)
		if disagree[kind] == 0 {
			examples[kind] = fmt.Sprintf("%x %q (%s)", o.bytes, o.text, in)
		}
		disagree[kind]++
	}
	for _, k := range slices.Sorted(maps.Keys(disagree)) {
		t.Errorf("%s (×%d; e.g. %s)", k, disagree[k], examples[k])
	}
	if compared[Legacy] < 5000 || compared[VEX] < 2000 || compared[EVEX] < 2000 {
		t.Errorf("agreed on %d legacy, %d VEX and %d EVEX encodings, want the opcode space (at least 5000, 2000, 2000)", compared[Legacy], compared[VEX], compared[EVEX])
	}
	t.Logf("%d candidate encodings: %d legacy, %d VEX and %d EVEX agree, %d unclassified by the decoder where objdump names them, %d with mnemonics the table does not know (FP16, system), %d length mismatches",
		len(cands), compared[Legacy], compared[VEX], compared[EVEX], stricter, notInTable, lenMiss)
}
