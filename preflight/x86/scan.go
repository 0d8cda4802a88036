package x86

import "math/bits"

// SamplesPerExt is how many example instructions a Stats keeps for each extension.
const SamplesPerExt = 4

// Sample is one decoded instruction kept as an example of an extension's use.
type Sample struct {
	Addr  uint64
	Bytes [15]byte
	Inst  Inst
}

// Code returns the instruction's bytes.
func (s *Sample) Code() []byte { return s.Bytes[:s.Inst.Len] }

// Stats accumulates what a run of machine code needs. The zero value is ready to use.
type Stats struct {
	Bytes  int // bytes of code scanned
	Insts  int // instructions decoded
	Errors int // bytes skipped because they did not decode
	// FirstError is the address of the first byte that did not decode (valid when Errors > 0)
	// and FirstErrorBytes the bytes from there (up to 15, fewer at the end of the code).
	FirstError      uint64
	FirstErrorBytes []byte
	// Used is the union of every instruction's extensions.
	Used Ext
	// Count[i] is the number of instructions needing extension bit i.
	Count [64]int
	// Samples[i] are the first instructions (by address) needing extension bit i.
	Samples [64][]Sample
}

// Scan decodes code, loaded at addr, instruction by instruction and accumulates the
// result. Bytes that do not decode are skipped one at a time (resynchronising the way a
// linear-sweep disassembler does) and counted in Errors.
func (s *Stats) Scan(code []byte, addr uint64) {
	s.Bytes += len(code)
	var in Inst
	for off := 0; off < len(code); {
		if err := decodeInto(code[off:], &in); err != nil {
			if s.Errors == 0 {
				s.FirstError = addr + uint64(off)
				s.FirstErrorBytes = append([]byte(nil), code[off:min(off+15, len(code))]...)
			}
			s.Errors++
			off++
			continue
		}
		s.Insts++
		if e := in.Ext; e != 0 {
			s.Used |= e
			for e != 0 {
				i := bits.TrailingZeros64(uint64(e))
				e &= e - 1
				s.Count[i]++
				if len(s.Samples[i]) < SamplesPerExt {
					smp := Sample{Addr: addr + uint64(off), Inst: in}
					copy(smp.Bytes[:], code[off:off+int(in.Len)])
					s.Samples[i] = append(s.Samples[i], smp)
				}
			}
		}
		off += int(in.Len)
	}
}

// CountOf returns how many instructions needed ext (a single extension bit).
func (s *Stats) CountOf(ext Ext) int { return s.Count[bits.TrailingZeros64(uint64(ext))] }

// SamplesOf returns the first instructions that needed ext (a single extension bit).
func (s *Stats) SamplesOf(ext Ext) []Sample { return s.Samples[bits.TrailingZeros64(uint64(ext))] }
