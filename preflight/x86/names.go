package x86

// Mnemonics for the instructions preflight most often reports: the ones that separate ggml's
// CPU variants (AVX2, FMA, F16C, BMI, AVX-512 and its VNNI/VBMI/BF16 subsets, AVX-VNNI, AMX)
// and the common moves and arithmetic compilers emit with them. The oracle test holds every
// name here against objdump's mnemonic for the same bytes. Instructions not listed have only
// their encoding described (Inst.String).

type nameKey struct {
	enc   Encoding
	m, pp uint8
	op    uint8
	w     int8 // 0 or 1, or -1 for either
}

type nameEntry struct {
	key  nameKey
	name string
}

func n(enc Encoding, m, pp, op uint8, w int8, name string) nameEntry {
	return nameEntry{nameKey{enc: enc, m: m, pp: pp, op: op, w: w}, name}
}

const (
	np  = 0
	p66 = 1
	pF3 = 2
	pF2 = 3
)

var nameTable = []nameEntry{
	// AVX-512 VNNI / BF16 / VBMI and AVX-VNNI.
	n(EVEX, Map0F38, p66, 0x50, -1, "vpdpbusd"), n(EVEX, Map0F38, p66, 0x51, -1, "vpdpbusds"),
	n(EVEX, Map0F38, p66, 0x52, -1, "vpdpwssd"), n(EVEX, Map0F38, p66, 0x53, -1, "vpdpwssds"),
	n(VEX, Map0F38, p66, 0x50, -1, "vpdpbusd"), n(VEX, Map0F38, p66, 0x51, -1, "vpdpbusds"),
	n(VEX, Map0F38, p66, 0x52, -1, "vpdpwssd"), n(VEX, Map0F38, p66, 0x53, -1, "vpdpwssds"),
	n(EVEX, Map0F38, pF3, 0x52, -1, "vdpbf16ps"), n(EVEX, Map0F38, pF2, 0x72, -1, "vcvtne2ps2bf16"),
	n(EVEX, Map0F38, pF3, 0x72, -1, "vcvtneps2bf16"),
	n(EVEX, Map0F38, p66, 0x8d, 0, "vpermb"), n(EVEX, Map0F38, p66, 0x8d, 1, "vpermw"),
	n(EVEX, Map0F38, p66, 0x75, 0, "vpermi2b"), n(EVEX, Map0F38, p66, 0x7d, 0, "vpermt2b"),
	n(EVEX, Map0F38, p66, 0x83, 1, "vpmultishiftqb"),
	n(EVEX, Map0F3A, p66, 0x25, 0, "vpternlogd"), n(EVEX, Map0F3A, p66, 0x25, 1, "vpternlogq"),
	// Integer arithmetic and logic (VEX and EVEX share opcodes; EVEX logic is per element width).
	n(EVEX, Map0F, p66, 0xfe, 0, "vpaddd"), n(VEX, Map0F, p66, 0xfe, -1, "vpaddd"),
	n(EVEX, Map0F, p66, 0xfc, -1, "vpaddb"), n(VEX, Map0F, p66, 0xfc, -1, "vpaddb"),
	n(EVEX, Map0F, p66, 0xfd, -1, "vpaddw"), n(VEX, Map0F, p66, 0xfd, -1, "vpaddw"),
	n(EVEX, Map0F, p66, 0xd4, 1, "vpaddq"), n(VEX, Map0F, p66, 0xd4, -1, "vpaddq"),
	n(EVEX, Map0F, p66, 0xef, 0, "vpxord"), n(EVEX, Map0F, p66, 0xef, 1, "vpxorq"), n(VEX, Map0F, p66, 0xef, -1, "vpxor"),
	n(EVEX, Map0F, p66, 0xdb, 0, "vpandd"), n(EVEX, Map0F, p66, 0xdb, 1, "vpandq"), n(VEX, Map0F, p66, 0xdb, -1, "vpand"),
	n(EVEX, Map0F, p66, 0xeb, 0, "vpord"), n(EVEX, Map0F, p66, 0xeb, 1, "vporq"), n(VEX, Map0F, p66, 0xeb, -1, "vpor"),
	n(EVEX, Map0F, p66, 0xf5, -1, "vpmaddwd"), n(VEX, Map0F, p66, 0xf5, -1, "vpmaddwd"),
	n(EVEX, Map0F38, p66, 0x04, -1, "vpmaddubsw"), n(VEX, Map0F38, p66, 0x04, -1, "vpmaddubsw"),
	n(EVEX, Map0F38, p66, 0x00, -1, "vpshufb"), n(VEX, Map0F38, p66, 0x00, -1, "vpshufb"),
	// Float arithmetic.
	n(EVEX, Map0F, np, 0x58, 0, "vaddps"), n(VEX, Map0F, np, 0x58, -1, "vaddps"),
	n(EVEX, Map0F, np, 0x59, 0, "vmulps"), n(VEX, Map0F, np, 0x59, -1, "vmulps"),
	n(EVEX, Map0F, np, 0x5c, 0, "vsubps"), n(VEX, Map0F, np, 0x5c, -1, "vsubps"),
	n(EVEX, Map0F38, p66, 0xb8, 0, "vfmadd231ps"), n(EVEX, Map0F38, p66, 0xb8, 1, "vfmadd231pd"),
	n(VEX, Map0F38, p66, 0xb8, 0, "vfmadd231ps"), n(VEX, Map0F38, p66, 0xb8, 1, "vfmadd231pd"),
	n(EVEX, Map0F38, p66, 0xa8, 0, "vfmadd213ps"), n(VEX, Map0F38, p66, 0xa8, 0, "vfmadd213ps"),
	n(EVEX, Map0F38, p66, 0x98, 0, "vfmadd132ps"), n(VEX, Map0F38, p66, 0x98, 0, "vfmadd132ps"),
	n(VEX, Map0F38, p66, 0xb9, 0, "vfmadd231ss"), n(VEX, Map0F38, p66, 0xb9, 1, "vfmadd231sd"),
	// Conversions (F16C and their EVEX forms).
	n(VEX, Map0F38, p66, 0x13, 0, "vcvtph2ps"), n(EVEX, Map0F38, p66, 0x13, 0, "vcvtph2ps"),
	n(VEX, Map0F3A, p66, 0x1d, 0, "vcvtps2ph"), n(EVEX, Map0F3A, p66, 0x1d, 0, "vcvtps2ph"),
	n(EVEX, Map0F, pF3, 0x5b, 0, "vcvttps2dq"), n(VEX, Map0F, pF3, 0x5b, -1, "vcvttps2dq"),
	n(EVEX, Map0F, p66, 0x5b, 0, "vcvtps2dq"), n(VEX, Map0F, p66, 0x5b, -1, "vcvtps2dq"),
	n(EVEX, Map0F, np, 0x5b, 0, "vcvtdq2ps"), n(VEX, Map0F, np, 0x5b, -1, "vcvtdq2ps"),
	n(EVEX, Map0F38, p66, 0x40, 0, "vpmulld"), n(EVEX, Map0F38, p66, 0x40, 1, "vpmullq"), n(VEX, Map0F38, p66, 0x40, -1, "vpmulld"),
	// AVX-512 lane inserts and extracts.
	n(EVEX, Map0F3A, p66, 0x18, 0, "vinsertf32x4"), n(EVEX, Map0F3A, p66, 0x18, 1, "vinsertf64x2"),
	n(EVEX, Map0F3A, p66, 0x19, 0, "vextractf32x4"), n(EVEX, Map0F3A, p66, 0x19, 1, "vextractf64x2"),
	n(EVEX, Map0F3A, p66, 0x1a, 0, "vinsertf32x8"), n(EVEX, Map0F3A, p66, 0x1a, 1, "vinsertf64x4"),
	n(EVEX, Map0F3A, p66, 0x1b, 0, "vextractf32x8"), n(EVEX, Map0F3A, p66, 0x1b, 1, "vextractf64x4"),
	n(EVEX, Map0F3A, p66, 0x38, 0, "vinserti32x4"), n(EVEX, Map0F3A, p66, 0x38, 1, "vinserti64x2"),
	n(EVEX, Map0F3A, p66, 0x39, 0, "vextracti32x4"), n(EVEX, Map0F3A, p66, 0x39, 1, "vextracti64x2"),
	n(EVEX, Map0F3A, p66, 0x3a, 0, "vinserti32x8"), n(EVEX, Map0F3A, p66, 0x3a, 1, "vinserti64x4"),
	n(EVEX, Map0F3A, p66, 0x3b, 0, "vextracti32x8"), n(EVEX, Map0F3A, p66, 0x3b, 1, "vextracti64x4"),
	// Moves.
	n(EVEX, Map0F, pF3, 0x6f, 0, "vmovdqu32"), n(EVEX, Map0F, pF3, 0x6f, 1, "vmovdqu64"),
	n(EVEX, Map0F, pF2, 0x6f, 0, "vmovdqu8"), n(EVEX, Map0F, pF2, 0x6f, 1, "vmovdqu16"),
	n(EVEX, Map0F, p66, 0x6f, 0, "vmovdqa32"), n(EVEX, Map0F, p66, 0x6f, 1, "vmovdqa64"),
	n(EVEX, Map0F, pF3, 0x7f, 0, "vmovdqu32"), n(EVEX, Map0F, pF3, 0x7f, 1, "vmovdqu64"),
	n(EVEX, Map0F, pF2, 0x7f, 0, "vmovdqu8"), n(EVEX, Map0F, pF2, 0x7f, 1, "vmovdqu16"),
	n(EVEX, Map0F, p66, 0x7f, 0, "vmovdqa32"), n(EVEX, Map0F, p66, 0x7f, 1, "vmovdqa64"),
	n(VEX, Map0F, pF3, 0x6f, -1, "vmovdqu"), n(VEX, Map0F, p66, 0x6f, -1, "vmovdqa"),
	n(VEX, Map0F, pF3, 0x7f, -1, "vmovdqu"), n(VEX, Map0F, p66, 0x7f, -1, "vmovdqa"),
	n(EVEX, Map0F, np, 0x10, 0, "vmovups"), n(EVEX, Map0F, np, 0x11, 0, "vmovups"),
	n(VEX, Map0F, np, 0x10, -1, "vmovups"), n(VEX, Map0F, np, 0x11, -1, "vmovups"),
	n(EVEX, Map0F, np, 0x28, 0, "vmovaps"), n(EVEX, Map0F, np, 0x29, 0, "vmovaps"),
	n(VEX, Map0F, np, 0x28, -1, "vmovaps"), n(VEX, Map0F, np, 0x29, -1, "vmovaps"),
	// Broadcasts, permutes, lane moves (AVX2 and AVX).
	n(VEX, Map0F38, p66, 0x58, -1, "vpbroadcastd"), n(VEX, Map0F38, p66, 0x59, -1, "vpbroadcastq"),
	n(VEX, Map0F38, p66, 0x78, -1, "vpbroadcastb"), n(VEX, Map0F38, p66, 0x79, -1, "vpbroadcastw"),
	n(VEX, Map0F38, p66, 0x5a, -1, "vbroadcasti128"), n(VEX, Map0F38, p66, 0x18, -1, "vbroadcastss"),
	n(VEX, Map0F38, p66, 0x36, -1, "vpermd"), n(VEX, Map0F38, p66, 0x16, -1, "vpermps"),
	n(VEX, Map0F3A, p66, 0x38, -1, "vinserti128"), n(VEX, Map0F3A, p66, 0x39, -1, "vextracti128"),
	n(VEX, Map0F3A, p66, 0x46, -1, "vperm2i128"), n(VEX, Map0F3A, p66, 0x18, -1, "vinsertf128"),
	n(VEX, Map0F3A, p66, 0x19, -1, "vextractf128"), n(VEX, Map0F3A, p66, 0x06, -1, "vperm2f128"),
	n(VEX, Map0F3A, p66, 0x00, 1, "vpermq"), n(VEX, Map0F3A, p66, 0x01, 1, "vpermpd"),
	n(VEX, Map0F3A, p66, 0x02, 0, "vpblendd"),
	// AMX.
	n(VEX, Map0F38, pF2, 0x5e, 0, "tdpbssd"), n(VEX, Map0F38, pF3, 0x5e, 0, "tdpbsud"),
	n(VEX, Map0F38, p66, 0x5e, 0, "tdpbusd"), n(VEX, Map0F38, np, 0x5e, 0, "tdpbuud"),
	n(VEX, Map0F38, pF3, 0x5c, 0, "tdpbf16ps"),
	n(VEX, Map0F38, pF2, 0x4b, 0, "tileloadd"), n(VEX, Map0F38, p66, 0x4b, 0, "tileloaddt1"),
	n(VEX, Map0F38, pF3, 0x4b, 0, "tilestored"), n(VEX, Map0F38, p66, 0x49, 0, "sttilecfg"),
	n(VEX, Map0F38, pF2, 0x49, 0, "tilezero"),
	// BMI1 and BMI2.
	n(VEX, Map0F38, np, 0xf2, -1, "andn"), n(VEX, Map0F38, np, 0xf7, -1, "bextr"),
	n(VEX, Map0F38, p66, 0xf7, -1, "shlx"), n(VEX, Map0F38, pF3, 0xf7, -1, "sarx"),
	n(VEX, Map0F38, pF2, 0xf7, -1, "shrx"), n(VEX, Map0F38, np, 0xf5, -1, "bzhi"),
	n(VEX, Map0F38, pF3, 0xf5, -1, "pext"), n(VEX, Map0F38, pF2, 0xf5, -1, "pdep"),
	n(VEX, Map0F38, pF2, 0xf6, -1, "mulx"), n(VEX, Map0F3A, pF2, 0xf0, -1, "rorx"),
	// Legacy SSSE3 / SSE4 / POPCNT / LZCNT.
	n(Legacy, Map0F38, p66, 0x00, -1, "pshufb"), n(Legacy, Map0F38, p66, 0x04, -1, "pmaddubsw"),
	n(Legacy, Map0F38, p66, 0x40, -1, "pmulld"), n(Legacy, Map0F38, p66, 0x17, -1, "ptest"),
	n(Legacy, Map0F, pF3, 0xb8, -1, "popcnt"), n(Legacy, Map0F, pF3, 0xbd, -1, "lzcnt"),
}

var names map[nameKey]string

func init() {
	names = make(map[nameKey]string, len(nameTable))
	for _, e := range nameTable {
		names[e.key] = e.name
	}
}

// Name returns the instruction's mnemonic when the decoder's name table has it, else "".
func (in Inst) Name() string {
	if in.Enc == VEX && in.Map == Map0F && in.Op == 0x77 {
		if in.L != 0 {
			return "vzeroall"
		}
		return "vzeroupper"
	}
	if in.Enc == VEX && in.Map == Map0F38 && in.Op == 0x49 && in.PP == np {
		if in.ModRM == 0xc0 {
			return "tilerelease"
		}
		return "ldtilecfg"
	}
	w := int8(0)
	if in.W {
		w = 1
	}
	k := nameKey{enc: in.Enc, m: in.Map, pp: in.PP, op: in.Op, w: w}
	if s, ok := names[k]; ok {
		return s
	}
	k.w = -1
	return names[k]
}
