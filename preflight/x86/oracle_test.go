package x86

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// runObjdump disassembles path with objdump and its args (-d -w when none).
func runObjdump(t *testing.T, path string, args ...string) []objdumpInst {
	t.Helper()
	if _, err := exec.LookPath("objdump"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("objdump (binutils) is needed: %v", err)
		}
		t.Skipf("objdump (binutils) not installed: %v", err)
	}
	if len(args) == 0 {
		args = []string{"-d", "-w"}
	}
	out, err := exec.Command("objdump", append(args, path)...).Output()
	if err != nil {
		t.Fatalf("objdump %s %s: %v", strings.Join(args, " "), path, err)
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

// objdumpAVX512 is a reading that needs no table, so it covers mnemonics the table does not
// know too: AVX-512 exactly where the bytes are EVEX (62 after the prefixes) or the text has
// a zmm or opmask register.
func objdumpAVX512(o objdumpInst) bool {
	return firstOpcodeByte(o.bytes) == 0x62 || strings.Contains(o.text, "zmm") ||
		strings.Contains(o.text, "{evex}") || kreg.MatchString(o.text)
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
	mn, _ := splitInst(text)
	return mn
}

// TestDecoderAgreesWithObjdump decodes Debian's prebuilt ggml CPU backends, which nobody
// here wrote, and holds every instruction against binutils' disassembly: the same
// instruction boundaries, and exactly the extensions that objdump's mnemonic, operands and
// encoding say it needs (objdumpExt). In the ggml libraries every mnemonic must be one the
// oracle's table knows, so no instruction goes unchecked.
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
	var total, totalExt int
	allMnemonics := map[string]bool{}
	t.Cleanup(func() {
		t.Logf("all files: extensions of %d of %d instructions compared, %d distinct mnemonics by encoding", totalExt, total, len(allMnemonics))
	})
	for _, path := range libs {
		lib := filepath.Base(path)
		// Only the ggml libraries are fixed by the test's pinned packages: the host's libc and
		// the extra files may use mnemonics the table has not met, which are logged.
		pinned := !isExtra[path] && strings.HasPrefix(lib, "libggml")
		t.Run(lib, func(t *testing.T) {
			want := runObjdump(t, path)
			got := decodeFile(t, path)
			if len(want) < 1000 {
				t.Fatalf("objdump listed %d instructions, want a real library", len(want))
			}
			var boundaryMiss, avx512Miss, extMiss, checked, extChecked, unclassified, skipped, named, nameMiss int
			unknown := map[string]int{}
			mnemonics := map[string]bool{}
			// Disagreements are reported once per kind (mnemonic, classified, expected), with
			// the first instance, so one wrong table entry reads as one line.
			disagree, examples := map[string]int{}, map[string]string{}
			// compareExt holds what the decoder says instructions at o.addr need (e) against
			// the oracle's reading of objdump's line.
			compareExt := func(o objdumpInst, e Ext, desc string) {
				wantE, name, known, err := objdumpExt(o)
				switch {
				case !known:
					unknown[name]++
					return
				case err != nil:
					extMiss++
					t.Errorf("%#x %x %q: %v", o.addr, o.bytes, o.text, err)
					return
				}
				extChecked++
				mnemonics[name] = true
				allMnemonics[name] = true
				if gotE := e; gotE != wantE {
					extMiss++
					kind := fmt.Sprintf("%s: classified %v, objdump's reading says %v", name, gotE, wantE)
					if disagree[kind] == 0 {
						examples[kind] = fmt.Sprintf("%#x %x %q (%s)", o.addr, o.bytes, o.text, desc)
					}
					disagree[kind]++
				}
			}
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
						compareExt(o, g.in.Ext|n.in.Ext, "fwait and "+n.in.String())
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
					if !pinned {
						report = t.Logf
					}
					if unclassified <= 5 {
						report("%#x %x %q: unclassified (%s)", o.addr, o.bytes, o.text, g.in)
					}
				}
				compareExt(o, g.in.Ext, g.in.String())
				if gotE, wantE := g.in.Ext&AVX512Any != 0, objdumpAVX512(o); gotE != wantE {
					avx512Miss++
					if avx512Miss <= 5 {
						t.Errorf("%#x %x %q: classified %v (%s), objdump AVX-512 = %v", o.addr, o.bytes, o.text, g.in.Ext, g.in, wantE)
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
			}
			for _, k := range slices.Sorted(maps.Keys(disagree)) {
				t.Errorf("%s (×%d; first at %s)", k, disagree[k], examples[k])
			}
			if len(unknown) > 0 {
				var list []string
				n := 0
				for name, c := range unknown {
					list = append(list, fmt.Sprintf("%s ×%d", name, c))
					n += c
				}
				sort.Strings(list)
				report := t.Errorf
				if !pinned {
					report = t.Logf
				}
				report("%d instructions have mnemonics the oracle's table (extoracle_test.go) does not know, so their extensions were not compared: %s", n, strings.Join(list, ", "))
			}
			// Hand-written assembly (OpenSSL's, in the extra files) keeps tables in .text.
			if !isExtra[path] && checked < len(want)*99/100 {
				t.Errorf("compared %d of objdump's %d instructions, want at least 99%%", checked, len(want))
			}
			total, totalExt = total+len(want), totalExt+extChecked
			t.Logf("%s: %d instructions compared, %d boundary mismatches, %d AVX-512 disagreements; extensions of %d (%d mnemonics by encoding) compared, %d disagreements, %d not in the table; %d/%d name disagreements, %d unclassified, %d skipped around objdump's (bad)",
				lib, checked, boundaryMiss, avx512Miss, extChecked, len(mnemonics), extMiss, len(unknown), nameMiss, named, unclassified, skipped)
		})
	}
}
