package fatbin

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"sort"
)

// Blob is one fat binary container: the code of one translation unit, or of the
// kernel-less container nvcc adds to -shared links. The driver loads each container as its
// own module, so a cubin in one does not stand in for another's.
type Blob struct {
	Index   int
	Entries []Entry
}

// Blobs groups entries by the container they were listed from, in order.
func Blobs(es []Entry) []Blob {
	var out []Blob
	for _, e := range es {
		if len(out) == 0 || out[len(out)-1].Index != e.Blob {
			out = append(out, Blob{Index: e.Blob})
		}
		out[len(out)-1].Entries = append(out[len(out)-1].Entries, e)
	}
	return out
}

// Kernels names the kernels the blob defines. known is false when no inspected entry
// defines one and some entry could not be inspected (a compressed payload): then the blob
// may hold kernels nobody has read.
func (b Blob) Kernels() (names []string, known bool) {
	seen := map[string]bool{}
	known = true
	for _, e := range b.Entries {
		known = known && e.Inspected
		for _, k := range e.Kernels {
			if !seen[k] {
				seen[k] = true
				names = append(names, k)
			}
		}
	}
	sort.Strings(names)
	return names, known || len(names) > 0
}

// Select returns the entry the driver uses on a device of compute capability dev: the
// cubin of the highest capability that runs as it is (an exact arch-specific one before a
// plain one of the same number), else the PTX of the highest capability at most the
// device's, which it JIT-compiles. ok is false when the blob has nothing for the device.
func (b Blob) Select(dev CC) (e Entry, ok bool) {
	for _, kind := range []Kind{Cubin, PTX} {
		for _, c := range b.Entries {
			fits := c.RunsOn(dev)
			if kind == PTX {
				fits = c.JITsOn(dev)
			}
			if fits && (!ok || better(c, e)) {
				e, ok = c, true
			}
		}
		if ok {
			return e, true
		}
	}
	return Entry{}, false
}

func better(a, b Entry) bool {
	if a.SM != b.SM {
		return a.SM > b.SM
	}
	return rank(a) > rank(b)
}

func rank(e Entry) int {
	switch {
	case e.ArchSpecific:
		return 2
	case e.FamilySpecific:
		return 1
	}
	return 0
}

var ptxEntry = regexp.MustCompile(`\.entry\s+([A-Za-z_$%][A-Za-z0-9_$%]*)`)

// kernels reads an uncompressed payload's kernel names; ok is false when the payload is
// not what its kind says (an ELF file for a cubin, PTX text for PTX).
func kernels(k Kind, p []byte) (names []string, ok bool) {
	switch k {
	case Cubin:
		return cubinKernels(p)
	case PTX:
		if !bytes.Contains(p, []byte(".version")) || !bytes.Contains(p, []byte(".target")) {
			return nil, false
		}
		for _, m := range ptxEntry.FindAllSubmatch(p, -1) {
			names = append(names, string(m[1]))
		}
		return names, true
	}
	return nil, false
}

// cubinKernels lists the .text.NAME sections of a 64-bit little-endian ELF cubin: nvcc
// puts each kernel's code in its own such section.
func cubinKernels(p []byte) (names []string, ok bool) {
	if len(p) < 64 || !bytes.HasPrefix(p, []byte("\x7fELF\x02\x01")) {
		return nil, false
	}
	le := binary.LittleEndian
	shoff := le.Uint64(p[0x28:])
	shentsize := uint64(le.Uint16(p[0x3a:]))
	shnum := uint64(le.Uint16(p[0x3c:]))
	shstrndx := uint64(le.Uint16(p[0x3e:]))
	size := uint64(len(p))
	if shentsize < 64 || shnum == 0 || shstrndx >= shnum || shoff > size || shnum > (size-shoff)/shentsize {
		return nil, false
	}
	sh := func(i uint64) []byte { return p[shoff+i*shentsize:] }
	strOff, strSize := le.Uint64(sh(shstrndx)[0x18:]), le.Uint64(sh(shstrndx)[0x20:])
	if strOff > size || strSize > size-strOff {
		return nil, false
	}
	strtab := p[strOff : strOff+strSize]
	for i := uint64(0); i < shnum; i++ {
		n := uint64(le.Uint32(sh(i)))
		if n >= uint64(len(strtab)) {
			return nil, false
		}
		name := strtab[n:]
		if j := bytes.IndexByte(name, 0); j >= 0 {
			name = name[:j]
		}
		if k, found := bytes.CutPrefix(name, []byte(".text.")); found && len(k) > 0 {
			names = append(names, string(k))
		}
	}
	return names, true
}
