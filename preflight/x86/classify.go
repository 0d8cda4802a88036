package x86

// Classification follows the opcode tables of the Intel SDM volume 2 and the AMD APM
// volume 4. Where the decoder's tables do not name an opcode it is conservative: a VEX
// instruction counts as AVX and an EVEX one as AVX512F, and both carry Unclassified.

// classifyLegacy returns the extensions a legacy-encoded instruction needs. Only the
// extensions that matter for "will this run" are told apart; system instructions, x87 and
// the SSE2 baseline return 0.
func classifyLegacy(in *Inst) Ext {
	op, pp := in.Op, in.PP
	mem := in.HasModRM && in.ModRM>>6 != 3
	reg := (in.ModRM >> 3) & 7
	switch in.Map {
	case Map1Byte:
		switch {
		case (op == 0xdb || op == 0xdd || op == 0xdf) && mem && reg == 1:
			return SSE3 // fisttp
		case (op == 0xc6 || op == 0xc7) && in.ModRM == 0xf8:
			return RTM // xabort, xbegin
		}
	case Map0F:
		switch op {
		case 0x0e, 0x0f: // femms, 3DNow! (the opcode byte comes after the operands)
			return ThreeDNow
		case 0xa6, 0xa7:
			// VIA PadLock (xsha, montmul, xstore, xcrypt): #UD on every other CPU, and no
			// feature a host description names says whether a CPU has it.
			return Unclassified
		case 0x01:
			switch in.ModRM {
			case 0xd0, 0xd1: // xgetbv, xsetbv
				return XSAVE
			case 0xd5, 0xd6: // xend, xtest
				return RTM
			case 0xee, 0xef: // rdpkru, wrpkru
				return PKU
			case 0xf9:
				return RDTSCP
			case 0xe8, 0xe9:
				// serialize (np E8), xsusldtrk and xresldtrk (F2, TSXLDTRK): no host feature
				// names them.
				if (pp == 0 && in.ModRM == 0xe8) || pp == 3 {
					return Unclassified
				}
			}
		case 0x2b:
			if pp >= 2 { // movntss, movntsd
				return SSE4A
			}
		case 0x78, 0x79:
			if pp == 1 || pp == 3 { // extrq, insertq
				return SSE4A
			}
		case 0xae:
			switch {
			case mem && pp == 0 && (reg == 4 || reg == 5): // xsave, xrstor
				return XSAVE
			case mem && pp == 0 && reg == 6:
				return XSAVEOPT
			case mem && pp == 1 && reg == 6:
				return CLWB
			case mem && pp == 1 && reg == 7:
				return CLFLUSHOPT
			// rdfsbase ... wrgsbase (FSGSBASE), ptwrite (PT), tpause, umonitor and umwait
			// (WAITPKG): #UD without their extension, and no host feature names them.
			case !mem && pp == 2 && reg <= 3, pp == 2 && reg == 4, !mem && pp != 0 && reg == 6:
				return Unclassified
			}
		case 0xc7:
			switch {
			case mem && reg == 1 && in.W:
				return CX16
			case mem && reg == 4: // xsavec
				return XSAVEC
			case mem && (reg == 3 || reg == 5): // xrstors, xsaves
				return XSAVES
			case !mem && reg == 6 && pp == 2: // senduipi (UINTR), which no host feature names
				return Unclassified
			case !mem && reg == 6:
				return RDRAND
			case !mem && reg == 7 && pp == 2:
				return RDPID
			case !mem && reg == 7:
				return RDSEED
			}
		case 0x12:
			if pp >= 2 { // movsldup (F3), movddup (F2)
				return SSE3
			}
		case 0x16:
			if pp == 2 { // movshdup
				return SSE3
			}
		case 0x7c, 0x7d, 0xd0: // haddp*, hsubp*, addsubp*
			if pp == 1 || pp == 3 {
				return SSE3
			}
		case 0xf0:
			if pp == 3 { // lddqu
				return SSE3
			}
		case 0xb8:
			if pp == 2 {
				return POPCNT
			}
		case 0xbd:
			if pp == 2 {
				return LZCNT
			}
			// F3 0F BC (tzcnt) is deliberately baseline: compilers emit it as "rep bsf",
			// which older CPUs execute as bsf with the same result for non-zero inputs.
		}
	case Map0F38:
		switch {
		case op <= 0x0b || (op >= 0x1c && op <= 0x1e):
			if pp <= 1 {
				return SSSE3
			}
		case op == 0x10 || op == 0x14 || op == 0x15 || op == 0x17 ||
			(op >= 0x20 && op <= 0x25) || (op >= 0x28 && op <= 0x2b) ||
			(op >= 0x30 && op <= 0x35) || (op >= 0x38 && op <= 0x41):
			if pp == 1 {
				return SSE41
			}
		case op == 0x37:
			if pp == 1 {
				return SSE42
			}
		case op >= 0xc8 && op <= 0xcd:
			if pp == 0 {
				return SHA
			}
		case op == 0xcf:
			if pp == 1 {
				return GFNI
			}
		case op >= 0xdb && op <= 0xdf:
			if pp == 1 {
				return AES
			}
		case op == 0xf0 || op == 0xf1:
			if pp == 3 {
				return SSE42 // crc32
			}
			return MOVBE
		case op == 0xf6:
			if pp == 1 || pp == 2 {
				return ADX
			}
		}
		return Unclassified
	case Map0F3A:
		switch {
		case op == 0x0f:
			if pp <= 1 {
				return SSSE3
			}
		case (op >= 0x08 && op <= 0x0e) || (op >= 0x14 && op <= 0x17) ||
			(op >= 0x20 && op <= 0x22) || (op >= 0x40 && op <= 0x42):
			if pp == 1 {
				return SSE41
			}
		case op == 0x44:
			if pp == 1 {
				return PCLMUL
			}
		case op >= 0x60 && op <= 0x63:
			if pp == 1 {
				return SSE42
			}
		case op == 0xcc:
			if pp == 0 {
				return SHA
			}
		case op == 0xce || op == 0xcf:
			if pp == 1 {
				return GFNI
			}
		case op == 0xdf:
			if pp == 1 {
				return AES
			}
		}
		return Unclassified
	}
	return 0
}

// avxInt is AVX at 128 bits and AVX2 at 256 bits: the integer SSE instructions that AVX
// extended to VEX but only AVX2 widened to ymm.
func avxInt(l uint8) Ext {
	if l != 0 {
		return AVX2
	}
	return AVX
}

// kmaskWidth classifies the VEX-encoded opmask instructions (kand, kmov, kortest, ...):
// byte forms are AVX512DQ, word forms AVX512F, dword and qword forms AVX512BW.
func kmaskWidth(pp uint8, w bool) Ext {
	switch {
	case pp == 1 && !w: // b
		return AVX512F | AVX512DQ
	case pp == 0 && !w: // w
		return AVX512F
	default: // d, q
		return AVX512F | AVX512BW
	}
}

func classifyVEX(in *Inst) Ext {
	op, pp, l := in.Op, in.PP, in.L
	switch in.Map {
	case Map0F:
		switch {
		case op == 0x4b: // kunpckbw (66 W0) builds a word: F; kunpckwd and kunpckdq: BW
			if pp == 1 && !in.W {
				return AVX512F
			}
			return AVX512F | AVX512BW
		case op == 0x41 || op == 0x42 || (op >= 0x44 && op <= 0x47) ||
			(op >= 0x90 && op <= 0x91) || op == 0x98:
			return kmaskWidth(pp, in.W)
		case op == 0x4a || op == 0x99: // kadd, ktest: the word form needs DQ too
			if pp == 0 && !in.W {
				return AVX512F | AVX512DQ
			}
			return kmaskWidth(pp, in.W)
		case op == 0x92 || op == 0x93: // kmov to/from a general register
			switch pp {
			case 0:
				return AVX512F
			case 1:
				return AVX512F | AVX512DQ
			}
			return AVX512F | AVX512BW
		case pp == 1 && ((op >= 0x60 && op <= 0x6d) || (op >= 0x70 && op <= 0x76) ||
			(op >= 0xd1 && op <= 0xd5) || (op >= 0xd7 && op <= 0xdf) ||
			(op >= 0xe0 && op <= 0xe5) || (op >= 0xe8 && op <= 0xef) ||
			(op >= 0xf1 && op <= 0xf6) || (op >= 0xf8 && op <= 0xfe)):
			return avxInt(l)
		case op == 0x70 && pp >= 2: // vpshufhw, vpshuflw
			return avxInt(l)
		case (op >= 0x10 && op <= 0x17) || (op >= 0x28 && op <= 0x2f) ||
			(op >= 0x50 && op <= 0x5f) || op == 0x6e || op == 0x6f || op == 0x77 ||
			op == 0x7c || op == 0x7d || op == 0x7e || op == 0x7f || op == 0xae ||
			op == 0xc2 || (op >= 0xc4 && op <= 0xc6) || op == 0xd0 || op == 0xd6 ||
			op == 0xe6 || op == 0xe7 || op == 0xf0 || op == 0xf7:
			return AVX
		}
	case Map0F38:
		switch {
		case op <= 0x0b || (op >= 0x1c && op <= 0x1e) || (op >= 0x20 && op <= 0x25) ||
			(op >= 0x28 && op <= 0x2b) || (op >= 0x30 && op <= 0x35) || (op >= 0x37 && op <= 0x40):
			if pp == 1 {
				return avxInt(l)
			}
		case op >= 0x0c && op <= 0x0f, op == 0x17, op == 0x1a, op >= 0x2c && op <= 0x2f, op == 0x41:
			if pp == 1 {
				return AVX
			}
		case op == 0x13:
			return F16C
		case op == 0x16 || op == 0x36 || (op >= 0x45 && op <= 0x47) || (op >= 0x58 && op <= 0x5a) ||
			op == 0x78 || op == 0x79 || op == 0x8c || op == 0x8e || (op >= 0x90 && op <= 0x93):
			if pp == 1 {
				return AVX2
			}
		case op == 0x18 || op == 0x19: // vbroadcastss/sd: AVX from memory, AVX2 from a register
			if pp == 1 {
				if in.ModRM>>6 == 3 {
					return AVX2
				}
				return AVX
			}
		case op == 0x49 || op == 0x4b:
			return AMXTile
		case op == 0x5c:
			if pp == 3 {
				return AMXTile | AMXFP16
			}
			return AMXTile | AMXBF16
		case op == 0x5e:
			return AMXTile | AMXInt8
		case op >= 0x50 && op <= 0x53:
			switch {
			case pp == 1:
				return AVXVNNI
			case op <= 0x51:
				return AVXVNNIINT8
			}
			return AVXVNNIINT16
		case op == 0xd2 || op == 0xd3:
			return AVXVNNIINT16
		case op == 0x72 || op == 0xb0 || op == 0xb1:
			return AVXNECONVERT
		case op == 0xb4 || op == 0xb5:
			return AVXIFMA
		case (op >= 0x96 && op <= 0x9f) || (op >= 0xa6 && op <= 0xaf) || (op >= 0xb6 && op <= 0xbf):
			if pp == 1 {
				return FMA
			}
		case op == 0xcf:
			return AVX | GFNI
		case op >= 0xe0 && op <= 0xef:
			if pp == 1 && in.HasModRM && in.ModRM>>6 != 3 {
				return CMPCCXADD
			}
		case op == 0xdb:
			return AVX | AES
		case op >= 0xdc && op <= 0xdf:
			if l != 0 {
				return AVX | VAES
			}
			return AVX | AES
		case op == 0xf2:
			return BMI1
		case op == 0xf3:
			return BMI1 // blsr, blsmsk, blsi
		case op == 0xf5 || op == 0xf6:
			return BMI2
		case op == 0xf7:
			if pp == 0 {
				return BMI1 // bextr
			}
			return BMI2
		}
	case Map0F3A:
		switch {
		case op <= 0x02 || op == 0x38 || op == 0x39 || op == 0x46:
			return AVX2
		case (op >= 0x04 && op <= 0x06) || (op >= 0x08 && op <= 0x0d) || (op >= 0x14 && op <= 0x19) ||
			(op >= 0x20 && op <= 0x22) || op == 0x40 || op == 0x41 || op == 0x4a || op == 0x4b ||
			(op >= 0x60 && op <= 0x63):
			return AVX
		case op == 0x0e || op == 0x0f || op == 0x42 || op == 0x4c:
			return avxInt(l)
		case op == 0x1d:
			return F16C
		case op == 0x30 || op == 0x32: // kshiftr/l b (W0, DQ) or w (W1, F)
			if in.W {
				return AVX512F
			}
			return AVX512F | AVX512DQ
		case op == 0x31 || op == 0x33:
			return AVX512F | AVX512BW
		case op == 0x44:
			if l != 0 {
				return AVX | VPCLMUL
			}
			return AVX | PCLMUL
		case op == 0xce || op == 0xcf:
			return AVX | GFNI
		case op == 0xdf:
			return AVX | AES
		case op == 0xf0:
			return BMI2 // rorx
		case op == 0x48 || op == 0x49: // vpermil2ps, vpermil2pd: AMD's XOP set (CPUID XOP)
			return XOP
		case (op >= 0x5c && op <= 0x5f) || (op >= 0x68 && op <= 0x6f) || (op >= 0x78 && op <= 0x7f):
			return FMA4
		}
	}
	return AVX | Unclassified
}

// evexScalar reports EVEX instructions that operate on one element (or a GPR) and so need
// no AVX512VL at 128 bits.
func evexScalar(in *Inst) bool {
	op, pp := in.Op, in.PP
	switch in.Map {
	case Map0F:
		switch op {
		case 0x10, 0x11, 0x51, 0x58, 0x59, 0x5a, 0x5c, 0x5d, 0x5e, 0x5f, 0x2a, 0x2c, 0x2d, 0x78, 0x79, 0x7b, 0xc2:
			return pp >= 2
		case 0x2e, 0x2f:
			return pp <= 1
		case 0x12, 0x13, 0x16, 0x17: // vmovlps/hps/lpd/hpd, vmovhlps/lhps: 128-bit only
			return pp <= 1
		case 0x6e, 0x7e, 0xd6, 0xc4, 0xc5:
			return true
		}
	case Map0F38:
		switch op {
		case 0x2d, 0x43, 0x4d, 0x4f, 0x99, 0x9d, 0x9f, 0xa9, 0xad, 0xaf, 0xb9, 0xbb, 0xbd, 0xbf, 0xcb, 0xcd:
			return pp == 1
		case 0x9b, 0xab: // vfmsub132ss, vfnmsub213ss ...; F2: v4fmaddss, v4fnmaddss
			return pp == 1 || pp == 3
		}
	case Map0F3A:
		switch op {
		case 0x0a, 0x0b, 0x14, 0x15, 0x16, 0x17, 0x20, 0x21, 0x22, 0x27, 0x51, 0x55, 0x57, 0x67:
			return pp == 1
		}
	}
	return false
}

func classifyEVEX(in *Inst) Ext {
	e := AVX512F
	if in.L < 2 && !(in.EVEXb && in.ModRM>>6 == 3) && !evexScalar(in) {
		e |= AVX512VL
	}
	return e | evexSpecific(in)
}

// evexSpecific returns the AVX-512 subsets beyond the foundation an EVEX opcode needs.
func evexSpecific(in *Inst) Ext {
	op, pp, w := in.Op, in.PP, in.W
	switch in.Map {
	case Map0F:
		switch {
		case pp == 1 && (op == 0x60 || op == 0x61 || op == 0x63 || op == 0x64 || op == 0x65 || op == 0x67 ||
			op == 0x68 || op == 0x69 || op == 0x6b || op == 0x71 || op == 0x74 || op == 0x75 ||
			op == 0xd1 || op == 0xd5 || op == 0xd8 || op == 0xd9 || op == 0xda || op == 0xdc ||
			op == 0xdd || op == 0xde || op == 0xe0 || op == 0xe1 || op == 0xe3 || op == 0xe4 ||
			op == 0xe5 || op == 0xe8 || op == 0xe9 || op == 0xea || op == 0xec || op == 0xed ||
			op == 0xee || op == 0xf1 || op == 0xf5 || op == 0xf6 || op == 0xf8 || op == 0xf9 ||
			op == 0xfc || op == 0xfd || op == 0xc4 || op == 0xc5):
			return AVX512BW
		case pp == 1 && op == 0x73:
			if r := (in.ModRM >> 3) & 7; r == 3 || r == 7 { // vpsrldq, vpslldq
				return AVX512BW
			}
		case op == 0x70 && pp >= 2, (op == 0x6f || op == 0x7f) && pp == 3: // vpshufhw/lw, vmovdqu8/16
			return AVX512BW
		case op >= 0x54 && op <= 0x57 && pp <= 1: // vandps ... vxorpd
			return AVX512DQ
		case (op == 0x78 || op == 0x79 || op == 0x7a || op == 0x7b) && pp == 1,
			op == 0x7a && pp >= 2 && w, op == 0xe6 && pp == 2 && w, op == 0x5b && pp == 0 && w:
			return AVX512DQ // conversions to and from quadwords
		}
	case Map0F38:
		// EVEX forms of the VEX-only VNNI-INT8 and VNNI-INT16 opcodes (vpdpbssd, vpdpwsud,
		// ...) came with AVX10.2: #UD on AVX-512 CPUs, and no host feature names them.
		if pp != 1 && (op == 0x50 || op == 0x51 || op == 0xd2 || op == 0xd3 || (pp == 0 && (op == 0x52 || op == 0x53)) || (pp == 2 && op == 0x53)) {
			return Unclassified
		}
		switch pp {
		case 1:
			switch op {
			case 0x00, 0x04, 0x0b, 0x1c, 0x1d, 0x20, 0x2b, 0x30, 0x26, 0x38, 0x3a, 0x3c, 0x3e, 0x66, 0x78, 0x79, 0x7a, 0x7b:
				return AVX512BW // 2B: vpackusdw
			case 0x10, 0x11, 0x12: // vpsrlvw, vpsravw, vpsllvw
				if w {
					return AVX512BW
				}
			case 0x75, 0x7d: // vpermi2b/w, vpermt2b/w
				if w {
					return AVX512BW
				}
				return AVX512VBMI
			case 0x8d: // vpermb / vpermw
				if w {
					return AVX512BW
				}
				return AVX512VBMI
			case 0x83:
				return AVX512VBMI // vpmultishiftqb
			case 0x40:
				if w {
					return AVX512DQ // vpmullq
				}
			case 0x19, 0x1b, 0x59, 0x5b:
				if !w {
					return AVX512DQ // vbroadcast{f,i}32x2, 32x8
				}
			case 0x1a, 0x5a:
				if w {
					return AVX512DQ // vbroadcast{f,i}64x2
				}
			case 0xc4, 0x44:
				return AVX512CD // vpconflict, vplzcnt
			case 0xc6, 0xc7, 0xc8, 0xca, 0xcb, 0xcc, 0xcd:
				// AVX512PF (vgatherpf*, vscatterpf*) and AVX512ER (vexp2, vrcp28, vrsqrt28):
				// Xeon Phi only, and no host feature names them.
				return Unclassified
			case 0x50, 0x51, 0x52, 0x53:
				return AVX512VNNI
			case 0xb4, 0xb5:
				return AVX512IFMA
			case 0x55:
				return AVX512VPOPCNTDQ
			case 0x54, 0x8f:
				return AVX512BITALG
			case 0x62, 0x63, 0x70, 0x71, 0x72, 0x73:
				return AVX512VBMI2
			case 0xcf:
				return GFNI
			case 0xdc, 0xdd, 0xde, 0xdf:
				return VAES
			}
		case 2:
			switch op {
			case 0x10, 0x20, 0x30, 0x26, 0x28, 0x29: // vpmov*wb, vptestnm b/w, vpmovm2b/w, vpmovb2m/w
				return AVX512BW
			case 0x38, 0x39:
				return AVX512DQ // vpmovm2d/q, vpmovd2m/q
			case 0x2a, 0x3a:
				return AVX512CD // vpbroadcastmb2q, vpbroadcastmw2d
			case 0x52:
				return AVX512BF16 // vdpbf16ps
			case 0x72:
				return AVX512BF16 // vcvtneps2bf16
			}
		case 3:
			switch op {
			case 0x72:
				return AVX512BF16 // vcvtne2ps2bf16
			case 0x52, 0x53:
				return AVX5124VNNIW
			case 0x9a, 0x9b, 0xaa, 0xab:
				return Unclassified // AVX512_4FMAPS (v4fmaddps ...): Xeon Phi only, no host feature
			case 0x68:
				return AVX512VP2INTERSECT
			}
		}
	case Map0F3A:
		if pp == 0 {
			switch op {
			case 0x08, 0x0a, 0x26, 0x27, 0x56, 0x57, 0x66, 0x67, 0xc2:
				return AVX512FP16
			}
			// Every other EVEX 0F3A opcode needs the 66 prefix; objdump still names some
			// without it (vdbpsadbw, vpshldw), which #UD.
			return Unclassified
		}
		switch op {
		case 0xc2:
			if pp == 2 {
				return AVX512FP16 // vcmpsh
			}
		case 0x0f, 0x3e, 0x3f, 0x42, 0x14, 0x15, 0x20:
			return AVX512BW
		case 0x16, 0x22, 0x50, 0x51, 0x56, 0x57, 0x66, 0x67:
			return AVX512DQ
		case 0x18, 0x19, 0x38, 0x39:
			if w {
				return AVX512DQ // 64x2 inserts and extracts
			}
		case 0x1a, 0x1b, 0x3a, 0x3b:
			if !w {
				return AVX512DQ // 32x8 inserts and extracts
			}
		case 0x70, 0x71, 0x72, 0x73:
			return AVX512VBMI2
		case 0x44:
			return VPCLMUL
		case 0xce, 0xcf:
			return GFNI
		}
	case 5, 6:
		return AVX512FP16
	}
	return 0
}
