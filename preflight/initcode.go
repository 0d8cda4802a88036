package preflight

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/llbuild/llbuild/preflight/x86"
)

// initFacts is the code of a ggml CPU variant that runs when ggml's loader dlopens it to
// read its score, whichever variant it then picks: DT_INIT, the DT_INIT_ARRAY functions,
// ifunc resolvers, ggml_backend_score, and what they call.
type initFacts struct {
	uses         x86.Ext
	instructions int
	// indirect counts register-indirect calls and jumps whose target is not known (a
	// function pointer or vtable), which were not followed.
	indirect int
	examples []Instruction
	// err says why the code could not be followed (bytes that do not decode on the path).
	err string
}

// maxInitInstructions bounds the walk: a file whose constructors reach more than this is
// not followed further (err says so).
const maxInitInstructions = 1 << 20

// followInitCode walks that code by control flow from DT_INIT, DT_INIT_ARRAY, the ifunc
// resolvers and the exported ggml_backend_score: direct calls and jumps, both ways of a conditional jump,
// functions whose address is taken (lea f(%rip)), and calls through a GOT or PLT slot whose
// relocation names a function of this file. A call or jump through a register loaded from
// the GOT slot of a function of another library (crtstuff's _ITM_registerTMCloneTable) leaves
// the file; any other register-indirect branch is counted, not followed.
func followInitCode(f *elf.File, spans []codeSpan, names *symbolizer) *initFacts {
	facts := &initFacts{}
	section := ""
	inCode := func(a uint64) ([]byte, uint64, bool) {
		s, ok := spanAt(spans, a)
		if !ok {
			return nil, 0, false
		}
		section = s.name
		return s.data[a-s.addr:], s.addr + uint64(len(s.data)), true
	}
	slots := relocationSlots(f)
	var work []uint64
	push := func(a uint64) {
		if _, _, ok := inCode(a); ok {
			work = append(work, a)
		}
	}
	if v, err := f.DynValue(elf.DT_INIT); err == nil {
		for _, a := range v {
			push(a)
		}
	}
	arr, _ := f.DynValue(elf.DT_INIT_ARRAY)
	size, _ := f.DynValue(elf.DT_INIT_ARRAYSZ)
	if len(arr) == 1 && len(size) == 1 && size[0] < 1<<20 {
		for off := uint64(0); off+8 <= size[0]; off += 8 {
			if t, ok := slots[arr[0]+off]; ok {
				push(t.target)
			} else if w, ok := readWord(f, arr[0]+off); ok {
				push(w)
			}
		}
	}
	for i, list := range [][]elf.Symbol{symbolsOf(f.Symbols), symbolsOf(f.DynamicSymbols)} {
		for _, s := range list {
			if s.Section == elf.SHN_UNDEF {
				continue
			}
			if elf.ST_TYPE(s.Info) == elf.STT_GNU_IFUNC || (i == 1 && s.Name == "ggml_backend_score") {
				push(s.Value)
			}
		}
	}
	for _, t := range slots {
		if t.resolver {
			push(t.target)
		}
	}
	visited := map[uint64]bool{}
	for len(work) > 0 {
		a := work[len(work)-1]
		work = work[:len(work)-1]
		// gotReg[r] is the GOT slot register r was last loaded from in this straight run.
		gotReg := map[uint8]uint64{}
		// A run ends where the function symbol it starts in ends: past its last byte lie
		// padding and the next function, reached only after a call that does not return
		// (__stack_chk_fail at the end of a .cold part, then the next function's .cold part).
		_, fnEnd, _ := names.bounds(a)
		for !visited[a] {
			code, end, ok := inCode(a)
			if !ok {
				break
			}
			visited[a] = true
			if facts.instructions++; facts.instructions > maxInitInstructions {
				facts.err = fmt.Sprintf("more than %d instructions", maxInitInstructions)
				return facts
			}
			in, err := x86.Decode(code)
			if err != nil {
				facts.err = fmt.Sprintf("bytes at %#x on the path do not decode", a)
				return facts
			}
			if in.Ext != 0 {
				facts.uses |= in.Ext
				if len(facts.examples) < 8 {
					facts.examples = append(facts.examples, Instruction{Addr: a, Bytes: fmt.Sprintf("%x", code[:in.Len]),
						Mnemonic: in.Name(), Encoding: in.String(), Needs: in.Ext.String(), Section: section, Function: names.at(a)})
				}
			}
			noReturn := false
			if t, ok := in.DirectTarget(code, a); ok {
				push(t)
				noReturn = in.IsCall() && noReturnCallee(t, spans, slots)
			} else if t, ok := in.RIPTarget(code, a); ok {
				push(t) // a function whose address is taken may be called
				s, slot := slots[t]
				if slot && s.local {
					push(s.target)
				}
				if _, branch := indirectBranchReg(&in, code); branch && !slot {
					facts.indirect++ // through memory no relocation fills
				}
			} else if r, ok := indirectBranchReg(&in, code); ok {
				slot, known := gotReg[r]
				switch s := slots[slot]; {
				case known && !s.local:
					// To a function of another library.
				case known && s.local:
					push(s.target)
				default:
					facts.indirect++
				}
			}
			if r, load := gotLoad(&in, code); load {
				if t, ok := in.RIPTarget(code, a); ok {
					if _, slot := slots[t]; slot {
						gotReg = map[uint8]uint64{r: t}
					} else {
						gotReg = map[uint8]uint64{}
					}
				} else {
					gotReg = map[uint8]uint64{}
				}
			} else if !keepsRegisters(&in) {
				gotReg = map[uint8]uint64{}
			}
			if in.EndsFlow() || noReturn {
				break
			}
			a += uint64(in.Len)
			if a >= end || (fnEnd != 0 && a >= fnEnd) {
				break
			}
		}
	}
	return facts
}

// noReturns are the C and C++ runtime's functions that never return, which compilers call
// last in a function with nothing after them but padding and the next function.
var noReturns = map[string]bool{"__stack_chk_fail": true, "abort": true, "exit": true, "_exit": true, "_Exit": true,
	"__assert_fail": true, "__fortify_fail": true, "__chk_fail": true, "_Unwind_Resume": true, "__cxa_throw": true,
	"__cxa_rethrow": true, "__cxa_bad_cast": true, "__cxa_bad_typeid": true, "__cxa_pure_virtual": true,
	"__cxa_throw_bad_array_new_length": true, "longjmp": true, "siglongjmp": true, "pthread_exit": true,
	"quick_exit": true, "__libc_fatal": true}

// noReturnCallee reports a call to t that does not return: t is a PLT stub (an optional
// endbr64, then jmp *slot(%rip)) whose slot the relocation of one of noReturns fills, or a
// libstdc++ std::__throw_* function.
func noReturnCallee(t uint64, spans []codeSpan, slots map[uint64]relocSlot) bool {
	sp, ok := spanAt(spans, t)
	if !ok {
		return false
	}
	code, at := sp.data[t-sp.addr:], t
	if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa { // endbr64
		code, at = code[4:], at+4
	}
	if len(code) > 0 && code[0] == 0xf2 { // bnd jmp
		code, at = code[1:], at+1
	}
	in, err := x86.Decode(code)
	if err != nil || in.Enc != x86.Legacy || in.Map != x86.Map1Byte || in.Op != 0xff || (in.ModRM>>3)&7 != 4 {
		return false
	}
	slot, ok := in.RIPTarget(code, at)
	if !ok {
		return false
	}
	s, ok := slots[slot]
	if !ok || s.local {
		return false
	}
	name, _, _ := strings.Cut(s.name, "@")
	if noReturns[name] {
		return true
	}
	// std::__throw_*: _ZSt, the length of the name, __throw_...
	rest, ok := strings.CutPrefix(name, "_ZSt")
	return ok && strings.HasPrefix(strings.TrimLeft(rest, "0123456789"), "__throw_")
}

// relocSlot is what a dynamic relocation puts in a slot: the address of a function of this
// file (local), something of another library, or what a resolver returns.
type relocSlot struct {
	target   uint64
	local    bool
	resolver bool
	name     string // the symbol of another library (local false), as a PLT call names it
}

// relocationSlots maps each slot a RELA or RELR relocation fills to what it holds.
func relocationSlots(f *elf.File) map[uint64]relocSlot {
	out := map[uint64]relocSlot{}
	dsyms, _ := f.DynamicSymbols()
	for _, s := range f.Sections {
		switch s.Type {
		case elf.SHT_RELA:
			data, err := s.Data()
			if err != nil {
				continue
			}
			for i := 0; i+24 <= len(data); i += 24 {
				off := binary.LittleEndian.Uint64(data[i:])
				info := binary.LittleEndian.Uint64(data[i+8:])
				addend := binary.LittleEndian.Uint64(data[i+16:])
				typ, sym := elf.R_X86_64(info&0xffffffff), int(info>>32)
				switch {
				case typ == elf.R_X86_64_IRELATIVE:
					out[off] = relocSlot{target: addend, resolver: true}
				case sym > 0 && sym <= len(dsyms):
					ds := dsyms[sym-1]
					out[off] = relocSlot{target: ds.Value + addend, local: ds.Section != elf.SHN_UNDEF, name: ds.Name}
				case typ == elf.R_X86_64_RELATIVE:
					out[off] = relocSlot{target: addend, local: true}
				}
			}
		case elf.SectionType(19): // SHT_RELR
			data, err := s.Data()
			if err != nil {
				continue
			}
			var next uint64
			add := func(a uint64) {
				if w, ok := readWord(f, a); ok {
					out[a] = relocSlot{target: w, local: true}
				}
			}
			for i := 0; i+8 <= len(data); i += 8 {
				e := binary.LittleEndian.Uint64(data[i:])
				if e&1 == 0 {
					add(e)
					next = e + 8
					continue
				}
				for bit := 1; bit < 64; bit++ {
					if e>>bit&1 != 0 {
						add(next + uint64(bit-1)*8)
					}
				}
				next += 63 * 8
			}
		}
	}
	return out
}

func symbolsOf(read func() ([]elf.Symbol, error)) []elf.Symbol {
	s, _ := read()
	return s
}

// rexOf returns the REX prefix of a legacy instruction whose ModRM is at ModRMAt, or 0.
func rexOf(in *x86.Inst, code []byte) byte {
	op := int(in.ModRMAt) - 1
	if in.Map != x86.Map1Byte || op < 1 {
		return 0
	}
	if b := code[op-1]; b&0xf0 == 0x40 {
		return b
	}
	return 0
}

// gotLoad reports `mov slot(%rip), %reg` (8B /r) and the register it loads.
func gotLoad(in *x86.Inst, code []byte) (uint8, bool) {
	if in.Enc != x86.Legacy || in.Map != x86.Map1Byte || in.Op != 0x8b || !in.HasModRM {
		return 0, false
	}
	r := (in.ModRM >> 3) & 7
	if rexOf(in, code)&4 != 0 {
		r |= 8
	}
	return r, true
}

// indirectBranchReg reports `call *%reg` or `jmp *%reg` (FF /2, FF /4 with a register
// operand) and the register. A memory operand other than RIP-relative is reported too, as
// register 0xff (never loaded from a GOT slot): its target is not known.
func indirectBranchReg(in *x86.Inst, code []byte) (uint8, bool) {
	if in.Enc != x86.Legacy || in.Map != x86.Map1Byte || in.Op != 0xff || !in.HasModRM {
		return 0, false
	}
	switch (in.ModRM >> 3) & 7 {
	case 2, 3, 4, 5:
	default:
		return 0, false
	}
	if in.ModRM>>6 != 3 {
		return 0xff, true
	}
	r := in.ModRM & 7
	if rexOf(in, code)&1 != 0 {
		r |= 8
	}
	return r, true
}

// keepsRegisters reports instructions that write no general register: test, cmp and
// conditional jumps, which sit between crtstuff's GOT load and its indirect jump.
func keepsRegisters(in *x86.Inst) bool {
	if in.Enc != x86.Legacy {
		return false
	}
	switch in.Map {
	case x86.Map1Byte:
		switch {
		case in.Op == 0x84 || in.Op == 0x85 || (in.Op >= 0x38 && in.Op <= 0x3d) || (in.Op >= 0x70 && in.Op <= 0x7f):
			return true
		case in.Op == 0x83 || in.Op == 0x81 || in.Op == 0x80:
			return (in.ModRM>>3)&7 == 7 // cmp r/m, imm
		}
	case x86.Map0F:
		return in.Op >= 0x80 && in.Op <= 0x8f
	}
	return false
}
