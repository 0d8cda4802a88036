package preflight

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"
)

// buildSegmentsOnly writes an x86-64 ELF executable with no section headers (as strip
// --strip-section-headers or a packer leaves it): one executable PT_LOAD segment holding code.
func buildSegmentsOnly(code []byte) []byte {
	const hdr, phdr = 64, 56
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, elf.Header64{
		Ident:     [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Entry:     0x401000 + hdr + phdr,
		Phoff:     hdr,
		Ehsize:    hdr,
		Phentsize: phdr,
		Phnum:     1,
	})
	binary.Write(&out, binary.LittleEndian, elf.Prog64{
		Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Off: hdr + phdr,
		Vaddr: 0x401000 + hdr + phdr, Paddr: 0x401000 + hdr + phdr, Filesz: uint64(len(code)), Memsz: uint64(len(code)), Align: 0x1000,
	})
	out.Write(code)
	return out.Bytes()
}

// TestNoSectionHeadersScansSegments: without section headers there are no executable
// sections, yet the loader maps and runs the PT_LOAD segment. Its AVX-512 code must fail
// on an AVX2 host, not read as "baseline x86-64 only".
func TestNoSectionHeadersScansSegments(t *testing.T) {
	// vpaddd %zmm0,%zmm1,%zmm2; ret
	data := buildSegmentsOnly([]byte{0x62, 0xf1, 0x75, 0x48, 0xfe, 0xd0, 0xc3})
	b, err := ReadBinary("stripped", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Binaries: []*Binary{b}})
	v := verdictFor(r, CheckCPU, "stripped")
	if v == nil || v.Status != Fail || !strings.Contains(v.Reason, "AVX512F") {
		t.Fatalf("cpu verdict = %+v, want would fail naming AVX512F", v)
	}
	if len(v.Evidence) == 0 || !strings.Contains(v.Evidence[0], "PT_LOAD") {
		t.Errorf("evidence = %q, want it to name the segment", v.Evidence)
	}
}
