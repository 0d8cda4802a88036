package preflight

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// testSection is one section of a generated ELF file.
type testSection struct {
	name  string
	typ   elf.SectionType
	flags elf.SectionFlag
	addr  uint64
	data  []byte
}

// buildELF writes a minimal x86-64 ELF shared object: a .text section holding code, an
// optional .nv_fatbin, and a .dynamic section naming needed libraries and a SONAME. It is
// what the checks read from real libraries, without a compiler.
func buildELF(code []byte, fatbinData []byte, soname string, needed ...string) []byte {
	return buildELFWith(code, fatbinData, nil, soname, needed...)
}

// buildELFWith is buildELF with extra sections appended.
func buildELFWith(code []byte, fatbinData []byte, extra []testSection, soname string, needed ...string) []byte {
	var dynstr bytes.Buffer
	dynstr.WriteByte(0)
	addStr := func(s string) uint64 {
		off := uint64(dynstr.Len())
		dynstr.WriteString(s)
		dynstr.WriteByte(0)
		return off
	}
	var dyn bytes.Buffer
	putDyn := func(tag elf.DynTag, val uint64) {
		binary.Write(&dyn, binary.LittleEndian, uint64(tag))
		binary.Write(&dyn, binary.LittleEndian, val)
	}
	for _, n := range needed {
		putDyn(elf.DT_NEEDED, addStr(n))
	}
	if soname != "" {
		putDyn(elf.DT_SONAME, addStr(soname))
	}
	putDyn(elf.DT_NULL, 0)

	secs := []testSection{
		{name: ".text", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, addr: 0x1000, data: code},
		{name: ".dynstr", typ: elf.SHT_STRTAB, flags: elf.SHF_ALLOC, data: dynstr.Bytes()},
		{name: ".dynamic", typ: elf.SHT_DYNAMIC, flags: elf.SHF_ALLOC | elf.SHF_WRITE, data: dyn.Bytes()},
	}
	if fatbinData != nil {
		secs = append(secs, testSection{name: ".nv_fatbin", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: fatbinData})
	}
	secs = append(secs, extra...)
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	nameOff := make([]uint32, len(secs)+1)
	for i, s := range secs {
		nameOff[i] = uint32(shstr.Len())
		shstr.WriteString(s.name)
		shstr.WriteByte(0)
	}
	nameOff[len(secs)] = uint32(shstr.Len())
	shstr.WriteString(".shstrtab")
	shstr.WriteByte(0)
	secs = append(secs, testSection{name: ".shstrtab", typ: elf.SHT_STRTAB, data: shstr.Bytes()})

	var body bytes.Buffer
	body.Write(make([]byte, 64)) // ELF header, filled in below
	offsets := make([]uint64, len(secs))
	for i, s := range secs {
		for body.Len()%16 != 0 {
			body.WriteByte(0)
		}
		offsets[i] = uint64(body.Len())
		body.Write(s.data)
	}
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := uint64(body.Len())
	body.Write(make([]byte, 64)) // null section header
	for i, s := range secs {
		var link uint32
		var entsize uint64
		if s.typ == elf.SHT_DYNAMIC {
			link, entsize = 2, 16 // .dynstr is section 2
		}
		binary.Write(&body, binary.LittleEndian, elf.Section64{
			Name: nameOff[i], Type: uint32(s.typ), Flags: uint64(s.flags), Addr: s.addr,
			Off: offsets[i], Size: uint64(len(s.data)), Link: link, Addralign: 1, Entsize: entsize,
		})
	}
	out := body.Bytes()
	var hdr bytes.Buffer
	binary.Write(&hdr, binary.LittleEndian, elf.Header64{
		Ident:     [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_DYN),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Shoff:     shoff,
		Ehsize:    64,
		Shentsize: 64,
		Shnum:     uint16(len(secs) + 1),
		Shstrndx:  uint16(len(secs)),
	})
	copy(out, hdr.Bytes())
	return out
}
