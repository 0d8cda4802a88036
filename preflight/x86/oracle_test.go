package x86

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

// objdumpInst is one line of `objdump -d -w`: an address, the raw bytes and the text.
type objdumpInst struct {
	addr  uint64
	bytes []byte
	text  string
}

var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\t([0-9a-f ]+)\t(.*)$`)

func runObjdump(t *testing.T, path string) []objdumpInst {
	t.Helper()
	if _, err := exec.LookPath("objdump"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("objdump (binutils) is needed: %v", err)
		}
		t.Skipf("objdump (binutils) not installed: %v", err)
	}
	out, err := exec.Command("objdump", "-d", "-w", path).Output()
	if err != nil {
		t.Fatalf("objdump -d -w %s: %v", path, err)
	}
	var insts []objdumpInst
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := objdumpLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		var raw []byte
		for _, h := range strings.Fields(m[2]) {
			b, _ := strconv.ParseUint(h, 16, 8)
			raw = append(raw, byte(b))
		}
		insts = append(insts, objdumpInst{addr, raw, strings.TrimSpace(m[3])})
	}
	return insts
}

// execSections returns the executable sections of an ELF file.
func execSections(t testing.TB, path string) []*elf.Section {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var out []*elf.Section
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type == elf.SHT_PROGBITS {
			out = append(out, s)
		}
	}
	return out
}

type ourInst struct {
	in  Inst
	err error
}

func decodeFile(t *testing.T, path string) map[uint64]ourInst {
	t.Helper()
	got := map[uint64]ourInst{}
	for _, s := range execSections(t, path) {
		code, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(code); {
			in, err := Decode(code[off:])
			if err != nil {
				got[s.Addr+uint64(off)] = ourInst{err: err}
				off++
				continue
			}
			got[s.Addr+uint64(off)] = ourInst{in: in}
			off += int(in.Len)
		}
	}
	return got
}

var lonePrefix = regexp.MustCompile(`^((rex(\.[WRXB]+)?|data16|addr32|lock|rep[nz]*|[cdefgs]s)\s*)+$`)

// objdumpData reports lines where objdump shows bytes that do not form an instruction.
func objdumpData(o objdumpInst) bool {
	if strings.Contains(o.text, "(bad)") || strings.HasPrefix(o.text, ".byte") || lonePrefix.MatchString(strings.TrimSpace(o.text)) {
		return true
	}
	// A REX prefix before VEX or EVEX makes the instruction #UD; objdump decodes it anyway.
	if strings.HasPrefix(o.text, "rex") {
		if c := firstOpcodeByte(o.bytes); c == 0xc4 || c == 0xc5 || c == 0x62 {
			return true
		}
	}
	return false
}

// firstOpcodeByte returns the first byte after legacy and REX prefixes.
func firstOpcodeByte(b []byte) byte {
	for _, c := range b {
		switch {
		case c == 0x66 || c == 0x67 || c == 0xf2 || c == 0xf3 || c == 0xf0 ||
			c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 || c == 0x64 || c == 0x65:
		case c&0xf0 == 0x40:
		default:
			return c
		}
	}
	return 0
}

var kreg = regexp.MustCompile(`%k[0-7]`)

// objdumpAVX512 is the oracle's view: EVEX-encoded (0x62 after the prefixes, {evex}, a zmm
// register) or an opmask instruction (a %k register).
func objdumpAVX512(o objdumpInst) bool {
	return firstOpcodeByte(o.bytes) == 0x62 || strings.Contains(o.text, "zmm") ||
		strings.Contains(o.text, "{evex}") || kreg.MatchString(o.text)
}

// objdumpVL says whether an EVEX instruction in objdump's listing works on 128- or 256-bit
// vectors (so needs AVX512VL): xmm or ymm operands and no zmm, no rounding or SAE control, and
// not a scalar or single-element instruction. ok is false where the text does not tell.
func objdumpVL(o objdumpInst) (vl, ok bool) {
	if firstOpcodeByte(o.bytes) != 0x62 {
		return false, false
	}
	mn := mnemonic(o.text)
	t := o.text
	switch {
	case strings.Contains(t, "zmm") || strings.Contains(t, "sae}"):
		return false, true
	case !strings.Contains(t, "xmm") && !strings.Contains(t, "ymm"):
		// Memory and mask operands only: the size suffix tells.
		switch mn[len(mn)-1] {
		case 'x', 'y':
			return true, true
		case 'z':
			return false, true
		}
		return false, false
	}
	scalar := []string{"vmovd", "vmovq", "vmovw", "vpextrb", "vpextrw", "vpextrd", "vpextrq", "vpinsrb", "vpinsrw",
		"vpinsrd", "vpinsrq", "vextractps", "vinsertps", "vcomiss", "vucomiss", "vcomisd", "vucomisd",
		"vmovlhps", "vmovhlps", "vmovlps", "vmovhps", "vmovlpd", "vmovhpd"}
	for _, s := range scalar {
		if mn == s {
			return false, true
		}
	}
	if !strings.HasPrefix(mn, "vp") && !strings.HasPrefix(mn, "vbroadcast") && (strings.HasSuffix(mn, "ss") || strings.HasSuffix(mn, "sd") || strings.HasSuffix(mn, "sh") ||
		strings.Contains(mn, "si2s") || strings.Contains(mn, "s2si") || strings.Contains(mn, "s2usi") || strings.Contains(mn, "d2si") ||
		strings.Contains(mn, "d2usi") || strings.Contains(mn, "cvtss2sd") || strings.Contains(mn, "cvtsd2ss")) {
		return false, true
	}
	return true, true
}

// sameMnemonic accepts objdump's AT&T operand-size suffixes (vcvtneps2bf16y, popcntq).
func sameMnemonic(name, objdump string) bool {
	if name == objdump {
		return true
	}
	rest, ok := strings.CutPrefix(objdump, name)
	return ok && len(rest) == 1 && strings.Contains("bwlqxyz", rest)
}

func mnemonic(text string) string {
	f := strings.Fields(text)
	for len(f) > 0 && (f[0] == "{vex}" || f[0] == "{evex}" || strings.HasPrefix(f[0], "rex") || f[0] == "data16" || f[0] == "addr32" ||
		f[0] == "cs" || f[0] == "ds" || f[0] == "notrack" || f[0] == "bnd" || f[0] == "lock" ||
		f[0] == "rep" || f[0] == "repz" || f[0] == "repnz") {
		f = f[1:]
	}
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// evexBW and evexDQ recognise EVEX mnemonics of the AVX512BW and AVX512DQ subsets.
func evexBW(mn string) bool {
	for _, p := range []string{"vpaddb", "vpaddw", "vpsubb", "vpsubw", "vpaddsb", "vpaddsw", "vpaddusb", "vpaddusw",
		"vpsubsb", "vpsubsw", "vpsubusb", "vpsubusw", "vpmaddubsw", "vpmaddwd", "vpshufb", "vpacksswb", "vpackssdw",
		"vpackuswb", "vpackusdw", "vpunpcklbw", "vpunpckhbw", "vpunpcklwd", "vpunpckhwd", "vpcmpeqb", "vpcmpeqw",
		"vpcmpgtb", "vpcmpgtw", "vpcmpb", "vpcmpub", "vpcmpw", "vpcmpuw", "vpmovb2m", "vpmovw2m", "vpmovm2b", "vpmovm2w",
		"vmovdqu8", "vmovdqu16", "vpsllw", "vpsrlw", "vpsraw", "vpmullw", "vpmulhw", "vpmulhuw", "vpmulhrsw",
		"vpavgb", "vpavgw", "vpminub", "vpminuw", "vpminsb", "vpminsw", "vpmaxub", "vpmaxuw", "vpmaxsb", "vpmaxsw",
		"vpabsb", "vpabsw", "vpalignr", "vpbroadcastb", "vpbroadcastw", "vpermw", "vpblendmb", "vpblendmw",
		"vptestmb", "vptestmw", "vptestnmb", "vptestnmw", "vpsadbw", "vpextrb", "vpextrw", "vpinsrb", "vpinsrw",
		"vpmovwb", "vpmovswb", "vpmovuswb", "vpmovzxbw", "vpmovsxbw", "vpslldq", "vpsrldq", "vpsllvw", "vpsrlvw", "vpsravw"} {
		if mn == p {
			return true
		}
	}
	return false
}

func evexDQ(mn string) bool {
	for _, p := range []string{"vpmullq", "vandps", "vandpd", "vandnps", "vandnpd", "vorps", "vorpd", "vxorps", "vxorpd",
		"vcvtqq2ps", "vcvtqq2pd", "vcvtuqq2ps", "vcvtuqq2pd", "vcvtps2qq", "vcvtpd2qq", "vcvttps2qq", "vcvttpd2qq",
		"vcvtps2uqq", "vcvtpd2uqq", "vcvttps2uqq", "vcvttpd2uqq", "vextracti64x2", "vinserti64x2", "vextractf64x2",
		"vinsertf64x2", "vextracti32x8", "vinserti32x8", "vextractf32x8", "vinsertf32x8", "vpmovd2m", "vpmovq2m",
		"vpmovm2d", "vpmovm2q", "vpextrd", "vpextrq", "vpinsrd", "vpinsrq", "vbroadcasti32x2", "vbroadcasti64x2",
		"vbroadcasti32x8", "vbroadcastf32x2", "vbroadcastf64x2", "vbroadcastf32x8"} {
		if mn == p {
			return true
		}
	}
	return strings.HasPrefix(mn, "vfpclass") || strings.HasPrefix(mn, "vrange") || strings.HasPrefix(mn, "vreduce")
}

// mnemonicOracle maps mnemonics whose extension is unambiguous to that extension.
func mnemonicOracle(o objdumpInst) (Ext, bool) {
	mn := mnemonic(o.text)
	vex := strings.HasPrefix(o.text, "{vex}") || firstOpcodeByte(o.bytes) == 0xc4 || firstOpcodeByte(o.bytes) == 0xc5
	evex := firstOpcodeByte(o.bytes) == 0x62
	switch {
	case strings.HasPrefix(mn, "vfmadd") || strings.HasPrefix(mn, "vfmsub") ||
		strings.HasPrefix(mn, "vfnmadd") || strings.HasPrefix(mn, "vfnmsub"):
		// FMA3 mnemonics carry an operand order (132, 213, 231); AMD's FMA4 ones do not.
		fma3 := strings.Contains(mn, "132") || strings.Contains(mn, "213") || strings.Contains(mn, "231")
		switch {
		case vex && fma3:
			return FMA, true
		case vex:
			return FMA4, true
		}
	case mn == "vcvtph2ps" || mn == "vcvtps2ph":
		if vex {
			return F16C, true
		}
	case mn == "vpdpbusd" || mn == "vpdpbusds" || mn == "vpdpwssd" || mn == "vpdpwssds":
		if vex {
			return AVXVNNI, true
		}
		return AVX512VNNI, true
	case mn == "vdpbf16ps" || mn == "vcvtne2ps2bf16" || strings.HasPrefix(mn, "vcvtneps2bf16"):
		if !vex {
			return AVX512BF16, true
		}
	case mn == "vpermb" || mn == "vpermi2b" || mn == "vpermt2b" || mn == "vpmultishiftqb":
		return AVX512VBMI, true
	case mn == "vpconflictd" || mn == "vpconflictq" || mn == "vplzcntd" || mn == "vplzcntq":
		return AVX512CD, true
	case strings.HasPrefix(mn, "tdpb") || strings.HasPrefix(mn, "tileload") || mn == "tilestored" ||
		mn == "tilezero" || mn == "tilerelease" || mn == "ldtilecfg" || mn == "sttilecfg":
		return AMXTile, true
	case mn == "shlx" || mn == "shrx" || mn == "sarx" || mn == "rorx" || mn == "bzhi" || mn == "pdep" || mn == "pext" || mn == "mulx":
		return BMI2, true
	case mn == "andn" || mn == "bextr" || mn == "blsr" || mn == "blsi" || mn == "blsmsk":
		return BMI1, true
	case vex && (strings.HasPrefix(mn, "vpbroadcast") || mn == "vinserti128" || mn == "vextracti128" ||
		mn == "vperm2i128" || mn == "vpermq" || mn == "vpermd" || mn == "vpermpd" || mn == "vpermps" ||
		mn == "vpblendd" || strings.HasPrefix(mn, "vpgather") || strings.HasPrefix(mn, "vgather") ||
		mn == "vpsllvd" || mn == "vpsllvq" || mn == "vpsrlvd" || mn == "vpsrlvq" ||
		mn == "vpsravd" || strings.HasPrefix(mn, "vpmaskmov")):
		return AVX2, true
	case vex && strings.HasPrefix(mn, "vp") && strings.Contains(o.text, "ymm") &&
		!strings.HasPrefix(mn, "vperm") && mn != "vptest" && !strings.HasPrefix(mn, "vpclmul") &&
		!strings.HasPrefix(mn, "vpcmpestr") && !strings.HasPrefix(mn, "vpcmpistr"):
		return AVX2, true
	case evex && evexBW(mn):
		return AVX512BW, true
	case evex && evexDQ(mn):
		return AVX512DQ, true
	case mn == "popcnt":
		return POPCNT, true
	case mn == "lzcnt":
		return LZCNT, true
	case mn == "crc32b" || mn == "crc32l" || mn == "crc32q" || mn == "crc32w" || mn == "pcmpgtq" ||
		strings.HasPrefix(mn, "pcmpestr") || strings.HasPrefix(mn, "pcmpistr"):
		return SSE42, true
	case mn == "pshufb" || mn == "pmaddubsw" || mn == "palignr" || mn == "pabsb" || mn == "pabsw" ||
		mn == "pabsd" || mn == "pmulhrsw" || strings.HasPrefix(mn, "phadd") || strings.HasPrefix(mn, "phsub") ||
		strings.HasPrefix(mn, "psign"):
		return SSSE3, true
	case mn == "ptest" || mn == "pmulld" || mn == "pminsd" || mn == "pmaxsd" || mn == "pminud" ||
		mn == "pmaxud" || mn == "pminsb" || mn == "pmaxsb" || mn == "pminuw" || mn == "pmaxuw" ||
		strings.HasPrefix(mn, "pmovsx") || strings.HasPrefix(mn, "pmovzx") || mn == "pblendw" ||
		mn == "blendps" || mn == "blendpd" || mn == "blendvps" || mn == "blendvpd" || mn == "pblendvb" ||
		mn == "roundps" || mn == "roundss" || mn == "roundsd" || mn == "roundpd" || mn == "pinsrb" ||
		mn == "pinsrd" || mn == "pinsrq" || mn == "pextrb" || mn == "pextrd" || mn == "pextrq" ||
		mn == "insertps" || mn == "extractps" || mn == "dpps" || mn == "dppd" || mn == "packusdw" ||
		mn == "pcmpeqq" || mn == "pmuldq" || mn == "movntdqa" || mn == "phminposuw" || mn == "mpsadbw":
		return SSE41, true
	case mn == "haddps" || mn == "haddpd" || mn == "hsubps" || mn == "hsubpd" || mn == "movddup" ||
		mn == "movshdup" || mn == "movsldup" || mn == "addsubps" || mn == "addsubpd" || mn == "lddqu":
		return SSE3, true
	}
	return 0, false
}

// TestDecoderAgreesWithObjdump decodes Debian's prebuilt ggml CPU backends, which nobody
// here wrote, and holds every instruction against binutils' disassembly: the same
// instruction boundaries, AVX-512 exactly where objdump shows EVEX or opmask registers,
// and the extensions its mnemonics imply.
func TestDecoderAgreesWithObjdump(t *testing.T) {
	dir := debfetch.GGMLBackends(t)
	libs, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	if len(libs) < 10 {
		t.Fatalf("found %d libggml-cpu-*.so in %s, want the whole set", len(libs), dir)
	}
	// glibc's string functions carry hand-written AVX2, EVEX and AVX-512 variants.
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			libs = append(libs, p)
			break
		}
	}
	// LLBUILD_ORACLE_EXTRA adds more files (colon-separated) to hold against objdump.
	isExtra := map[string]bool{}
	if extra := os.Getenv("LLBUILD_ORACLE_EXTRA"); extra != "" {
		for _, p := range strings.Split(extra, ":") {
			libs = append(libs, p)
			isExtra[p] = true
		}
	}
	if testing.Short() {
		libs = libs[:2]
	}
	for _, path := range libs {
		lib := filepath.Base(path)
		t.Run(lib, func(t *testing.T) {
			want := runObjdump(t, path)
			got := decodeFile(t, path)
			if len(want) < 1000 {
				t.Fatalf("objdump listed %d instructions, want a real library", len(want))
			}
			var boundaryMiss, avx512Miss, mnMiss, checked, mnChecked, unclassified, skipped, named, nameMiss, vlChecked, vlMiss int
			// After bytes objdump shows as data ("(bad)", ".byte", a lone REX prefix) the two
			// resynchronise at different places: compare again from the second consecutive
			// boundary both share.
			desync, shared := false, 0
			for _, o := range want {
				g, ok := got[o.addr]
				if objdumpData(o) {
					desync, shared = true, 0
					skipped++
					continue
				}
				if desync {
					if ok && g.err == nil && int(g.in.Len) == len(o.bytes) {
						shared++
					} else {
						shared = 0
					}
					if shared < 2 {
						skipped++
						continue
					}
					desync = false
				}
				// objdump folds fwait (9B) into the x87 instruction after it; it is an
				// instruction of its own.
				if ok && g.err == nil && g.in.Len == 1 && len(o.bytes) > 1 && o.bytes[0] == 0x9b {
					if n, ok2 := got[o.addr+1]; ok2 && n.err == nil && int(n.in.Len) == len(o.bytes)-1 {
						checked++
						continue
					}
				}
				if !ok || g.err != nil {
					boundaryMiss++
					if boundaryMiss <= 5 {
						t.Errorf("%#x: objdump decodes %x %q; we have no instruction there (err %v)", o.addr, o.bytes, o.text, g.err)
					}
					continue
				}
				if int(g.in.Len) != len(o.bytes) {
					boundaryMiss++
					if boundaryMiss <= 5 {
						t.Errorf("%#x: length %d, objdump %d (%x %q)", o.addr, g.in.Len, len(o.bytes), o.bytes, o.text)
					}
					continue
				}
				checked++
				if g.in.Ext&Unclassified != 0 {
					unclassified++
					// In the ggml libraries every instruction has a name: one the tables lose
					// turns their verdict into unknown, so it fails here.
					report := t.Errorf
					if isExtra[path] || !strings.HasPrefix(lib, "libggml") {
						report = t.Logf
					}
					if unclassified <= 5 {
						report("%#x %x %q: unclassified (%s)", o.addr, o.bytes, o.text, g.in)
					}
				}
				if gotE, wantE := g.in.Ext&AVX512Any != 0, objdumpAVX512(o); gotE != wantE {
					avx512Miss++
					if avx512Miss <= 5 {
						t.Errorf("%#x %x %q: classified %v (%s), objdump AVX-512 = %v", o.addr, o.bytes, o.text, g.in.Ext, g.in, wantE)
					}
				}
				if wantVL, ok := objdumpVL(o); ok && g.in.Ext&AVX512Any != 0 {
					vlChecked++
					if gotVL := g.in.Ext&AVX512VL != 0; gotVL != wantVL {
						vlMiss++
						if vlMiss <= 10 {
							t.Errorf("%#x %x %q: AVX512VL = %v (%s), objdump's operands say %v", o.addr, o.bytes, o.text, gotVL, g.in, wantVL)
						}
					}
				}
				if name := g.in.Name(); name != "" {
					named++
					if mn := mnemonic(o.text); !sameMnemonic(name, mn) {
						nameMiss++
						if nameMiss <= 10 {
							t.Errorf("%#x %x %q: Name() = %q, objdump %q (%s)", o.addr, o.bytes, o.text, name, mn, g.in)
						}
					}
				}
				if e, ok := mnemonicOracle(o); ok {
					mnChecked++
					if g.in.Ext&e == 0 {
						mnMiss++
						if mnMiss <= 10 {
							t.Errorf("%#x %x %q: classified %v (%s), mnemonic says %v", o.addr, o.bytes, o.text, g.in.Ext, g.in, e)
						}
					}
				}
			}
			// Hand-written assembly (OpenSSL's, in the extra files) keeps tables in .text.
			if !isExtra[path] && checked < len(want)*99/100 {
				t.Errorf("compared %d of objdump's %d instructions, want at least 99%%", checked, len(want))
			}
			t.Logf("%s: %d instructions compared, %d boundary mismatches, %d AVX-512 disagreements, %d/%d mnemonic disagreements, %d/%d name disagreements, %d/%d AVX512VL disagreements, %d unclassified, %d skipped around objdump's (bad)",
				lib, checked, boundaryMiss, avx512Miss, mnMiss, mnChecked, nameMiss, named, vlMiss, vlChecked, unclassified, skipped)
		})
	}
}
