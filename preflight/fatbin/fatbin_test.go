package fatbin

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var cuobjdumpLine = regexp.MustCompile(`^(ELF|PTX) file\s+\d+: (\S+)$`)

// TestParseMatchesCuobjdump lists real nvcc 13.0 fat binaries and compares the listing with
// what cuobjdump printed for the same libraries.
func TestParseMatchesCuobjdump(t *testing.T) {
	sections, _ := filepath.Glob("testdata/realbuild/*.nv_fatbin")
	if len(sections) == 0 {
		t.Fatal("no testdata/realbuild/*.nv_fatbin")
	}
	for _, path := range sections {
		base := strings.TrimSuffix(filepath.Base(path), ".nv_fatbin")
		t.Run(base, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			nELF, nPTX := 0, 0
			for _, e := range entries {
				switch e.Kind {
				case Cubin:
					nELF++
					got = append(got, "ELF "+e.CuobjdumpName(base, nELF))
				case PTX:
					nPTX++
					got = append(got, "PTX "+e.CuobjdumpName(base, nPTX))
				}
			}
			listing, err := os.ReadFile(strings.TrimSuffix(path, ".nv_fatbin") + ".cuobjdump.txt")
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			sc := bufio.NewScanner(bytes.NewReader(listing))
			for sc.Scan() {
				if m := cuobjdumpLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
					want = append(want, m[1]+" "+m[2])
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("listing:\n%s\nwant (cuobjdump):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// realEntries parses the .nv_fatbin section of the real nvcc build testdata/realbuild/NAME.
func realEntries(t *testing.T, name string) []Entry {
	t.Helper()
	data, err := os.ReadFile("testdata/realbuild/" + name + ".nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestRealFlags(t *testing.T) {
	for _, c := range []struct {
		file string
		want []string // Arch() of each entry, in order
	}{
		{"mixed", []string{"sm_86", "sm_90a", "sm_120a", "sm_86", "sm_90a", "sm_120a", "compute_90"}},
		{"family", []string{"sm_100f", "sm_120f", "sm_103", "sm_100f", "sm_120f", "sm_103"}},
		{"plain120", []string{"sm_120", "sm_75", "compute_120", "sm_120", "sm_75"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			var got []string
			for _, e := range realEntries(t, c.file) {
				got = append(got, e.Arch())
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("archs = %v, want %v", got, c.want)
			}
		})
	}
}

// synthEntry describes one entry for the generator.
type synthEntry struct {
	kind    Kind
	sm      int
	flags   uint64
	hdr     int // header size (64, 80, 96, 112)
	payload int
	ptx     [2]int
}

// synth writes a fat binary container the way nvcc lays one out: a 16-byte header, then
// each entry's header followed by its payload padded to 8 bytes.
func synth(entries ...synthEntry) []byte {
	var body []byte
	for _, e := range entries {
		h := make([]byte, e.hdr)
		binary.LittleEndian.PutUint16(h[0:], uint16(e.kind))
		binary.LittleEndian.PutUint16(h[2:], 0x101)
		binary.LittleEndian.PutUint32(h[4:], uint32(e.hdr))
		padded := (e.payload + 7) &^ 7
		binary.LittleEndian.PutUint64(h[8:], uint64(padded))
		binary.LittleEndian.PutUint16(h[0x18:], uint16(e.ptx[1]))
		binary.LittleEndian.PutUint16(h[0x1a:], uint16(e.ptx[0]))
		binary.LittleEndian.PutUint32(h[0x1c:], uint32(e.sm))
		binary.LittleEndian.PutUint64(h[0x28:], 0x11|e.flags)
		body = append(body, h...)
		body = append(body, bytes.Repeat([]byte{0xcc}, padded)...)
	}
	head := make([]byte, 16)
	binary.LittleEndian.PutUint32(head, Magic)
	binary.LittleEndian.PutUint16(head[4:], 1)
	binary.LittleEndian.PutUint16(head[6:], 16)
	binary.LittleEndian.PutUint64(head[8:], uint64(len(body)))
	return append(head, body...)
}

func TestParseSynthetic(t *testing.T) {
	a := synth(synthEntry{kind: Cubin, sm: 86, hdr: 64, payload: 13},
		synthEntry{kind: Cubin, sm: 120, flags: flagArchSpecific | 0x1000000, hdr: 112, payload: 100})
	b := synth(synthEntry{kind: PTX, sm: 90, flags: flagCompressed, hdr: 80, payload: 7, ptx: [2]int{9, 0}})
	data := append(append(a, make([]byte, 8)...), b...) // zero padding between containers
	entries, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s/%s/c=%v", e.Kind, e.Arch(), e.Compressed))
	}
	want := "[cubin/sm_86/c=false cubin/sm_120a/c=false ptx/compute_90/c=true]"
	if fmt.Sprint(got) != want {
		t.Errorf("Parse = %v, want %v", got, want)
	}
	if maj, min, ok := entries[2].MinDriverCUDA(); !ok || maj != 13 || min != 0 {
		t.Errorf("MinDriverCUDA = %d.%d %v, want 13.0", maj, min, ok)
	}
}

func TestParseRejectsDamage(t *testing.T) {
	good := synth(synthEntry{kind: Cubin, sm: 86, hdr: 64, payload: 64})
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"bad magic", append([]byte{1, 2, 3, 4}, good[4:]...), ErrBadMagic},
		{"cut in the payload", good[:len(good)-8], ErrTruncated},
		{"cut in the container header", good[:10], ErrTruncated},
		{"entry header size below 64", func() []byte {
			d := bytes.Clone(good)
			binary.LittleEndian.PutUint32(d[16+4:], 8)
			return d
		}(), ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Parse(c.data); !errors.Is(err, c.want) {
				t.Errorf("Parse error = %v, want %v", err, c.want)
			}
		})
	}
}

func TestKernelSelection(t *testing.T) {
	cubin := func(sm int, flags uint64) Entry {
		return Entry{Kind: Cubin, SM: sm, ArchSpecific: flags&flagArchSpecific != 0, FamilySpecific: flags&flagFamilySpecific != 0}
	}
	ptx := func(sm int, flags uint64) Entry {
		e := cubin(sm, flags)
		e.Kind = PTX
		return e
	}
	for _, c := range []struct {
		name string
		e    Entry
		dev  string
		runs bool
		jits bool
	}{
		{"sm_86 cubin runs on 8.6", cubin(86, 0), "8.6", true, false},
		{"sm_86 cubin runs on 8.9 (same major, higher minor)", cubin(86, 0), "8.9", true, false},
		{"sm_86 cubin does not run on 8.0", cubin(86, 0), "8.0", false, false},
		{"sm_86 cubin does not run on 9.0 (other major)", cubin(86, 0), "9.0", false, false},
		{"sm_120a cubin runs on 12.0", cubin(120, flagArchSpecific), "12.0", true, false},
		{"sm_120a cubin does not run on 12.1", cubin(120, flagArchSpecific), "12.1", false, false},
		{"sm_100f cubin runs on 10.3", cubin(100, flagFamilySpecific), "10.3", true, false},
		{"sm_90 cubin does not run on 12.0", cubin(90, 0), "12.0", false, false},
		{"compute_90 PTX JITs on 12.0", ptx(90, 0), "12.0", false, true},
		{"compute_90 PTX does not JIT on 8.9", ptx(90, 0), "8.9", false, false},
		{"compute_90a PTX JITs only on 9.0", ptx(90, flagArchSpecific), "12.0", false, false},
		{"compute_120f PTX JITs on 12.1", ptx(120, flagFamilySpecific), "12.1", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev, err := ParseCC(c.dev)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.e.RunsOn(dev); got != c.runs {
				t.Errorf("RunsOn(%v) = %v, want %v", dev, got, c.runs)
			}
			if got := c.e.JITsOn(dev); got != c.jits {
				t.Errorf("JITsOn(%v) = %v, want %v", dev, got, c.jits)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(synth(synthEntry{kind: Cubin, sm: 86, hdr: 64, payload: 13}))
	f.Add(synth(synthEntry{kind: PTX, sm: 90, hdr: 80, payload: 7, ptx: [2]int{9, 0}}))
	if real, err := os.ReadFile("testdata/realbuild/compressed.nv_fatbin"); err == nil {
		f.Add(real)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, _ := Parse(data)
		for _, e := range entries {
			if e.Offset < 0 || e.Offset+e.HeaderSize+e.PayloadSize > len(data) {
				t.Fatalf("entry %+v reaches past the %d-byte input", e, len(data))
			}
			_ = e.Arch()
		}
	})
}
