package x86

import (
	"math/bits"
	"strings"
)

// Ext is a set of x86 instruction-set extensions, one bit each. An instruction's Ext is
// everything a CPU must have for it to execute; the zero value is the x86-64 baseline
// (SSE2 and everything older).
type Ext uint64

// The extensions the decoder tells apart. SSE3 through SSE4.2 and POPCNT are tracked
// separately; callers that only know SSE4.2 fold them together.
const (
	SSE3 Ext = 1 << iota
	SSSE3
	SSE41
	SSE42
	POPCNT
	LZCNT
	AVX
	AVX2
	FMA
	F16C
	BMI1
	BMI2
	AES
	PCLMUL
	SHA
	MOVBE
	ADX
	AVXVNNI
	AVXVNNIINT8
	AVXVNNIINT16
	AVXIFMA
	AVXNECONVERT
	GFNI
	VAES
	VPCLMUL
	AVX512F
	AVX512CD
	AVX512VL
	AVX512DQ
	AVX512BW
	AVX512VBMI
	AVX512VBMI2
	AVX512VNNI
	AVX512BF16
	AVX512FP16
	AVX512IFMA
	AVX512VPOPCNTDQ
	AVX512BITALG
	AVX512VP2INTERSECT
	AVX5124VNNIW
	AMXTile
	AMXInt8
	AMXBF16
	AMXFP16
	FMA4
	XOP
	ThreeDNow
	SSE4A
	CX16
	RDRAND
	RDSEED
	RTM
	XSAVE
	XSAVEOPT
	XSAVEC
	XSAVES
	PKU
	RDTSCP
	RDPID
	CLWB
	CLFLUSHOPT
	CMPCCXADD
	// Unclassified marks an instruction whose opcode the decoder's tables do not name (VEX,
	// EVEX, or legacy 0F38/0F3A, where every opcode is an extension) or whose extension no
	// host feature names (VIA PadLock; Xeon Phi's AVX512ER, AVX512PF and 4FMAPS); it is
	// counted with the least extension its encoding implies (AVX or AVX512F) and makes a
	// verdict unknown.
	Unclassified
	extEnd
)

var extNames = [...]string{
	"SSE3", "SSSE3", "SSE4.1", "SSE4.2", "POPCNT", "LZCNT", "AVX", "AVX2", "FMA", "F16C",
	"BMI1", "BMI2", "AES", "PCLMULQDQ", "SHA", "MOVBE", "ADX", "AVX_VNNI", "AVX_VNNI_INT8",
	"AVX_VNNI_INT16", "AVX_IFMA", "AVX_NE_CONVERT", "GFNI", "VAES", "VPCLMULQDQ",
	"AVX512F", "AVX512CD", "AVX512VL", "AVX512DQ", "AVX512BW", "AVX512_VBMI", "AVX512_VBMI2",
	"AVX512_VNNI", "AVX512_BF16", "AVX512_FP16", "AVX512_IFMA", "AVX512_VPOPCNTDQ",
	"AVX512_BITALG", "AVX512_VP2INTERSECT", "AVX512_4VNNIW", "AMX_TILE", "AMX_INT8",
	"AMX_BF16", "AMX_FP16", "FMA4", "XOP", "3DNOW", "SSE4A", "CX16", "RDRAND", "RDSEED", "RTM",
	"XSAVE", "XSAVEOPT", "XSAVEC", "XSAVES", "PKU", "RDTSCP", "RDPID", "CLWB", "CLFLUSHOPT",
	"CMPCCXADD", "UNCLASSIFIED",
}

// AVX512Any is every AVX-512 extension bit: an instruction with any of them is EVEX-encoded
// or an AVX-512 opmask instruction.
const AVX512Any = AVX512F | AVX512CD | AVX512VL | AVX512DQ | AVX512BW | AVX512VBMI |
	AVX512VBMI2 | AVX512VNNI | AVX512BF16 | AVX512FP16 | AVX512IFMA | AVX512VPOPCNTDQ |
	AVX512BITALG | AVX512VP2INTERSECT | AVX5124VNNIW

// Each calls f for every extension in e, lowest bit first.
func (e Ext) Each(f func(Ext)) {
	for e != 0 {
		b := e & -e
		f(b)
		e &^= b
	}
}

// Count returns the number of extensions in e.
func (e Ext) Count() int { return bits.OnesCount64(uint64(e)) }

// String names the extensions in e joined by '+', or "baseline" for none.
func (e Ext) String() string {
	if e == 0 {
		return "baseline"
	}
	var parts []string
	e.Each(func(b Ext) {
		i := bits.TrailingZeros64(uint64(b))
		if i < len(extNames) {
			parts = append(parts, extNames[i])
		} else {
			parts = append(parts, "?")
		}
	})
	return strings.Join(parts, "+")
}
