package preflight

import (
	"debug/elf"
	"sort"

	"github.com/llbuild/llbuild/preflight/x86"
)

// cpuidChosen are functions of a toolchain's runtime, linked into a file, that run only
// after a CPUID test of their own picks them, by their symbol names, with what picks them.
// libstdc++'s std::random_device (random.cc, random_device::_M_init) takes __x86_rdseed_rdrand,
// __x86_rdseed or __x86_rdrand as its entropy function only when CPUID says the CPU has
// RDSEED (and RDRAND) or RDRAND; nothing else calls them. Where libstdc++ is linked
// statically (-static-libstdc++, or a toolchain that has only libstdc++.a) they sit in
// libggml-base.so and read as RDRAND and RDSEED on every host that lacks them. The symbols
// are local (.symtab): in a stripped file nothing names them and they still count as code
// that runs directly.
var cpuidChosen = map[string]string{
	"_ZNSt12_GLOBAL__N_112__x86_rdrandEPv":        "libstdc++'s std::random_device",
	"_ZNSt12_GLOBAL__N_112__x86_rdseedEPv":        "libstdc++'s std::random_device",
	"_ZNSt12_GLOBAL__N_119__x86_rdseed_rdrandEPv": "libstdc++'s std::random_device",
}

// addrRange is [start, end) in a file's addresses.
type addrRange struct{ start, end uint64 }

// chosenFunctions returns the address ranges of f's cpuidChosen functions (sorted) and what
// picks them, each named once.
func chosenFunctions(f *elf.File) ([]addrRange, []string) {
	syms, err := f.Symbols()
	if err != nil {
		return nil, nil
	}
	var ranges []addrRange
	var by []string
	for _, s := range syms {
		who, ok := cpuidChosen[s.Name]
		if !ok || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || s.Section == elf.SHN_UNDEF {
			continue
		}
		ranges = append(ranges, addrRange{s.Value, s.Value + s.Size})
		if len(by) == 0 || by[len(by)-1] != who {
			by = append(by, who)
		}
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].start < ranges[j].start })
	return ranges, by
}

// markChosen cuts regions at the edges of the chosen ranges and marks what lies inside one
// as dispatched. A cut is moved to the next instruction boundary of the linear sweep that
// scans the region, so that scanning region by region decodes what scanning it whole does.
func markChosen(regions []codeRegion, spans []codeSpan, chosen []addrRange) []codeRegion {
	inChosen := func(a uint64) bool {
		i := sort.Search(len(chosen), func(i int) bool { return chosen[i].end > a })
		return i < len(chosen) && a >= chosen[i].start
	}
	var out []codeRegion
	for _, r := range regions {
		var cuts []uint64
		for _, c := range chosen {
			for _, a := range []uint64{c.start, c.end} {
				if a > r.start && a < r.end {
					cuts = append(cuts, a)
				}
			}
		}
		if len(cuts) == 0 {
			r.dispatched = r.dispatched || inChosen(r.start)
			out = append(out, r)
			continue
		}
		sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
		sp := spans[r.span]
		code := sp.data[r.start-sp.addr : r.end-sp.addr]
		prev, off, ci := r.start, 0, 0
		for off < len(code) && ci < len(cuts) {
			at := r.start + uint64(off)
			if at >= cuts[ci] {
				if at > prev {
					out = append(out, codeRegion{span: r.span, start: prev, end: at, dispatched: r.dispatched || inChosen(prev)})
					prev = at
				}
				for ci < len(cuts) && cuts[ci] <= at {
					ci++
				}
				continue
			}
			n := 1
			if in, err := x86.Decode(code[off:]); err == nil {
				n = int(in.Len)
			}
			off += n
		}
		out = append(out, codeRegion{span: r.span, start: prev, end: r.end, dispatched: r.dispatched || inChosen(prev)})
	}
	return out
}

// wholeSpans is one region per span, none dispatched.
func wholeSpans(spans []codeSpan) []codeRegion {
	regions := make([]codeRegion, len(spans))
	for i, s := range spans {
		regions[i] = codeRegion{span: i, start: s.addr, end: s.addr + uint64(len(s.data))}
	}
	return regions
}
