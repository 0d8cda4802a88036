package x86

import (
	"errors"
	"fmt"
)

// Encoding is how an instruction's opcode is encoded.
type Encoding uint8

// Instruction encodings.
const (
	Legacy Encoding = iota
	VEX
	EVEX
	XOPEnc
)

// String names the encoding (legacy, VEX, EVEX, XOP).
func (e Encoding) String() string {
	switch e {
	case VEX:
		return "VEX"
	case EVEX:
		return "EVEX"
	case XOPEnc:
		return "XOP"
	}
	return "legacy"
}

// Opcode maps. Legacy and VEX use 1..3; EVEX adds 5 and 6 (AVX512-FP16); XOP uses 8..10.
const (
	Map1Byte = 0
	Map0F    = 1
	Map0F38  = 2
	Map0F3A  = 3
)

// Inst is one decoded instruction: its length, where its opcode sits and what it needs.
// It holds no pointers, so decoding allocates nothing.
type Inst struct {
	Len      uint8
	Enc      Encoding
	Map      uint8 // opcode map, see Map1Byte..Map0F3A (EVEX 5, 6; XOP 8..10)
	Op       uint8 // the opcode byte within Map
	PP       uint8 // mandatory prefix: 0 none, 1 66, 2 F3, 3 F2
	ModRM    uint8
	HasModRM bool
	ModRMAt  uint8 // offset of the ModRM byte in the instruction, when HasModRM
	W        bool  // REX.W, VEX.W or EVEX.W
	L        uint8 // vector length: 0 = 128, 1 = 256, 2 = 512 (EVEX L'L)
	EVEXb    bool  // EVEX.b: broadcast, or rounding control with a register operand
	Ext      Ext   // extensions the instruction needs
}

// Errors Decode returns. Callers resynchronise by skipping one byte.
var (
	ErrTruncated = errors.New("truncated instruction")
	ErrInvalid   = errors.New("invalid opcode in 64-bit mode")
	ErrTooLong   = errors.New("instruction longer than 15 bytes")
)

// Operand-info bits of the legacy opcode tables.
const (
	immNone  = 0
	immB     = 1 // imm8
	immW     = 2 // imm16
	immZ     = 3 // imm16 with 66, else imm32
	immV     = 4 // imm16/32/64 by operand size (mov r, imm)
	immWB    = 5 // imm16 + imm8 (enter)
	immMoffs = 6 // 8-byte address, 4 with 67
	immGrp3  = 7 // F6/F7: an immediate only for /0 and /1
	immMask  = 0x0f

	fModRM   = 0x10
	fInvalid = 0x20
)

var (
	oneByte [256]uint8
	twoByte [256]uint8
)

func init() {
	t := &oneByte
	for op := 0; op < 0x40; op++ {
		switch op & 7 {
		case 0, 1, 2, 3:
			t[op] = fModRM
		case 4:
			t[op] = immB
		case 5:
			t[op] = immZ
		default:
			t[op] = fInvalid // push/pop segment, daa/das/aaa/aas; prefixes handled before lookup
		}
	}
	t[0x0f] = 0 // escape, handled before lookup
	set := func(lo, hi int, v uint8) {
		for op := lo; op <= hi; op++ {
			t[op] = v
		}
	}
	set(0x50, 0x5f, immNone)
	set(0x60, 0x62, fInvalid)
	t[0x63] = fModRM
	t[0x68] = immZ
	t[0x69] = fModRM | immZ
	t[0x6a] = immB
	t[0x6b] = fModRM | immB
	set(0x6c, 0x6f, immNone)
	set(0x70, 0x7f, immB)
	t[0x80] = fModRM | immB
	t[0x81] = fModRM | immZ
	t[0x82] = fInvalid
	t[0x83] = fModRM | immB
	set(0x84, 0x8f, fModRM)
	set(0x90, 0x9f, immNone)
	t[0x9a] = fInvalid
	set(0xa0, 0xa3, immMoffs)
	set(0xa4, 0xa7, immNone)
	t[0xa8] = immB
	t[0xa9] = immZ
	set(0xaa, 0xaf, immNone)
	set(0xb0, 0xb7, immB)
	set(0xb8, 0xbf, immV)
	t[0xc0] = fModRM | immB
	t[0xc1] = fModRM | immB
	t[0xc2] = immW
	t[0xc3] = immNone
	t[0xc6] = fModRM | immB
	t[0xc7] = fModRM | immZ
	t[0xc8] = immWB
	t[0xc9] = immNone
	t[0xca] = immW
	set(0xcb, 0xcc, immNone)
	t[0xcd] = immB
	t[0xce] = fInvalid
	t[0xcf] = immNone
	set(0xd0, 0xd3, fModRM)
	set(0xd4, 0xd6, fInvalid)
	t[0xd7] = immNone
	set(0xd8, 0xdf, fModRM)
	set(0xe0, 0xe7, immB)
	t[0xe8] = immZ
	t[0xe9] = immZ
	t[0xea] = fInvalid
	t[0xeb] = immB
	set(0xec, 0xef, immNone)
	t[0xf1] = immNone
	set(0xf4, 0xf5, immNone)
	t[0xf6] = fModRM | immGrp3
	t[0xf7] = fModRM | immGrp3
	set(0xf8, 0xfd, immNone)
	t[0xfe] = fModRM
	t[0xff] = fModRM

	t = &twoByte
	for op := range t {
		t[op] = fModRM
	}
	set(0x04, 0x04, fInvalid)
	set(0x05, 0x09, immNone)
	t[0x0a] = fInvalid
	t[0x0b] = immNone
	t[0x0c] = fInvalid
	t[0x0e] = immNone
	t[0x0f] = fModRM | immB // 3DNow!: the opcode byte comes after the operands
	set(0x24, 0x27, fInvalid)
	set(0x30, 0x35, immNone)
	t[0x36] = fInvalid
	t[0x37] = immNone
	set(0x38, 0x3f, fInvalid) // 38 and 3A are escapes, handled before lookup
	set(0x70, 0x73, fModRM|immB)
	t[0x77] = immNone
	t[0x7a] = fInvalid
	t[0x7b] = fInvalid
	set(0x80, 0x8f, immZ)
	set(0xa0, 0xa2, immNone)
	t[0xa4] = fModRM | immB
	// 0F A6 and 0F A7 are VIA PadLock (xsha, xcrypt, xstore, montmul): ModRM forms.
	set(0xa8, 0xaa, immNone)
	t[0xac] = fModRM | immB
	t[0xba] = fModRM | immB
	t[0xc2] = fModRM | immB
	set(0xc4, 0xc6, fModRM|immB)
	set(0xc8, 0xcf, immNone)
}

// modrmLen returns how many bytes the ModRM byte at b[0] and the SIB and displacement it
// implies take. 64-bit and 32-bit (67-prefixed) addressing share this layout.
func modrmLen(b []byte) (int, bool) {
	if len(b) < 1 {
		return 0, false
	}
	m := b[0]
	mod, rm := m>>6, m&7
	n := 1
	if mod == 3 {
		return 1, true
	}
	if rm == 4 {
		if len(b) < 2 {
			return 0, false
		}
		n++
		if mod == 0 && b[1]&7 == 5 {
			n += 4
		}
	} else if mod == 0 && rm == 5 {
		n += 4 // RIP-relative
	}
	switch mod {
	case 1:
		n++
	case 2:
		n += 4
	}
	return n, true
}

// Decode decodes the instruction at the start of code as 64-bit code.
func Decode(code []byte) (Inst, error) {
	var in Inst
	err := decodeInto(code, &in)
	return in, err
}

// decodeInto is Decode writing into in, which it resets first: returning the instruction
// by value cost Scan a copy through memory per instruction.
func decodeInto(code []byte, in *Inst) error {
	*in = Inst{}
	var (
		i       int
		opsize  bool // 66
		adsize  bool // 67
		rep     uint8
		rexW    bool
		lastRex = -1
	)
	// Legacy prefixes and REX. A REX prefix counts only directly before the opcode.
prefixes:
	for ; i < len(code); i++ {
		if i >= 15 {
			return ErrTooLong
		}
		switch b := code[i]; b {
		case 0x66:
			opsize = true
		case 0x67:
			adsize = true
		case 0xf2:
			rep = 3
		case 0xf3:
			rep = 2
		case 0xf0, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65:
		default:
			if b&0xf0 == 0x40 {
				lastRex = i
				rexW = b&8 != 0
				continue
			}
			break prefixes
		}
	}
	if i >= len(code) {
		return ErrTruncated
	}
	hasRex := lastRex >= 0 && lastRex == i-1
	if !hasRex {
		rexW = false
	}
	pp := rep
	if pp == 0 && opsize {
		pp = 1
	}
	op := code[i]
	switch op {
	case 0xc4, 0xc5:
		if hasRex || rep != 0 || opsize {
			return ErrInvalid // VEX after REX, 66, F2 or F3 is #UD
		}
		return decodeVEX(code, i, op == 0xc4, in)
	case 0x62:
		if hasRex || rep != 0 || opsize {
			return ErrInvalid
		}
		return decodeEVEX(code, i, in)
	case 0x8f:
		if i+1 < len(code) && code[i+1]&0x1f >= 8 {
			return decodeXOP(code, i, in)
		}
	}
	in.PP = pp
	in.W = rexW
	var info uint8
	op16 := opsize && !rexW // REX.W takes precedence over 66
	i++
	switch {
	case op != 0x0f:
		in.Map = Map1Byte
		in.Op = op
		info = oneByte[op]
	default:
		if i >= len(code) {
			return ErrTruncated
		}
		op2 := code[i]
		i++
		switch op2 {
		case 0x38:
			if i >= len(code) {
				return ErrTruncated
			}
			in.Map, in.Op = Map0F38, code[i]
			i++
			info = fModRM
		case 0x3a:
			if i >= len(code) {
				return ErrTruncated
			}
			in.Map, in.Op = Map0F3A, code[i]
			i++
			info = fModRM | immB
		default:
			in.Map, in.Op = Map0F, op2
			info = twoByte[op2]
		}
	}
	if info&fInvalid != 0 {
		return ErrInvalid
	}
	if info&fModRM != 0 {
		n, ok := modrmLen(code[i:])
		if in.Map == Map0F && in.Op >= 0x20 && in.Op <= 0x23 && len(code) > i {
			n, ok = 1, true // mov to/from control and debug registers ignores ModRM.mod
		}
		if !ok {
			return ErrTruncated
		}
		in.ModRM, in.HasModRM, in.ModRMAt = code[i], true, uint8(i)
		i += n
		if in.Map == Map1Byte && undefinedGroupForm(op, in.ModRM) {
			return ErrInvalid
		}
	}
	if in.Map == Map0F && in.Op == 0x78 && (pp == 1 || pp == 3) {
		i += 2 // SSE4A extrq/insertq with immediates: two imm8 (without a prefix, 0F 78 is vmread)
	}
	switch info & immMask {
	case immB:
		i++
	case immW:
		i += 2
	case immZ:
		if op16 {
			i += 2
		} else {
			i += 4
		}
	case immV:
		switch {
		case rexW:
			i += 8
		case opsize:
			i += 2
		default:
			i += 4
		}
	case immWB:
		i += 3
	case immMoffs:
		if adsize {
			i += 4
		} else {
			i += 8
		}
	case immGrp3:
		if (in.ModRM>>3)&7 < 2 {
			if op == 0xf6 {
				i++
			} else if op16 {
				i += 2
			} else {
				i += 4
			}
		}
	}
	if err := setLen(in, i, len(code)); err != nil {
		return err
	}
	in.Ext = classifyLegacy(in)
	return nil
}

// undefinedGroupForm reports one-byte opcodes whose ModRM selects an undefined form (#UD):
// such bytes in .text are data, and rejecting them resynchronises the way objdump does.
func undefinedGroupForm(op, modrm uint8) bool {
	reg, mod := (modrm>>3)&7, modrm>>6
	switch op {
	case 0x8d: // lea needs a memory operand
		return mod == 3
	case 0x8f: // pop r/m is /0 (other /r with a small map field are not XOP either)
		return reg != 0
	case 0xc6, 0xc7: // mov r/m, imm is /0; xabort and xbegin are C6 F8 and C7 F8
		return reg != 0 && modrm != 0xf8
	case 0xfe: // inc and dec only
		return reg > 1
	case 0xff:
		return reg == 7
	}
	return false
}

// readModRM reads the ModRM byte at code[i], with the SIB byte and displacement it implies, into
// in and returns the index after them.
func readModRM(code []byte, i int, in *Inst) (int, error) {
	n, ok := modrmLen(code[i:])
	if !ok {
		return i, ErrTruncated
	}
	in.ModRM, in.HasModRM, in.ModRMAt = code[i], true, uint8(i)
	return i + n, nil
}

// setLen records n, the bytes an instruction took, refusing one that runs past the avail bytes
// of code or is longer than the architectural limit of 15 bytes.
func setLen(in *Inst, n, avail int) error {
	if n > avail {
		return ErrTruncated
	}
	if n > 15 {
		return ErrTooLong
	}
	in.Len = uint8(n)
	return nil
}

// vexImm reports whether a VEX/EVEX opcode in map m carries an imm8.
func vexImm(m, op uint8) bool {
	switch m {
	case Map0F:
		return (op >= 0x70 && op <= 0x73) || op == 0xc2 || (op >= 0xc4 && op <= 0xc6)
	case Map0F3A:
		return true
	}
	return false
}

func decodeVEX(code []byte, i int, three bool, in *Inst) error {
	in.Enc = VEX
	var last byte
	if three {
		if i+3 > len(code) {
			return ErrTruncated
		}
		m := code[i+1] & 0x1f
		if m < 1 || m > 3 {
			return ErrInvalid
		}
		in.Map = m
		last = code[i+2]
		in.W = last&0x80 != 0
		i += 3
	} else {
		if i+2 > len(code) {
			return ErrTruncated
		}
		in.Map = Map0F
		last = code[i+1]
		i += 2
	}
	in.L = (last >> 2) & 1
	in.PP = last & 3
	if i >= len(code) {
		return ErrTruncated
	}
	in.Op = code[i]
	i++
	if !(in.Map == Map0F && in.Op == 0x77) { // vzeroupper/vzeroall have no ModRM
		var err error
		if i, err = readModRM(code, i, in); err != nil {
			return err
		}
	}
	if vexImm(in.Map, in.Op) {
		i++
	}
	if err := setLen(in, i, len(code)); err != nil {
		return err
	}
	in.Ext = classifyVEX(in)
	return nil
}

func decodeEVEX(code []byte, i int, in *Inst) error {
	in.Enc = EVEX
	if i+4 > len(code) {
		return ErrTruncated
	}
	p0, p1, p2 := code[i+1], code[i+2], code[i+3]
	m := p0 & 7
	if p0&0x08 != 0 || p1&0x04 == 0 || (m != 1 && m != 2 && m != 3 && m != 5 && m != 6) {
		return ErrInvalid // reserved bits, or APX maps this decoder does not cover
	}
	in.Map = m
	in.W = p1&0x80 != 0
	in.PP = p1 & 3
	in.L = (p2 >> 5) & 3
	in.EVEXb = p2&0x10 != 0
	i += 4
	if i >= len(code) {
		return ErrTruncated
	}
	in.Op = code[i]
	i++
	i, err := readModRM(code, i, in)
	if err != nil {
		return err
	}
	if vexImm(in.Map, in.Op) {
		i++
	}
	if err := setLen(in, i, len(code)); err != nil {
		return err
	}
	in.Ext = classifyEVEX(in)
	return nil
}

// decodeXOP decodes AMD's XOP encoding (8F with map >= 8) far enough to know its length.
func decodeXOP(code []byte, i int, in *Inst) error {
	in.Enc = XOPEnc
	if i+4 > len(code) {
		return ErrTruncated
	}
	m := code[i+1] & 0x1f
	if m < 8 || m > 10 {
		return ErrInvalid
	}
	in.Map = m
	in.W = code[i+2]&0x80 != 0
	in.L = (code[i+2] >> 2) & 1
	in.PP = code[i+2] & 3
	in.Op = code[i+3]
	i += 4
	i, err := readModRM(code, i, in)
	if err != nil {
		return err
	}
	switch m {
	case 8:
		i++
	case 10:
		i += 4
	}
	if err := setLen(in, i, len(code)); err != nil {
		return err
	}
	in.Ext = XOP
	return nil
}

// String describes the instruction's encoding the way the Intel manual's opcode column
// does, e.g. "EVEX.512.66.0F38.W0 50" or "VEX.256.66.0F 6F".
func (in Inst) String() string {
	pp := [...]string{"", "66.", "F3.", "F2."}[in.PP&3]
	mp := ""
	switch in.Map {
	case Map0F:
		mp = "0F"
	case Map0F38:
		mp = "0F38"
	case Map0F3A:
		mp = "0F3A"
	case 5:
		mp = "MAP5"
	case 6:
		mp = "MAP6"
	default:
		if in.Map >= 8 {
			mp = fmt.Sprintf("XOP%d", in.Map)
		}
	}
	w := "W0"
	if in.W {
		w = "W1"
	}
	switch in.Enc {
	case VEX:
		return fmt.Sprintf("VEX.%d.%s%s.%s %02X", 128<<in.L, pp, mp, w, in.Op)
	case EVEX:
		l := fmt.Sprint(128 << in.L)
		if in.EVEXb && in.HasModRM && in.ModRM>>6 == 3 {
			l = "LIG{er}"
		}
		return fmt.Sprintf("EVEX.%s.%s%s.%s %02X", l, pp, mp, w, in.Op)
	case XOPEnc:
		return fmt.Sprintf("XOP.%s.%s %02X", mp, w, in.Op)
	}
	prefix := ""
	if in.PP != 0 && in.Map != Map1Byte {
		prefix = pp[:2] + " "
	}
	if in.Map == Map1Byte {
		return fmt.Sprintf("%02X", in.Op)
	}
	return fmt.Sprintf("%s%s %02X", prefix, mp, in.Op)
}
