package x86

import (
	"encoding/hex"
	"testing"
)

// The encodings below were produced with GNU as and checked against objdump.
var decodeCases = []struct {
	asm  string
	hex  string
	want Ext
}{
	{"vpaddd %ymm0,%ymm1,%ymm2", "c5f5fed0", AVX2},
	{"vpaddd %xmm0,%xmm1,%xmm2", "c5f1fed0", AVX},
	{"vaddps %ymm0,%ymm1,%ymm2", "c5f458d0", AVX},
	{"vmovdqu (%rax),%ymm0", "c5fe6f00", AVX},
	{"vpbroadcastd %xmm0,%ymm1", "c4e27d58c8", AVX2},
	{"vbroadcastss (%rax),%ymm1", "c4e27d1808", AVX},
	{"vbroadcastss %xmm0,%ymm1", "c4e27d18c8", AVX2},
	{"vinserti128 $1,%xmm1,%ymm0,%ymm0", "c4e37d38c101", AVX2},
	{"vinsertf128 $1,%xmm1,%ymm0,%ymm0", "c4e37d18c101", AVX},
	{"vperm2i128 $0x20,%ymm1,%ymm0,%ymm0", "c4e37d46c120", AVX2},
	{"vpgatherdd %ymm2,(%rax,%ymm1,4),%ymm0", "c4e26d900488", AVX2},
	{"vfmadd231ps %ymm0,%ymm1,%ymm2", "c4e275b8d0", FMA},
	{"vcvtph2ps %xmm0,%ymm1", "c4e27d13c8", F16C},
	{"vcvtps2ph $0,%ymm1,%xmm0", "c4e37d1dc800", F16C},
	{"andn %rax,%rbx,%rcx", "c4e2e0f2c8", BMI1},
	{"shlx %rax,%rbx,%rcx", "c4e2f9f7cb", BMI2},
	{"rorx $3,%rax,%rbx", "c4e3fbf0d803", BMI2},
	{"pdep %rax,%rbx,%rcx", "c4e2e3f5c8", BMI2},
	{"{vex} vpdpbusd %ymm0,%ymm1,%ymm2", "c4e27550d0", AVXVNNI},
	{"tdpbssd %tmm0,%tmm1,%tmm2", "c4e27b5ed1", AMXTile | AMXInt8},
	{"tdpbf16ps %tmm0,%tmm1,%tmm2", "c4e27a5cd1", AMXTile | AMXBF16},
	{"ldtilecfg (%rax)", "c4e2784900", AMXTile},
	{"tilerelease", "c4e27849c0", AMXTile},
	{"tileloadd (%rax,%rbx,1),%tmm0", "c4e27b4b0418", AMXTile},
	{"vpaddd %zmm0,%zmm1,%zmm2", "62f17548fed0", AVX512F},
	{"vpaddd %ymm16,%ymm1,%ymm2", "62b17528fed0", AVX512F | AVX512VL},
	{"vpaddb %zmm0,%zmm1,%zmm2", "62f17548fcd0", AVX512F | AVX512BW},
	{"vpdpbusd %zmm0,%zmm1,%zmm2", "62f2754850d0", AVX512F | AVX512VNNI},
	{"vdpbf16ps %zmm0,%zmm1,%zmm2", "62f2764852d0", AVX512F | AVX512BF16},
	{"vpermb %zmm0,%zmm1,%zmm2", "62f275488dd0", AVX512F | AVX512VBMI},
	{"vpconflictd %zmm0,%zmm1", "62f27d48c4c8", AVX512F | AVX512CD},
	{"vpmullq %zmm0,%zmm1,%zmm2", "62f2f54840d0", AVX512F | AVX512DQ},
	{"vaddps {rn-sae},%zmm0,%zmm1,%zmm2", "62f1741858d0", AVX512F},
	{"vaddss %xmm16,%xmm1,%xmm2", "62b1760858d0", AVX512F},
	{"kmovw %k1,%k2", "c5f890d1", AVX512F},
	{"kmovb %k1,%k2", "c5f990d1", AVX512F | AVX512DQ},
	{"kmovq %k1,%k2", "c4e1f890d1", AVX512F | AVX512BW},
	{"pshufb %xmm0,%xmm1", "660f3800c8", SSSE3},
	{"pmulld %xmm0,%xmm1", "660f3840c8", SSE41},
	{"crc32 %rax,%rbx", "f2480f38f1d8", SSE42},
	{"popcnt %rax,%rbx", "f3480fb8d8", POPCNT},
	{"lzcnt %rax,%rbx", "f3480fbdd8", LZCNT},
	{"tzcnt %rax,%rbx (runs as bsf without BMI1)", "f3480fbcd8", 0},
	{"movabs $0x1122334455667788,%rax", "48b88877665544332211", 0},
	{"mov $0x11223344,%eax", "b844332211", 0},
	{"mov $0x1122,%ax", "66b82211", 0},
	{"testw $0x1234,(%rax)", "66f7003412", 0},
	{"testl $0x12345678,0x10(%rax,%rbx,4)", "f744981078563412", 0},
	{"enter $0x10,$1", "c8100001", 0},
	{"movabs 0x1122334455667788,%al", "a08877665544332211", 0},
	{"addr32 mov 0x11223344,%al", "67a044332211", 0},
	{"xchg %ax,%ax", "6690", 0},
	{"lock cmpxchg16b (%rdi)", "f0480fc70f", CX16},
	{"lock cmpxchg8b (%rdi)", "f00fc70f", 0},
	// Legacy-encoded extensions, each checked with objdump -D -b binary -mi386:x86-64.
	{"fisttpl (%rax)", "db08", SSE3},
	{"fisttpll (%rax)", "dd08", SSE3},
	{"fisttps (%rax)", "df08", SSE3},
	{"femms", "0f0e", ThreeDNow},
	{"pfadd %mm1,%mm0", "0f0fc19e", ThreeDNow},
	{"rdrand %rax", "480fc7f0", RDRAND},
	{"rdseed %rax", "480fc7f8", RDSEED},
	{"rex.W rdpid %rax", "f3480fc7f8", RDPID},
	{"xbegin 0x6", "c7f800000000", RTM},
	{"xabort $0x1", "c6f801", RTM},
	{"xend", "0f01d5", RTM},
	{"xtest", "0f01d6", RTM},
	{"xsave (%rax)", "0fae20", XSAVE},
	{"xrstor (%rax)", "0fae28", XSAVE},
	{"xsaveopt (%rax)", "0fae30", XSAVEOPT},
	{"xsavec (%rax)", "0fc720", XSAVEC},
	{"xsaves (%rax)", "0fc728", XSAVES},
	{"xrstors (%rax)", "0fc718", XSAVES},
	{"xgetbv", "0f01d0", XSAVE},
	{"rdpkru", "0f01ee", PKU},
	{"wrpkru", "0f01ef", PKU},
	{"rdtscp", "0f01f9", RDTSCP},
	{"extrq $0x8,$0x4,%xmm0", "660f78c00408", SSE4A},
	{"extrq %xmm1,%xmm0", "660f79c1", SSE4A},
	{"insertq $0x8,$0x4,%xmm1,%xmm0", "f20f78c10408", SSE4A},
	{"insertq %xmm1,%xmm0", "f20f79c1", SSE4A},
	{"movntss %xmm0,(%rax)", "f30f2b00", SSE4A},
	{"vmread %rax,%rcx", "0f78c1", 0},
	{"clwb (%rax)", "660fae30", CLWB},
	{"clflushopt (%rax)", "660fae38", CLFLUSHOPT},
	{"clflush (%rax)", "0fae38", 0},
	{"sfence", "0faef8", 0},
	{"movbe (%rax),%eax", "0f38f000", MOVBE},
	{"aesenc %xmm1,%xmm0", "660f38dcc1", AES},
	{"pclmullqlqdq %xmm1,%xmm0", "660f3a44c100", PCLMUL},
	{"sha1rnds4 $0x0,%xmm1,%xmm0", "0f3accc100", SHA},
	{"gf2p8mulb %xmm1,%xmm0", "660f38cfc1", GFNI},
	{"vaesenc %ymm0,%ymm1,%ymm2", "c4e275dcd0", AVX | VAES},
	{"vaesenc %zmm0,%zmm1,%zmm2", "62f27548dcd0", AVX512F | VAES},
	{"cmpbexadd %eax,%ecx,(%rdx)", "c4e279e60a", CMPCCXADD},
	{"movdir64b (%rax),%rax (not in the tables)", "660f38f800", Unclassified},
	{"cs nopw 0x0(%rax,%rax,1)", "2e660f1f0400", 0},
	{"jmp .+0x100", "e9fb000000", 0},
	{"data16 data16 rex.W call (REX.W beats 66)", "666648e83590fcff", 0},
	{"vzeroupper", "c5f877", AVX},
	{"vpshufd $1,%ymm0,%ymm1", "c5fd70c801", AVX2},
	{"vpsrld $3,%ymm0,%ymm1", "c5f572d003", AVX2},
	{"vcmpltps %ymm0,%ymm1,%ymm2", "c5f4c2d001", AVX},
	{"vblendvps %ymm3,%ymm0,%ymm1,%ymm2", "c4e3754ad030", AVX},
	{"vpblendvb %ymm3,%ymm0,%ymm1,%ymm2", "c4e3754cd030", AVX2},
	{"vpmovmskb %ymm0,%eax", "c5fdd7c0", AVX2},
	{"vmovmskps %ymm0,%eax", "c5fc50c0", AVX},
	{"vcvtne2ps2bf16 %zmm0,%zmm1,%zmm2", "62f2774872d0", AVX512F | AVX512BF16},
	{"vcvtneps2bf16 %zmm0,%ymm1", "62f27e4872c8", AVX512F | AVX512BF16},
	{"vaddph %zmm0,%zmm1,%zmm2", "62f5744858d0", AVX512F | AVX512FP16},
	{"vpternlogd $0xff,%zmm0,%zmm1,%zmm2", "62f3754825d0ff", AVX512F},
	{"vextracti32x4 $1,%zmm0,%xmm1", "62f37d4839c101", AVX512F},
	{"vmovdqu8 %zmm0,%zmm1", "62f17f486fc8", AVX512F | AVX512BW},
	// AVX-512 subsets, exactly (objdump -D -b binary -mi386:x86-64 of the same bytes).
	{"kunpckbw %k1,%k2,%k3", "c5ed4bd9", AVX512F},
	{"kunpckwd %k1,%k2,%k3", "c5ec4bd9", AVX512F | AVX512BW},
	{"kunpckdq %k1,%k2,%k3", "c4e1ec4bd9", AVX512F | AVX512BW},
	{"vpackusdw %zmm0,%zmm1,%zmm2", "62f275482bd0", AVX512F | AVX512BW},
	{"vpackusdw %xmm16,%xmm1,%xmm2", "62b275082bd0", AVX512F | AVX512BW | AVX512VL},
	{"vmovlhps %xmm16,%xmm1,%xmm2", "62b1740816d0", AVX512F},
	{"{evex} vmovhps (%rax),%xmm1,%xmm2", "62f1740816" + "10", AVX512F},
	{"vmovhlps %xmm16,%xmm1,%xmm2", "62b1740812d0", AVX512F},
	{"{evex} vmovlpd (%rax),%xmm1,%xmm2", "62f1f5081210", AVX512F},
	{"vmovhps %xmm16,(%rax)", "62e17c081700", AVX512F},
	{"vmovsldup %xmm16,%xmm1", "62b17e0812c8", AVX512F | AVX512VL},
	// VIA PadLock, in libgcrypt: it was counted as baseline.
	{"xstore-rng", "0fa7c0", Unclassified},
	{"repz xcrypt-ecb", "f30fa7c8", Unclassified},
	{"repz xsha256", "f30fa6d0", Unclassified},
	// AVX512ER, AVX512PF and AVX512_4FMAPS (Xeon Phi only; vrcp28pd is in glibc's libmvec):
	// they were counted as AVX512F, so an AVX-512 host without them passed.
	{"vrcp28pd %zmm1,%zmm2", "62f2fd48cad1", AVX512F | Unclassified},
	{"vrcp28ss %xmm1,%xmm2,%xmm3", "62f26d08cbd9", AVX512F | Unclassified},
	{"vexp2ps %zmm1,%zmm2", "62f27d48c8d1", AVX512F | Unclassified},
	{"vrsqrt28ps %zmm1,%zmm2", "62f27d48ccd1", AVX512F | Unclassified},
	{"vgatherpf0dps (%rax,%zmm1,4){%k1}", "62f27d49c60c88", AVX512F | Unclassified},
	{"v4fmaddps (%rax),%zmm4,%zmm1", "62f25f489a08", AVX512F | Unclassified},
}

func TestDecodeLengthAndExtension(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c.asm, func(t *testing.T) {
			code, err := hex.DecodeString(c.hex)
			if err != nil {
				t.Fatal(err)
			}
			// Trailing bytes must not change the result: decoding stops at the instruction's end.
			in, err := Decode(append(code, 0x90, 0x90, 0x90))
			if err != nil {
				t.Fatalf("Decode(%s) error %v", c.hex, err)
			}
			if int(in.Len) != len(code) {
				t.Errorf("Decode(%s).Len = %d, want %d", c.hex, in.Len, len(code))
			}
			if in.Ext != c.want {
				t.Errorf("Decode(%s).Ext = %v (%s), want %v", c.hex, in.Ext, in, c.want)
			}
			// Every proper prefix of the instruction is truncated, never a shorter instruction.
			for n := 0; n < len(code); n++ {
				if in, err := Decode(code[:n]); err == nil {
					t.Errorf("Decode(%x) = length %d, want an error for a truncated instruction", code[:n], in.Len)
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, c := range []struct {
		name, hex string
		want      error
	}{
		{"empty", "", ErrTruncated},
		{"16 prefixes", "66666666666666666666666666666690", ErrTooLong},
		{"aaa is invalid in 64-bit mode", "37", ErrInvalid},
		{"VEX after a REX prefix", "40c5f877", ErrInvalid},
		{"EVEX with a reserved map", "62f07548fed0", ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _ := hex.DecodeString(c.hex)
			if _, err := Decode(code); err != c.want {
				t.Errorf("Decode(%s) error = %v, want %v", c.hex, err, c.want)
			}
		})
	}
}

func TestScanCountsAndSamples(t *testing.T) {
	// vpaddd zmm; garbage byte 0x06; vpaddd ymm (AVX2); vpaddd zmm again.
	code, _ := hex.DecodeString("62f17548fed0" + "06" + "c5f5fed0" + "62f17548fed0")
	var s Stats
	s.Scan(code, 0x1000)
	if s.Insts != 3 || s.Errors != 1 || s.FirstError != 0x1006 {
		t.Errorf("Scan: %d instructions, %d errors at %#x; want 3, 1 at 0x1006", s.Insts, s.Errors, s.FirstError)
	}
	if got := s.CountOf(AVX512F); got != 2 {
		t.Errorf("CountOf(AVX512F) = %d, want 2", got)
	}
	smp := s.SamplesOf(AVX2)
	if len(smp) != 1 || smp[0].Addr != 0x1007 || hex.EncodeToString(smp[0].Code()) != "c5f5fed0" {
		t.Errorf("SamplesOf(AVX2) = %+v, want one at 0x1007 with bytes c5f5fed0", smp)
	}
	if s.Used != AVX512F|AVX2 {
		t.Errorf("Used = %v, want AVX2+AVX512F", s.Used)
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range decodeCases {
		b, _ := hex.DecodeString(c.hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		in, err := Decode(code)
		if err != nil {
			return
		}
		if in.Len == 0 || int(in.Len) > len(code) || in.Len > 15 {
			t.Fatalf("Decode(%x).Len = %d, outside 1..min(15, %d)", code, in.Len, len(code))
		}
		// Decoding the instruction alone gives the same result.
		again, err := Decode(code[:in.Len])
		if err != nil || again != in {
			t.Fatalf("Decode(%x) = %+v, %v; alone %+v, want the same", code, in, err, again)
		}
		_ = in.String()
		var s Stats
		s.Scan(code, 0)
	})
}
