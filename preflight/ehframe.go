package preflight

import (
	"encoding/binary"
	"errors"
)

// funcRange is one function's code as its .eh_frame FDE gives it.
type funcRange struct{ start, end uint64 }

var errEHFrame = errors.New("malformed .eh_frame")

// ehFrameFunctions lists the code ranges of the FDEs in an .eh_frame section loaded at
// addr. Stripped libraries (Debian's libc.so.6) keep no symbols for their internal
// functions, but every function the compiler or glibc's assembly macros emit has an FDE.
// FDEs whose pointer encoding it does not know are left out.
func ehFrameFunctions(data []byte, addr uint64) ([]funcRange, error) {
	cies := map[int]ehCIE{}
	var out []funcRange
	for off := 0; off+4 <= len(data); {
		length := uint64(binary.LittleEndian.Uint32(data[off:]))
		hdr := 4
		if length == 0 {
			break // the terminator
		}
		if length == 0xffffffff {
			if off+12 > len(data) {
				return out, errEHFrame
			}
			length, hdr = binary.LittleEndian.Uint64(data[off+4:]), 12
		}
		if length > uint64(len(data)-off-hdr) || length < 4 {
			return out, errEHFrame
		}
		rec := data[off+hdr : off+hdr+int(length)]
		idPos := off + hdr
		id := binary.LittleEndian.Uint32(rec)
		if id == 0 {
			cies[off] = parseCIE(rec[4:])
		} else if c, ok := cies[idPos-int(id)]; ok && c.ok {
			p := rec[4:]
			pcAddr := addr + uint64(idPos+4)
			start, n, ok1 := readEncoded(p, c.enc, pcAddr)
			if ok1 {
				size, _, ok2 := readEncoded(p[n:], c.enc&0x0f, 0)
				if ok2 && size > 0 {
					out = append(out, funcRange{start, start + size})
				}
			}
		}
		off += hdr + int(length)
	}
	return out, nil
}

// ehCIE is what an FDE needs from its CIE: the encoding of its pointers, and whether
// the CIE could be read.
type ehCIE struct {
	enc byte
	ok  bool
}

// parseCIE reads a CIE's body (after its id field).
func parseCIE(p []byte) (c ehCIE) {
	if len(p) < 1 {
		return
	}
	version := p[0]
	i := 1
	aug := i
	for i < len(p) && p[i] != 0 {
		i++
	}
	if i >= len(p) {
		return
	}
	augStr := string(p[aug:i])
	i++
	var n int
	if _, n = uleb(p[i:]); n == 0 { // code alignment
		return
	}
	i += n
	if _, n = uleb(p[i:]); n == 0 { // data alignment (sleb; the length is what matters)
		return
	}
	i += n
	if version == 1 {
		if i++; i > len(p) {
			return
		}
	} else {
		if _, n = uleb(p[i:]); n == 0 {
			return
		}
		i += n
	}
	c.enc = 0 // absptr without an 'R' augmentation
	if len(augStr) == 0 {
		c.ok = true
		return
	}
	if augStr[0] != 'z' {
		return // an augmentation without 'z' cannot be skipped
	}
	if _, n = uleb(p[i:]); n == 0 {
		return
	}
	i += n
	for _, a := range augStr[1:] {
		if i >= len(p) {
			return
		}
		switch a {
		case 'R':
			c.enc = p[i]
			i++
		case 'L':
			i++
		case 'P':
			penc := p[i]
			i++
			_, n, ok := readEncoded(p[i:], penc&0x0f, 0)
			if !ok {
				return
			}
			i += n
		case 'S', 'B':
		default:
			return
		}
	}
	c.ok = true
	return
}

// readEncoded reads a DW_EH_PE-encoded pointer at p, located at pc (for pcrel).
func readEncoded(p []byte, enc byte, pc uint64) (uint64, int, bool) {
	var v uint64
	var n int
	switch enc & 0x0f {
	case 0x00, 0x04, 0x0c: // absptr, udata8, sdata8
		if len(p) < 8 {
			return 0, 0, false
		}
		v, n = binary.LittleEndian.Uint64(p), 8
	case 0x03: // udata4
		if len(p) < 4 {
			return 0, 0, false
		}
		v, n = uint64(binary.LittleEndian.Uint32(p)), 4
	case 0x0b: // sdata4
		if len(p) < 4 {
			return 0, 0, false
		}
		v, n = uint64(int64(int32(binary.LittleEndian.Uint32(p)))), 4
	default:
		return 0, 0, false
	}
	switch enc & 0x70 {
	case 0x00:
	case 0x10:
		v += pc
	default:
		return 0, 0, false
	}
	return v, n, true
}

func uleb(p []byte) (uint64, int) {
	var v uint64
	for i, b := range p {
		if i >= 10 {
			return 0, 0
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
