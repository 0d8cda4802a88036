package x86

import "encoding/binary"

// DirectTarget returns where a direct call, jump or conditional jump (rel8 or rel32)
// decoded from code at addr goes.
func (in *Inst) DirectTarget(code []byte, addr uint64) (uint64, bool) {
	if in.Enc != Legacy {
		return 0, false
	}
	next := addr + uint64(in.Len)
	switch {
	case in.Map == Map1Byte && (in.Op == 0xe8 || in.Op == 0xe9), in.Map == Map0F && in.Op >= 0x80 && in.Op <= 0x8f:
		if in.Len < 5 {
			return 0, false
		}
		rel := int32(binary.LittleEndian.Uint32(code[in.Len-4 : in.Len]))
		return next + uint64(int64(rel)), true
	case in.Map == Map1Byte && (in.Op == 0xeb || (in.Op >= 0x70 && in.Op <= 0x7f) || (in.Op >= 0xe0 && in.Op <= 0xe3)):
		return next + uint64(int64(int8(code[in.Len-1]))), true
	}
	return 0, false
}

// IsCall reports a direct call (E8 rel32).
func (in *Inst) IsCall() bool {
	return in.Enc == Legacy && in.Map == Map1Byte && in.Op == 0xe8
}

// RIPTarget returns the address a RIP-relative memory operand of the instruction decoded
// from code at addr names (lea sym(%rip), call *sym(%rip), ...).
func (in *Inst) RIPTarget(code []byte, addr uint64) (uint64, bool) {
	if !in.HasModRM || in.ModRM&0xc7 != 0x05 || int(in.ModRMAt)+5 > int(in.Len) {
		return 0, false
	}
	if in.Enc == Legacy && in.Map == Map0F && in.Op >= 0x20 && in.Op <= 0x23 {
		return 0, false // mov to/from control registers: ModRM names registers only
	}
	disp := int32(binary.LittleEndian.Uint32(code[in.ModRMAt+1 : in.ModRMAt+5]))
	return addr + uint64(in.Len) + uint64(int64(disp)), true
}

// EndsFlow reports whether execution never continues after the instruction: ret, jmp, ud2
// and hlt.
func (in *Inst) EndsFlow() bool {
	if in.Enc != Legacy {
		return false
	}
	switch in.Map {
	case Map1Byte:
		switch in.Op {
		case 0xc3, 0xc2, 0xcb, 0xca, 0xe9, 0xeb, 0xf4:
			return true
		case 0xff:
			r := (in.ModRM >> 3) & 7
			return r == 4 || r == 5
		}
	case Map0F:
		return in.Op == 0x0b
	}
	return false
}

// IsPadding reports nop and int3, which compilers put between functions.
func (in *Inst) IsPadding() bool {
	return in.Enc == Legacy && ((in.Map == Map1Byte && (in.Op == 0x90 || in.Op == 0xcc)) || (in.Map == Map0F && in.Op == 0x1f))
}
