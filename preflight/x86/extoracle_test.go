package x86

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// This file is the oracle's reading of what an instruction needs, from objdump's text
// alone: its mnemonic, its operands, and (for the encoding objdump does not always print)
// the first byte after the prefixes. It shares nothing with the decoder's opcode tables, so
// a table change that moves an instruction to another extension disagrees with it.
//
// It follows the decoder's conventions for what an instruction's Ext names: the extension
// its CPUID bit is checked for (FMA, F16C, AVX2 and the BMI, VNNI and AMX sets name their
// own bit, not AVX as well); AES, PCLMULQDQ, GFNI, VAES and VPCLMULQDQ in VEX form add AVX
// and in EVEX form AVX512F; EVEX adds AVX512VL at 128 and 256 bits for all but scalar and
// fixed-128-bit instructions; tzcnt is baseline, because compilers emit the same bytes as
// "rep bsf", which CPUs without BMI1 run as bsf.

// encOf is the encoding that objdump's raw bytes show: VEX (C4, C5), EVEX (62) or XOP (8F
// with a map of 8 or more) after the legacy and REX prefixes, else legacy.
func encOf(b []byte) Encoding {
	for i, c := range b {
		switch {
		case c == 0x66 || c == 0x67 || c == 0xf2 || c == 0xf3 || c == 0xf0 ||
			c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 || c == 0x64 || c == 0x65:
		case c&0xf0 == 0x40:
		case c == 0xc4 || c == 0xc5:
			return VEX
		case c == 0x62:
			return EVEX
		case c == 0x8f && i+1 < len(b) && b[i+1]&0x1f >= 8:
			return XOPEnc
		default:
			return Legacy
		}
	}
	return Legacy
}

// splitInst splits objdump's text into the mnemonic (after prefixes such as {vex}, rex.W,
// lock, notrack) and the operands, without the comment and symbol objdump appends.
func splitInst(text string) (mn, ops string) {
	if i := strings.IndexAny(text, "#<"); i >= 0 {
		text = text[:i]
	}
	f := strings.Fields(text)
	for len(f) > 0 && (f[0] == "{vex}" || f[0] == "{vex3}" || f[0] == "{evex}" || strings.HasPrefix(f[0], "rex") ||
		f[0] == "data16" || f[0] == "addr32" || f[0] == "cs" || f[0] == "ds" || f[0] == "es" || f[0] == "ss" ||
		f[0] == "fs" || f[0] == "gs" || f[0] == "notrack" || f[0] == "bnd" || f[0] == "lock" || f[0] == "rep" ||
		f[0] == "repz" || f[0] == "repnz" || f[0] == "repe" || f[0] == "repne" || f[0] == "xacquire" || f[0] == "xrelease") {
		f = f[1:]
	}
	if len(f) == 0 {
		return "", ""
	}
	// Branch hints print as "jne,pt".
	mn, _, _ = strings.Cut(f[0], ",")
	return mn, strings.Join(f[1:], " ")
}

// vexRule is how a VEX form's need depends on its operands.
type vexRule uint8

const (
	vexFixed    vexRule = iota // ext whatever the operands
	vexIntWidth                // integer SSE made VEX: AVX at 128 bits, AVX2 with a ymm operand
	vexBcastReg                // vbroadcastss/sd: AVX from memory, AVX2 from a register
	vexWideAs                  // ext at 128 bits, ext256 with a ymm operand (VAES, VPCLMULQDQ)
	vexKMask                   // opmask instruction: AVX-512 subset by its element width
)

// form is what one encoding of a mnemonic needs.
type form struct {
	ok     bool
	ext    Ext
	rule   vexRule
	ext256 Ext  // vexWideAs at 256 bits
	scalar bool // EVEX: one element or fixed 128 bits, so no AVX512VL
}

// oracleEntry is one mnemonic's forms, by encoding.
type oracleEntry struct{ legacy, vex, evex, xop form }

// extTable maps every mnemonic the oracle knows (after canonicalName) to its forms. A
// mnemonic objdump prints that is not here, or not in the encoding it appears in, is
// reported: the oracle never passes an instruction it cannot read.
var extTable = map[string]*oracleEntry{}

func entry(mn string) *oracleEntry {
	e := extTable[mn]
	if e == nil {
		e = &oracleEntry{}
		extTable[mn] = e
	}
	return e
}

// expand turns "vadd{ps,pd,ss,sd} vsub{ps,pd}" into each name; braces may repeat
// ("vfmadd{132,213,231}{ps,pd}") but not nest.
func expand(list string) []string {
	var out []string
	for _, w := range strings.Fields(list) {
		names := []string{""}
		for w != "" {
			i := strings.IndexByte(w, '{')
			if i < 0 {
				for k := range names {
					names[k] += w
				}
				break
			}
			j := strings.IndexByte(w, '}')
			if k := strings.IndexByte(w[i+1:], '{'); k >= 0 && i+1+k < j {
				panic("expand: nested braces in " + w)
			}
			var next []string
			for _, n := range names {
				for _, alt := range strings.Split(w[i+1:j], ",") {
					next = append(next, n+w[:i]+alt)
				}
			}
			names, w = next, w[j+1:]
		}
		out = append(out, names...)
	}
	return out
}

// set records one form; a mnemonic listed twice for one encoding is a mistake in the
// table, which would otherwise keep whichever came last.
func set(f *form, mn string, v form) {
	if f.ok {
		panic("extTable: " + mn + " is listed twice for one encoding")
	}
	*f = v
}

func legacy(e Ext, list string) {
	for _, mn := range expand(list) {
		set(&entry(mn).legacy, mn, form{ok: true, ext: e})
	}
}

func vex(e Ext, rule vexRule, list string) {
	for _, mn := range expand(list) {
		set(&entry(mn).vex, mn, form{ok: true, ext: e, rule: rule})
	}
}

func vexWide(e128, e256 Ext, list string) {
	for _, mn := range expand(list) {
		set(&entry(mn).vex, mn, form{ok: true, ext: e128, rule: vexWideAs, ext256: e256})
	}
}

// evex records EVEX forms: AVX512F plus e, and AVX512VL below 512 bits.
func evex(e Ext, list string) {
	for _, mn := range expand(list) {
		set(&entry(mn).evex, mn, form{ok: true, ext: AVX512F | e})
	}
}

// evexScalarOnly marks EVEX mnemonics that work on one element, a general register or a
// fixed 128 bits: they need no AVX512VL with xmm operands.
func evexScalarOnly(list string) {
	for _, mn := range expand(list) {
		e := extTable[mn]
		if e == nil || !e.evex.ok {
			panic("evexScalarOnly: " + mn + " has no EVEX form")
		}
		e.evex.scalar = true
	}
}

const fp = "{ps,pd,ss,sd}"

func init() {
	// x86-64 baseline: integer, x87, system, MMX, SSE and SSE2. AT&T size suffixes (b, w,
	// l, q; s, l, t, ll on x87) are stripped before lookup where the bare name is here.
	legacy(0, `adc add and bsf bsr bswap bt btc btr bts call cbtw cwtl cltq cwtd cltd cqto clc cld cmc
		cmov{o,no,b,ae,e,ne,be,a,s,ns,p,np,l,ge,le,g} cmp cmps cmpxchg cmpxchg8b cpuid dec div enter hlt
		idiv imul inc int int3 j{o,no,b,ae,e,ne,be,a,s,ns,p,np,l,ge,le,g} jmp jrcxz jecxz lahf lea leave
		lods loop loope loopne mov movabs movs movs{bw,bl,bq,wl,wq,lq} movz{bw,bl,bq,wl,wq} mul neg
		nop not or pause pop popf push pushf rcl rcr rdtsc ret rol ror sahf sar sbb scas
		set{o,no,b,ae,e,ne,be,a,s,ns,p,np,l,ge,le,g} shl shld shr shrd stc std stos sub syscall test
		tzcnt ud0 ud1 ud2 xadd xchg xor endbr64 endbr32 rdpmc sfence lfence mfence clflush
		prefetcht0 prefetcht1 prefetcht2 prefetchnta prefetch prefetchw ldmxcsr stmxcsr fxsave fxrstor
		fxsave64 fxrstor64 emms`)
	// System and I/O instructions, which fault in user code whatever the CPU, and MPX's bnd*,
	// which run as no-ops without MPX: data in code often decodes as them.
	legacy(0, `cli sti clts in ins out outs int1 into invd wbinvd iret iretw iretq lar lsl lcall ljmp lret lretw
		lretq lds les lfs lgs lss movsxd rdmsr wrmsr xlat bndldx bndstx bndmov bndcl bndcu bndcn bndmk
		vmread vmwrite vmcall vmlaunch vmresume vmxoff`)
	legacy(0, `f2xm1 fabs fadd faddp fbld fbstp fchs fclex fnclex fcmov{b,e,be,u,nb,ne,nbe,nu} fcom fcomp fcompp fcomi fcomip
		fcos fdecstp fdiv fdivp fdivr fdivrp ffree fiadd ficom ficomp fidiv fidivr fild fildll fimul fincstp
		finit fninit fist fistp fistpll fisub fisubr fld fld1 fldcw fldenv fldl2e fldl2t fldlg2 fldln2 fldpi
		fldz fmul fmulp fnop fpatan fprem fprem1 fptan frndint frstor fsave fnsave fscale fsin fsincos fsqrt
		fst fstcw fnstcw fstenv fnstenv fstp fstsw fnstsw fsub fsubp fsubr fsubrp ftst fucom fucomp fucompp
		fucomi fucomip fwait wait fxam fxch fxtract fyl2x fyl2xp1 ffreep fndisi(8087 fneni(8087 frstpm(287`)
	legacy(0, `add`+fp+` sub`+fp+` mul`+fp+` div`+fp+` max`+fp+` min`+fp+` sqrt`+fp+` rcp{ps,ss} rsqrt{ps,ss}
		and{ps,pd} andn{ps,pd} or{ps,pd} xor{ps,pd} cmp`+fp+` comis{s,d} ucomis{s,d} shuf{ps,pd}
		unpck{l,h}{ps,pd} mov{aps,apd,ups,upd,ss,sd,lps,lpd,hps,hpd,hlps,lhps,d,q,dqa,dqu,dq2q,q2dq}
		movmsk{ps,pd} movnt{ps,pd,dq,i}
		maskmovq maskmovdqu
		cvt{dq2ps,dq2pd,ps2dq,pd2dq,ps2pd,pd2ps,ss2sd,sd2ss,si2ss,si2sd,ss2si,sd2si,pi2ps,pi2pd,ps2pi,pd2pi}
		cvtt{ps2dq,pd2dq,ss2si,sd2si,ps2pi,pd2pi}
		padd{b,w,d,q,sb,sw,usb,usw} psub{b,w,d,q,sb,sw,usb,usw} pmaddwd pmulhw pmulhuw pmullw pmuludq
		pand pandn por pxor pcmpeq{b,w,d} pcmpgt{b,w,d} pack{sswb,ssdw,uswb} punpck{l,h}{bw,wd,dq,qdq}
		psll{w,d,q,dq} psrl{w,d,q,dq} psra{w,d} pshuf{d,hw,lw,w} pextrw pinsrw pmovmskb pmaxub pmaxsw pminub
		pminsw pavgb pavgw psadbw`)
	legacy(SSE3, `addsub{ps,pd} hadd{ps,pd} hsub{ps,pd} lddqu movddup movshdup movsldup fisttp fisttpll`)
	legacy(SSSE3, `pabs{b,w,d} palignr phadd{w,d,sw} phsub{w,d,sw} pmaddubsw pmulhrsw pshufb psign{b,w,d}`)
	legacy(SSE41, `blend{ps,pd} blendv{ps,pd} dp{ps,pd} extractps insertps movntdqa mpsadbw packusdw pblendvb
		pblendw pcmpeqq pextr{b,d,q} phminposuw pinsr{b,d,q} pmax{sb,sd,ud,uw} pmin{sb,sd,ud,uw}
		pmovsx{bw,bd,bq,wd,wq,dq} pmovzx{bw,bd,bq,wd,wq,dq} pmuldq pmulld ptest round`+fp)
	legacy(SSE42, `crc32 pcmp{e,i}str{i,m} pcmpgtq`)
	legacy(POPCNT, `popcnt`)
	legacy(LZCNT, `lzcnt`)
	legacy(MOVBE, `movbe`)
	legacy(CX16, `cmpxchg16b`)
	legacy(RDRAND, `rdrand`)
	legacy(RDSEED, `rdseed`)
	legacy(RTM, `xbegin xend xabort xtest`)
	legacy(XSAVE, `xsave xsave64 xrstor xrstor64 xgetbv xsetbv`)
	legacy(XSAVEOPT, `xsaveopt xsaveopt64`)
	legacy(XSAVEC, `xsavec xsavec64`)
	legacy(XSAVES, `xsaves xsaves64 xrstors xrstors64`)
	legacy(PKU, `rdpkru wrpkru`)
	legacy(RDTSCP, `rdtscp`)
	legacy(RDPID, `rdpid`)
	legacy(CLWB, `clwb`)
	legacy(CLFLUSHOPT, `clflushopt`)
	legacy(ADX, `adcx adox`)
	legacy(SHA, `sha1rnds4 sha1nexte sha1msg1 sha1msg2 sha256rnds2 sha256msg1 sha256msg2`)
	legacy(AES, `aes{enc,enclast,dec,declast,imc,keygenassist}`)
	legacy(PCLMUL, `pclmulqdq`)
	legacy(GFNI, `gf2p8{affineqb,affineinvqb,mulb}`)
	legacy(SSE4A, `extrq insertq movntss movntsd`)
	// VIA PadLock has no host feature: the decoder marks it so that the verdict is unknown.
	legacy(Unclassified, `xstore xstore-rng xcrypt-{ecb,cbc,ctr,cfb,ofb} xsha1 xsha256 montmul`)
	// So have FSGSBASE, PTWRITE, WAITPKG, SERIALIZE, TSXLDTRK and UINTR.
	legacy(Unclassified, `rdfsbase rdgsbase wrfsbase wrgsbase ptwrite tpause umonitor umwait serialize
		xsusldtrk xresldtrk senduipi`)
	legacy(ThreeDNow, `femms pavgusb pf2id pf2iw pfacc pfadd pfcmp{eq,ge,gt} pfmax pfmin pfmul pfnacc pfpnacc
		pfrcp pfrcpit1 pfrcpit2 pfrsqit1 pfrsqrt pfsub pfsubr pi2fd pi2fw pmulhrw pswapd`)

	// VEX: AVX on any width.
	vex(AVX, vexFixed, `vadd`+fp+` vsub`+fp+` vmul`+fp+` vdiv`+fp+` vmax`+fp+` vmin`+fp+` vsqrt`+fp+`
		vrcp{ps,ss} vrsqrt{ps,ss} vand{ps,pd} vandn{ps,pd} vor{ps,pd} vxor{ps,pd} vaddsub{ps,pd} vhadd{ps,pd}
		vhsub{ps,pd} vdp{ps,pd} vblend{ps,pd} vblendv{ps,pd} vround`+fp+` vcmp`+fp+` vcomis{s,d} vucomis{s,d}
		vshuf{ps,pd} vunpck{l,h}{ps,pd} vmov{aps,apd,ups,upd,ss,sd,lps,lpd,hps,hpd,hlps,lhps,ddup,shdup,sldup,dqa,dqu,d,q}
		vmovmsk{ps,pd} vmovnt{ps,pd,dq} vlddqu vmaskmovdqu
		vcvt{dq2ps,dq2pd,ps2dq,pd2dq,ps2pd,pd2ps,si2ss,si2sd,ss2si,sd2si,ss2sd,sd2ss} vcvtt{ps2dq,pd2dq,ss2si,sd2si}
		vbroadcastf128 vinsertf128 vextractf128 vperm2f128 vpermil{ps,pd} vmaskmov{ps,pd} vtest{ps,pd} vptest
		vzeroupper vzeroall vldmxcsr vstmxcsr vextractps vinsertps vpextr{b,w,d,q} vpinsr{b,w,d,q}
		vpcmp{e,i}str{i,m} vphminposuw`)
	vex(AVX, vexIntWidth, `vpabs{b,w,d} vpack{sswb,ssdw,uswb,usdw} vpadd{b,w,d,q,sb,sw,usb,usw} vpalignr vpand vpandn
		vpavg{b,w} vpblendvb vpblendw vpcmpeq{b,w,d,q} vpcmpgt{b,w,d,q} vphadd{w,d,sw} vphsub{w,d,sw} vpmaddubsw
		vpmaddwd vpmax{sb,sw,sd,ub,uw,ud} vpmin{sb,sw,sd,ub,uw,ud} vpmovmskb vpmovsx{bw,bd,bq,wd,wq,dq}
		vpmovzx{bw,bd,bq,wd,wq,dq} vpmuldq vpmulhrsw vpmulhuw vpmulhw vpmulld vpmullw vpmuludq vpor vpsadbw
		vpshufb vpshufd vpshufhw vpshuflw vpsign{b,w,d} vpsll{w,d,q,dq} vpsra{w,d} vpsrl{w,d,q,dq}
		vpsub{b,w,d,q,sb,sw,usb,usw} vpunpck{l,h}{bw,wd,dq,qdq} vpxor vmpsadbw vmovntdqa`)
	vex(AVX2, vexFixed, `vpbroadcast{b,w,d,q} vbroadcasti128 vinserti128 vextracti128 vperm2i128 vperm{q,d,ps,pd}
		vpblendd vpsllv{d,q} vpsrlv{d,q} vpsravd vpmaskmov{d,q} vgather{d,q}{ps,pd} vpgather{d,q}{d,q}`)
	vex(AVX, vexBcastReg, `vbroadcastss vbroadcastsd`)
	vex(FMA, vexFixed, `vf{,n}madd{132,213,231}`+fp+` vf{,n}msub{132,213,231}`+fp+` vfmaddsub{132,213,231}{ps,pd}
		vfmsubadd{132,213,231}{ps,pd}`)
	vex(XOP, vexFixed, `vpermil2{ps,pd}`)
	vex(FMA4, vexFixed, `vf{,n}madd`+fp+` vf{,n}msub`+fp+` vfmaddsub{ps,pd} vfmsubadd{ps,pd}`)
	vex(F16C, vexFixed, `vcvtph2ps vcvtps2ph`)
	vex(BMI1, vexFixed, `andn bextr blsi blsmsk blsr`)
	vex(BMI2, vexFixed, `bzhi mulx pdep pext rorx sarx shlx shrx`)
	vex(AVXVNNI, vexFixed, `vpdpbusd vpdpbusds vpdpwssd vpdpwssds`)
	vex(AVXVNNIINT8, vexFixed, `vpdpb{ss,su,uu}d{,s}`)
	vex(AVXVNNIINT16, vexFixed, `vpdpw{su,us,uu}d{,s}`)
	vex(AVXIFMA, vexFixed, `vpmadd52{l,h}uq`)
	vex(AVXNECONVERT, vexFixed, `vbcstnebf162ps vbcstnesh2ps vcvtnee{bf16,ph}2ps vcvtneo{bf16,ph}2ps vcvtneps2bf16`)
	vex(AMXTile, vexFixed, `ldtilecfg sttilecfg tilerelease tilezero tileloadd tileloaddt1 tilestored`)
	vex(AMXTile|AMXInt8, vexFixed, `tdpb{ss,su,us,uu}d`)
	vex(AMXTile|AMXBF16, vexFixed, `tdpbf16ps`)
	vex(AMXTile|AMXFP16, vexFixed, `tdpfp16ps`)
	vex(AVX|AES, vexFixed, `vaesimc vaeskeygenassist`)
	vexWide(AVX|AES, AVX|VAES, `vaes{enc,enclast,dec,declast}`)
	vexWide(AVX|PCLMUL, AVX|VPCLMUL, `vpclmulqdq`)
	vex(AVX|GFNI, vexFixed, `vgf2p8{affineqb,affineinvqb,mulb}`)
	vex(0, vexKMask, `k{and,andn,or,xor,xnor,not,mov,ortest,test,add,shiftl,shiftr}{b,w,d,q} kunpck{bw,wd,dq}`)

	// EVEX: AVX512F and the subset the mnemonic names; AVX512VL is added by vector length.
	evex(0, `vadd`+fp+` vsub`+fp+` vmul`+fp+` vdiv`+fp+` vmax`+fp+` vmin`+fp+` vsqrt`+fp+` vcmp`+fp+`
		vcomis{s,d} vucomis{s,d} vshuf{ps,pd} vunpck{l,h}{ps,pd}
		vmov{aps,apd,ups,upd,ss,sd,lps,lpd,hps,hpd,hlps,lhps,ddup,shdup,sldup,d,q,ntps,ntpd,ntdq,ntdqa}
		vmovdq{a,u}{32,64}
		vcvt{dq2ps,dq2pd,ps2dq,pd2dq,ps2pd,pd2ps,si2ss,si2sd,usi2ss,usi2sd,ss2si,sd2si,ss2usi,sd2usi,ss2sd,sd2ss}
		vcvt{udq2ps,udq2pd,ps2udq,pd2udq,ph2ps,ps2ph} vcvtt{ps2dq,pd2dq,ss2si,sd2si,ss2usi,sd2usi,ps2udq,pd2udq}
		valign{d,q} vblendm{ps,pd} vpblendm{d,q} vbroadcast{ss,sd,f32x4,f64x4,i32x4,i64x4} vpbroadcast{d,q}
		v{extract,insert}{f32x4,f64x4,i32x4,i64x4} vextractps vinsertps
		vf{,n}madd{132,213,231}`+fp+` vf{,n}msub{132,213,231}`+fp+` vfmaddsub{132,213,231}{ps,pd}
		vfmsubadd{132,213,231}{ps,pd}
		vpadd{d,q} vpsub{d,q} vpmulld vpmuludq vpmuldq vpand{d,q} vpandn{d,q} vpor{d,q} vpxor{d,q} vpternlog{d,q}
		vpcmp{d,ud,q,uq} vpcmpeq{d,q} vpcmpgt{d,q} vptestm{d,q} vptestnm{d,q}
		vperm{d,q,ps,pd} vpermil{ps,pd} vpermi2{d,q,ps,pd} vpermt2{d,q,ps,pd} vpshufd
		vpsll{d,q} vpsra{d,q} vpsrl{d,q} vpsllv{d,q} vpsrav{d,q} vpsrlv{d,q} vpro{l,r}{d,q} vpro{l,r}v{d,q}
		vpmax{sd,sq,ud,uq} vpmin{sd,sq,ud,uq} vpabs{d,q}
		vpmovsx{bd,bq,wd,wq,dq} vpmovzx{bd,bq,wd,wq,dq} vpmov{,s,us}{db,dw,qb,qw,qd}
		vpunpck{l,h}{dq,qdq} vrndscale`+fp+` vscalef`+fp+` vgetexp`+fp+` vgetmant`+fp+` vrcp14`+fp+`
		vrsqrt14`+fp+` vfixupimm`+fp+` vcompress{ps,pd} vexpand{ps,pd} vpcompress{d,q} vpexpand{d,q}
		vshuf{f,i}{32x4,64x2} vgather{d,q}{ps,pd} vpgather{d,q}{d,q} vscatter{d,q}{ps,pd} vpscatter{d,q}{d,q}`)
	evex(AVX512BW, `vpadd{b,w,sb,sw,usb,usw} vpsub{b,w,sb,sw,usb,usw} vpmaddubsw vpmaddwd vpshufb vpshufhw vpshuflw
		vpack{sswb,ssdw,uswb,usdw} vpunpck{l,h}{bw,wd} vpcmp{b,ub,w,uw} vpcmpeq{b,w} vpcmpgt{b,w}
		vpmov{b,w}2m vpmovm2{b,w} vmovdqu{8,16} vpsllw vpsrlw vpsraw vpsllvw vpsrlvw vpsravw vpslldq vpsrldq
		vpmullw vpmulhw vpmulhuw vpmulhrsw vpavg{b,w} vpmin{ub,uw,sb,sw} vpmax{ub,uw,sb,sw} vpabs{b,w} vpalignr
		vdbpsadbw vpsadbw vpbroadcast{b,w} vpermw vpermi2w vpermt2w vpblendm{b,w} vptestm{b,w} vptestnm{b,w}
		vpextr{b,w} vpinsr{b,w} vpmov{,s,us}wb vpmovzxbw vpmovsxbw`)
	evex(AVX512DQ, `vand{ps,pd} vandn{ps,pd} vor{ps,pd} vxor{ps,pd} vpmullq vcvt{,u}qq2{ps,pd} vcvt{ps,pd}2{,u}qq
		vcvtt{ps,pd}2{,u}qq v{extract,insert}{i64x2,f64x2,i32x8,f32x8} vpmov{d,q}2m vpmovm2{d,q} vpextr{d,q}
		vpinsr{d,q} vbroadcast{i32x2,i64x2,i32x8,f32x2,f64x2,f32x8} vfpclass`+fp+` vrange`+fp+` vreduce`+fp)
	evex(AVX512CD, `vpconflict{d,q} vplzcnt{d,q} vpbroadcastmb2q vpbroadcastmw2d`)
	evex(AVX512VBMI, `vpermb vpermi2b vpermt2b vpmultishiftqb`)
	evex(AVX512VBMI2, `vpcompress{b,w} vpexpand{b,w} vpsh{l,r}d{w,d,q} vpsh{l,r}dv{w,d,q}`)
	evex(AVX512VNNI, `vpdpbusd vpdpbusds vpdpwssd vpdpwssds`)
	evex(AVX512BF16, `vdpbf16ps vcvtne2ps2bf16 vcvtneps2bf16`)
	evex(AVX512IFMA, `vpmadd52{l,h}uq`)
	evex(AVX512VPOPCNTDQ, `vpopcnt{d,q}`)
	evex(AVX512BITALG, `vpopcnt{b,w} vpshufbitqmb`)
	evex(AVX512VP2INTERSECT, `vp2intersect{d,q}`)
	evex(GFNI, `vgf2p8{affineqb,affineinvqb,mulb}`)
	evex(VAES, `vaes{enc,enclast,dec,declast}`)
	evex(VPCLMUL, `vpclmulqdq`)
	// Xeon Phi's AVX512ER, AVX512PF and 4FMAPS have no host feature: the decoder marks them
	// so that the verdict is unknown.
	evex(Unclassified, `vexp2{ps,pd} vrcp28{ps,pd,ss,sd} vrsqrt28{ps,pd,ss,sd} vgatherpf{0,1}{d,q}{ps,pd}
		vscatterpf{0,1}{d,q}{ps,pd} v4f{,n}madd{ps,ss}`)
	// So have the EVEX forms of VNNI-INT8 and VNNI-INT16, which came with AVX10.2.
	evex(Unclassified, `vpdpb{ss,su,uu}d{,s} vpdpw{su,us,uu}d{,s}`)
	// FP16's conversions whose names end in x, which is not a size suffix here.
	evex(AVX512FP16, `vcvtph2psx vcvtps2phx`)
	evexScalarOnly(`vaddss vaddsd vsubss vsubsd vmulss vmulsd vdivss vdivsd vmaxss vmaxsd vminss vminsd vsqrtss
		vsqrtsd vcmpss vcmpsd vcomis{s,d} vucomis{s,d} vmov{ss,sd,d,q,lps,lpd,hps,hpd,hlps,lhps}
		vcvt{si2ss,si2sd,usi2ss,usi2sd,ss2si,sd2si,ss2usi,sd2usi,ss2sd,sd2ss} vcvtt{ss2si,sd2si,ss2usi,sd2usi}
		vextractps vinsertps vf{,n}madd{132,213,231}{ss,sd} vf{,n}msub{132,213,231}{ss,sd}
		vrndscale{ss,sd} vscalef{ss,sd} vgetexp{ss,sd} vgetmant{ss,sd} vrcp14{ss,sd} vrsqrt14{ss,sd}
		vfixupimm{ss,sd} vpextr{b,w,d,q} vpinsr{b,w,d,q} vfpclass{ss,sd} vrange{ss,sd} vreduce{ss,sd}
		vrcp28{ss,sd} vrsqrt28{ss,sd} v4f{,n}maddss`)

	// XOP: AMD's 8F-prefixed integer and fraction instructions.
	for _, mn := range expand(`vpcmov vpperm vprot{b,w,d,q} vpsha{b,w,d,q} vpshl{b,w,d,q} vpcom{b,w,d,q,ub,uw,ud,uq}
		vpmacs{sww,swd,sdd,sdql,sdqh,ww,wd,dd,dql,dqh} vpmadcs{,s}wd vphadd{bw,bd,bq,wd,wq,dq,ubw,ubd,ubq,uwd,uwq,udq}
		vphsub{bw,wd,dq} vfrcz` + fp) {
		set(&entry(mn).xop, mn, form{ok: true, ext: XOP})
	}
}

var (
	// cmpPred matches SSE/AVX compares with objdump's predicate pseudo-ops (cmpltss,
	// vcmpgt_oqps, vcmpnle_uqpd) and the integer ones AVX-512 and XOP add (vpcmpnequb,
	// vpcomltb).
	cmpPred  = regexp.MustCompile(`^(v?cmp)(eq|lt|le|unord|neq|nlt|nle|ord|nge|ngt|false|ge|gt|true)(_[a-z]+)?(ps|pd|ss|sd|ph|sh)$`)
	vpcmpPrd = regexp.MustCompile(`^(vpcmp|vpcom)(false|true|neq|nlt|nle|eq|lt|le|ge|gt)(u?[bwdq])$`)
	clmulPrd = regexp.MustCompile(`^(v?pclmul)[lh]q[lh]qdq$`)
)

// canonicalName folds the pseudo-op spellings of predicates into the base mnemonic.
func canonicalName(mn string, enc Encoding) string {
	// The prefix tests keep the regular expressions off the two million other lines.
	if strings.HasPrefix(mn, "cmp") || strings.HasPrefix(mn, "vcmp") {
		if m := cmpPred.FindStringSubmatch(mn); m != nil {
			return m[1] + m[4]
		}
	}
	// vpcmpeqb and vpcmpgtb are instructions of their own in VEX form; in EVEX form they
	// share what they need with vpcmpb, so folding them is exact.
	if enc != VEX && (strings.HasPrefix(mn, "vpcmp") || strings.HasPrefix(mn, "vpcom")) {
		if m := vpcmpPrd.FindStringSubmatch(mn); m != nil && !(m[1] == "vpcmp" && m[2] == "gt") {
			return m[1] + m[3]
		}
	}
	if strings.Contains(mn, "pclmul") {
		if m := clmulPrd.FindStringSubmatch(mn); m != nil {
			return m[1] + "qdq"
		}
	}
	return mn
}

// lookupForm finds the mnemonic's form in enc, stripping one AT&T size suffix where the
// full name is not in the table.
func lookupForm(mn, ops string, enc Encoding) (form, string, bool) {
	pick := func(e *oracleEntry) form {
		switch enc {
		case VEX:
			return e.vex
		case EVEX:
			return e.evex
		case XOPEnc:
			return e.xop
		}
		return e.legacy
	}
	mn = canonicalName(mn, enc)
	if e := extTable[mn]; e != nil && pick(e).ok {
		return pick(e), mn, true
	}
	suffixes := []string{"b", "w", "l", "q", "s", "t", "ll"}
	if enc != Legacy {
		suffixes = []string{"l", "q"}
		// objdump adds x, y or z only where a memory operand leaves the vector length open;
		// elsewhere the letter is part of the name (vcvtph2psx).
		if strings.Contains(ops, "(") {
			suffixes = append(suffixes, "x", "y", "z")
		}
	}
	for _, s := range suffixes {
		if base, ok := strings.CutSuffix(mn, s); ok {
			if e := extTable[base]; e != nil && pick(e).ok {
				return pick(e), base, true
			}
		}
	}
	return form{}, mn, false
}

// objdumpExt reads what the instruction needs off objdump's line. name is the mnemonic
// with its encoding, for reporting; ok is false when the table does not know the mnemonic
// in that encoding, err says where the operands do not tell.
func objdumpExt(o objdumpInst) (e Ext, name string, ok bool, err error) {
	enc := encOf(o.bytes)
	mn, ops := splitInst(o.text)
	f, base, ok := lookupForm(mn, ops, enc)
	name = base + " (" + enc.String() + ")"
	if !ok {
		return 0, name, false, nil
	}
	ymm := strings.Contains(ops, "%ymm")
	switch enc {
	case VEX:
		switch f.rule {
		case vexIntWidth:
			if ymm {
				return AVX2, name, true, nil
			}
			return AVX, name, true, nil
		case vexBcastReg:
			if strings.Contains(ops, "(") {
				return AVX, name, true, nil
			}
			return AVX2, name, true, nil
		case vexWideAs:
			if ymm {
				return f.ext256, name, true, nil
			}
			return f.ext, name, true, nil
		case vexKMask:
			return kmaskExt(base), name, true, nil
		}
		return f.ext, name, true, nil
	case EVEX:
		vl, err := evexVL(base, mn, ops, f.scalar)
		if err != nil {
			return 0, name, true, err
		}
		if vl {
			return f.ext | AVX512VL, name, true, nil
		}
		return f.ext, name, true, nil
	}
	// pextrw to memory exists only as SSE4.1's 66 0F 3A 15; to a register it is SSE2's
	// 66 0F C5 as assemblers encode it.
	if base == "pextrw" && strings.Contains(ops, "(") {
		return SSE41, name, true, nil
	}
	return f.ext, name, true, nil
}

// kmaskExt is what an opmask instruction needs by its element width: byte forms AVX512DQ,
// word forms AVX512F, dword and qword forms AVX512BW; ktestw and kaddw came with DQ, and
// kunpckbw (which builds a word) is F.
func kmaskExt(mn string) Ext {
	switch {
	case mn == "kunpckbw":
		return AVX512F
	case strings.HasPrefix(mn, "kunpck"):
		return AVX512F | AVX512BW
	case mn == "ktestw" || mn == "kaddw":
		return AVX512F | AVX512DQ
	}
	switch mn[len(mn)-1] {
	case 'b':
		return AVX512F | AVX512DQ
	case 'w':
		return AVX512F
	}
	return AVX512F | AVX512BW
}

// halving are the EVEX conversions whose result is half as wide as their source.
var (
	halving = map[string]bool{}
	ymmDest = regexp.MustCompile(`,%ymm[0-9]+(\{[^}]*\})*$`)
)

func init() {
	for _, mn := range expand(`vcvt{pd2dq,pd2ps,pd2udq,qq2ps,uqq2ps,ps2ph,ps2phx,neps2bf16} vcvtt{pd2dq,pd2udq}`) {
		halving[mn] = true
	}
}

// evexVL says whether an EVEX instruction works on 128- or 256-bit vectors (so needs
// AVX512VL): xmm or ymm operands and no zmm, no rounding or SAE control, and not a scalar
// instruction. With only memory operands objdump's x/y/z suffix tells.
func evexVL(base, mn, ops string, scalar bool) (bool, error) {
	switch {
	case scalar || strings.Contains(ops, "%zmm") || strings.Contains(ops, "sae}"):
		return false, nil
	case halving[base] && ymmDest.MatchString(ops) && strings.Contains(ops, "("):
		// A conversion to half the width into a ymm register reads 512 bits from memory.
		return false, nil
	case strings.Contains(ops, "%xmm") || strings.Contains(ops, "%ymm"):
		return true, nil
	}
	switch mn[len(mn)-1] {
	case 'x', 'y':
		return true, nil
	case 'z':
		return false, nil
	}
	return false, fmt.Errorf("no vector register and no size suffix: the vector length is not shown")
}

// TestObjdumpExtReadsText checks the oracle's own reading on lines whose spelling it has to
// undo: predicate pseudo-ops, branch hints, suffixes, and operand-dependent forms.
func TestObjdumpExtReadsText(t *testing.T) {
	for _, c := range []struct {
		hex, text string
		want      Ext
	}{
		{"62f37d0a3fc900", "vpcmpnequb %xmm1,%xmm0,%k1{%k2}", AVX512F | AVX512BW | AVX512VL},
		{"62f3754a3fc804", "vpcmpneqb %zmm0,%zmm1,%k1{%k2}", AVX512F | AVX512BW},
		{"c5f574d0", "vpcmpeqb %ymm0,%ymm1,%ymm2", AVX2},
		{"c4e27d18c8", "vbroadcastss %xmm0,%ymm1", AVX2},
		{"c4e27d1808", "vbroadcastss (%rax),%ymm1", AVX},
		{"c5f990d1", "kmovb %k1,%k2", AVX512F | AVX512DQ},
		{"c5f8c2c806", "vcmpnleps %xmm0,%xmm0,%xmm1", AVX},
		{"f30fc2c806", "cmpnless %xmm0,%xmm1", 0},
		{"3e75fe", "jne,pt 1000 <f+0x10>", 0},
		{"660f3a150001", "pextrw $0x1,%xmm0,(%rax)", SSE41},
		{"62f15f087b458c", "vcvtusi2sdl -0x74(%rbp),%xmm4,%xmm0", AVX512F},
		{"dd08", "fisttpll (%rax)", SSE3},
		{"62f1ff48e601", "vcvtpd2dq (%rcx),%ymm0", AVX512F},
		{"62f1ff28e601", "vcvtpd2dqy (%rcx),%xmm0", AVX512F | AVX512VL},
		{"62f67d2813f9", "vcvtph2psx %xmm1,%ymm7", AVX512F | AVX512VL | AVX512FP16},
	} {
		b, _ := hex.DecodeString(c.hex)
		got, name, ok, err := objdumpExt(objdumpInst{bytes: b, text: c.text})
		if !ok || err != nil || got != c.want {
			t.Errorf("objdumpExt(%q) = %v (%s, known %v, %v), want %v", c.text, got, name, ok, err, c.want)
		}
	}
}
