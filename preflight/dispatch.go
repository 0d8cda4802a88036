package preflight

import (
	"debug/elf"
	"encoding/binary"
	"sort"

	"github.com/llbuild/llbuild/preflight/x86"
)

// codeSpan is one stretch of executable bytes: a section, or a segment of a file without
// section headers.
type codeSpan struct {
	name string
	addr uint64
	data []byte
}

// spanAt returns the span that holds address a.
func spanAt(spans []codeSpan, a uint64) (*codeSpan, bool) {
	for i := range spans {
		if s := &spans[i]; a >= s.addr && a < s.addr+uint64(len(s.data)) {
			return s, true
		}
	}
	return nil, false
}

// codeRegion is a stretch of code from one function start to the next.
type codeRegion struct {
	span       int
	start, end uint64
	// dispatched is set when the region is reached only through addresses an ifunc
	// resolver takes: it runs only when the resolver returns it.
	dispatched bool
}

// dispatchMap splits a shared object's code into regions and says which of them only an
// ifunc resolver can reach.
type dispatchMap struct {
	regions   []codeRegion
	resolvers int
}

// findDispatched finds the functions of f that run only when an ifunc resolver (an
// STT_GNU_IFUNC symbol, or the target of an R_X86_64_IRELATIVE relocation) returns them:
// glibc's AVX-512 string functions, gcc's target_clones and __attribute__((ifunc)). It
// returns nil when f has no resolver, or when what refers to what cannot be read soundly.
//
// The rule: code is cut into regions at every function start (symbols, .eh_frame FDEs,
// resolvers); a region refers to another by a direct call or jump, a RIP-relative operand,
// or by running off its end into it. A resolver's RIP-relative operands (lea impl(%rip))
// are the functions it can return: dispatch edges. Every region is taken to run directly
// when nothing refers to it, when it holds an exported symbol, the entry point or
// DT_INIT/DT_FINI, when a relocation points into it, or when a region that runs directly
// refers to it other than by a dispatch edge. A region reached only from dispatch edges is
// dispatched. What is assumed: indirect jumps through tables stay inside their function (as
// compilers emit them), and a resolver's RIP-relative addresses are what it returns.
func findDispatched(f *elf.File, spans []codeSpan) *dispatchMap {
	if f.Type != elf.ET_DYN || len(spans) == 0 {
		// In an ET_EXEC file absolute addresses in code and data need no relocation, so
		// references to a function cannot all be found.
		return nil
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].addr < spans[i-1].addr+uint64(len(spans[i-1].data)) {
			return nil // sections out of order or overlapping: addresses do not name one byte
		}
	}
	inCode := func(a uint64) bool { _, ok := spanAt(spans, a); return ok }
	resolvers := map[uint64]bool{}
	// listers take the address of every implementation without running it: glibc's
	// __libc_ifunc_impl_list (in libc.so.6 only) hands its test suite each implementation
	// paired with the CPUID condition under which it is usable, so its lea are dispatch
	// edges like a resolver's.
	listers := map[uint64]bool{}
	soname, _ := f.DynString(elf.DT_SONAME)
	isLibc := len(soname) == 1 && soname[0] == "libc.so.6"
	roots := map[uint64]bool{}
	starts := map[uint64]bool{}
	syms, _ := f.Symbols()
	dsyms, _ := f.DynamicSymbols()
	for i, list := range [][]elf.Symbol{syms, dsyms} {
		for _, s := range list {
			if s.Section == elf.SHN_UNDEF || !inCode(s.Value) {
				continue
			}
			switch elf.ST_TYPE(s.Info) {
			case elf.STT_GNU_IFUNC:
				resolvers[s.Value] = true
				starts[s.Value] = true
			case elf.STT_FUNC:
				starts[s.Value] = true
				if isLibc && s.Name == "__libc_ifunc_impl_list" {
					listers[s.Value] = true
				}
			}
			if i == 1 {
				roots[s.Value] = true // another object can call it
			}
		}
	}
	if len(resolvers) == 0 && !hasIRelative(f) {
		return nil
	}
	// Relocations: IRELATIVE names a resolver; any other points at what it relocates.
	refs, irel, ok := relocationTargets(f, dsyms)
	if !ok {
		return nil
	}
	for _, a := range irel {
		if inCode(a) {
			resolvers[a], starts[a] = true, true
		}
	}
	if len(resolvers) == 0 {
		return nil
	}
	for _, a := range refs {
		if inCode(a) {
			roots[a] = true
		}
	}
	roots[f.Entry] = true
	for _, tag := range []elf.DynTag{elf.DT_INIT, elf.DT_FINI} {
		if v, err := f.DynValue(tag); err == nil {
			for _, a := range v {
				roots[a] = true
			}
		}
	}
	if s := f.Section(".eh_frame"); s != nil && s.Type == elf.SHT_PROGBITS {
		if data, err := s.Data(); err == nil {
			fns, _ := ehFrameFunctions(data, s.Addr)
			for _, fn := range fns {
				if inCode(fn.start) {
					starts[fn.start] = true
				}
			}
		}
	}
	var regions []codeRegion
	for si, s := range spans {
		end := s.addr + uint64(len(s.data))
		var cuts []uint64
		for a := range starts {
			if a > s.addr && a < end {
				cuts = append(cuts, a)
			}
		}
		sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
		prev := s.addr
		for _, c := range append(cuts, end) {
			regions = append(regions, codeRegion{span: si, start: prev, end: c})
			prev = c
		}
	}
	find := func(a uint64) int {
		i := sort.Search(len(regions), func(i int) bool { return regions[i].end > a })
		if i < len(regions) && a >= regions[i].start {
			return i
		}
		return -1
	}
	type edge struct {
		to       int
		dispatch bool
	}
	edges := make([][]edge, len(regions))
	incoming := make([]bool, len(regions))
	addEdge := func(from, to int, dispatch bool) {
		if to >= 0 && to != from {
			edges[from] = append(edges[from], edge{to, dispatch})
			incoming[to] = true
		}
	}
	// a call that never returns (abort, __stack_chk_fail through the PLT) ends a function as
	// ret does: what follows it is padding and the next function, not reached from it
	slots := relocationSlots(f)
	// Each span is decoded in one linear sweep, as the scan does; an FDE may start inside an
	// instruction (glibc's __restore_rt), so regions are then moved to the instruction
	// boundaries the sweep found.
	aligned := make([]uint64, len(regions))
	ri := 0
	for si, s := range spans {
		for ; ri < len(regions) && regions[ri].span < si; ri++ {
		}
		aligned[ri] = s.addr
		for j := ri + 1; j < len(regions) && regions[j].span == si; j++ {
			aligned[j] = s.addr + uint64(len(s.data))
		}
		ended := true
		for off := 0; off < len(s.data); {
			at := s.addr + uint64(off)
			for ri+1 < len(regions) && regions[ri+1].span == si && regions[ri+1].start <= at {
				if !ended {
					addEdge(ri, ri+1, false) // it runs on into the next function
				}
				ri++
				aligned[ri] = at
			}
			in, err := x86.Decode(s.data[off:])
			if err != nil {
				// Bytes that do not decode may hide a reference to any function.
				return nil
			}
			code := s.data[off:]
			noReturn := false
			if t, ok := in.DirectTarget(code, at); ok {
				addEdge(ri, find(t), false)
				noReturn = in.IsCall() && noReturnCallee(t, spans, slots)
			} else if t, ok := in.RIPTarget(code, at); ok {
				from := regions[ri].start
				addEdge(ri, find(t), resolvers[from] || listers[from])
			}
			switch {
			case in.EndsFlow() || noReturn:
				ended = true
			case !in.IsPadding():
				ended = false
			}
			off += int(in.Len)
		}
	}
	direct := make([]bool, len(regions))
	var queue []int
	mark := func(i int) {
		if i >= 0 && !direct[i] {
			direct[i] = true
			queue = append(queue, i)
		}
	}
	for i := range regions {
		if !incoming[i] {
			mark(i)
		}
	}
	for a := range roots {
		mark(find(a))
	}
	for a := range resolvers {
		mark(find(a))
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, e := range edges[i] {
			if !e.dispatch {
				mark(e.to)
			}
		}
	}
	// What is not direct is dispatched if a dispatch edge leads to it; anything else (code
	// only a cycle of unreferenced functions reaches) is counted as direct.
	seen := make([]bool, len(regions))
	queue = queue[:0]
	for i := range regions {
		for _, e := range edges[i] {
			if e.dispatch && !seen[e.to] {
				seen[e.to] = true
				queue = append(queue, e.to)
			}
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, e := range edges[i] {
			if !seen[e.to] {
				seen[e.to] = true
				queue = append(queue, e.to)
			}
		}
	}
	for i := range regions {
		regions[i].dispatched = seen[i] && !direct[i]
	}
	// Only now, with every address looked up in the regions as cut, move the cuts to the
	// instruction boundaries the sweep found, so that scanning region by region decodes the
	// same instructions as scanning each span whole.
	for i := range regions {
		regions[i].start = aligned[i]
		if i+1 < len(regions) && regions[i+1].span == regions[i].span {
			regions[i].end = aligned[i+1]
		}
	}
	return &dispatchMap{regions: regions, resolvers: len(resolvers)}
}

// hasIRelative reports whether f has an R_X86_64_IRELATIVE relocation.
func hasIRelative(f *elf.File) bool {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return true // let relocationTargets refuse it
		}
		for i := 0; i+24 <= len(data); i += 24 {
			if elf.R_X86_64(binary.LittleEndian.Uint64(data[i+8:])&0xffffffff) == elf.R_X86_64_IRELATIVE {
				return true
			}
		}
	}
	return false
}

// relocationTargets lists the addresses f's dynamic relocations point at (addends of
// RELATIVE, values of defined symbols, words that RELR relocates) and, apart, the resolvers
// its IRELATIVE relocations name. ok is false for relocations it cannot read.
func relocationTargets(f *elf.File, dsyms []elf.Symbol) (refs, irel []uint64, ok bool) {
	for _, s := range f.Sections {
		switch s.Type {
		case elf.SHT_RELA:
			data, err := s.Data()
			if err != nil || len(data)%24 != 0 {
				return nil, nil, false
			}
			for i := 0; i+24 <= len(data); i += 24 {
				info := binary.LittleEndian.Uint64(data[i+8:])
				addend := binary.LittleEndian.Uint64(data[i+16:])
				typ, sym := elf.R_X86_64(info&0xffffffff), int(info>>32)
				switch {
				case typ == elf.R_X86_64_IRELATIVE:
					irel = append(irel, addend)
				case sym > 0 && sym <= len(dsyms):
					if ds := dsyms[sym-1]; ds.Section != elf.SHN_UNDEF {
						refs = append(refs, ds.Value+addend)
					}
				default:
					refs = append(refs, addend)
				}
			}
		case elf.SHT_REL:
			return nil, nil, false // x86-64 uses RELA; an implicit addend would need the target's bytes
		case elf.SectionType(19): // SHT_RELR, packed RELATIVE relocations
			data, err := s.Data()
			if err != nil || len(data)%8 != 0 {
				return nil, nil, false
			}
			var next uint64
			word := func(a uint64) bool {
				v, ok := readWord(f, a)
				refs = append(refs, v)
				return ok
			}
			for i := 0; i+8 <= len(data); i += 8 {
				e := binary.LittleEndian.Uint64(data[i:])
				if e&1 == 0 {
					if !word(e) {
						return nil, nil, false
					}
					next = e + 8
					continue
				}
				for bit := 1; bit < 64; bit++ {
					if e>>bit&1 != 0 && !word(next+uint64(bit-1)*8) {
						return nil, nil, false
					}
				}
				next += 63 * 8
			}
		}
	}
	return refs, irel, true
}

// readWord reads the 8 bytes a file's sections hold at address a.
func readWord(f *elf.File, a uint64) (uint64, bool) {
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC == 0 || a < s.Addr || a+8 > s.Addr+s.Size {
			continue
		}
		var b [8]byte
		if _, err := s.ReadAt(b[:], int64(a-s.Addr)); err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	return 0, false
}
