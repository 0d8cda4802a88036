package preflight

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/preflight/fatbin"
	"github.com/llbuild/llbuild/preflight/x86"
)

// Binary is what preflight reads off one ELF file: the instruction-set extensions its code
// uses (with the first instructions using each), the libraries it needs, and the GPU
// kernels it carries. It is a plain value; checks are functions of it and a host.
type Binary struct {
	// Path names the file (inside an image or bundle: the path there).
	Path    string   `json:"path"`
	Machine string   `json:"machine"`
	SONAME  string   `json:"soname,omitempty"`
	Needed  []string `json:"needed,omitempty"`
	// Runpath is DT_RUNPATH (or DT_RPATH), the directories searched for Needed.
	Runpath []string `json:"runpath,omitempty"`
	// RPath is set when Runpath came from DT_RPATH, which the loader also searches for the
	// libraries that the libraries this file loads need.
	RPath bool `json:"rpath,omitempty"`
	// Executable is set for a file with a program interpreter (PT_INTERP).
	Executable bool `json:"executable,omitempty"`
	// NotFound lists the DT_NEEDED libraries the loader would not find, and SystemLibs those
	// it would take from LD_LIBRARY_PATH or the system library directories, which are not
	// decoded. Only ReadFiles fills them in.
	NotFound   []string `json:"notFound,omitempty"`
	SystemLibs []string `json:"systemLibs,omitempty"`
	// System is set for a file outside llama.cpp that lives in or below a system library
	// directory (libc.so.6 named with --binary): such libraries may test CPUID before running code the
	// CPU lacks, so that code is not taken to run. Only ReadFiles sets it.
	System bool `json:"system,omitempty"`
	// GGMLSearch names the ggml backend search that found this file (ggml's loader scans
	// the executable's directory and the working directory); the CPU variants of one search
	// are scored together. Empty for files not found that way.
	GGMLSearch string `json:"ggmlSearch,omitempty"`
	// GGMLForced is set for the backend GGML_BACKEND_PATH names: ggml_backend_load_all loads
	// it after its searches, unscored, so its code is judged even where a search would not
	// pick it.
	GGMLForced bool `json:"ggmlForced,omitempty"`
	// Backends is, for an executable read by ReadFiles, where ggml's loader would look for
	// backends and what it found.
	Backends *BackendSearch `json:"backends,omitempty"`
	// Code is the x86-64 code scan; nil for other machines.
	Code *CodeFacts `json:"code,omitempty"`
	// Fatbin lists the .nv_fatbin entries; FatbinError says why the listing stopped early.
	Fatbin      []fatbin.Entry `json:"fatbin,omitempty"`
	FatbinError string         `json:"fatbinError,omitempty"`
	// SYCL is set for a ggml SYCL backend that embeds SPIR-V or ahead-of-time device code;
	// SYCLDevices are the ahead-of-time Intel GPU targets named in it ("bmg-g31").
	SYCL        bool     `json:"sycl,omitempty"`
	SYCLDevices []string `json:"syclDevices,omitempty"`
}

// CodeFacts is the result of decoding a file's executable sections.
type CodeFacts struct {
	Bytes        int `json:"bytes"`
	Instructions int `json:"instructions"`
	// DecodeErrors counts bytes skipped because they did not decode (data in code, or
	// encodings the decoder does not know); FirstDecodeError is where the first was.
	DecodeErrors     int    `json:"decodeErrors"`
	FirstDecodeError uint64 `json:"firstDecodeError,omitempty"`
	// FirstDecodeErrorAt names the section (or segment) and bytes of the first one.
	FirstDecodeErrorAt string `json:"firstDecodeErrorAt,omitempty"`
	// Uses is every extension the code needs.
	Uses x86.Ext `json:"-"`
	// Extensions counts instructions per extension, by name.
	Extensions map[string]int `json:"extensions"`
	// Examples holds the first instructions that use each extension, by extension.
	Examples map[x86.Ext][]Instruction `json:"-"`
	// IFuncResolvers counts the file's ifunc resolvers; with any (or with CPUIDChosen), Uses,
	// Extensions and Examples cover the code that can run without one choosing it, and the
	// Dispatched fields the functions only a resolver's choice reaches (see findDispatched).
	IFuncResolvers int `json:"ifuncResolvers,omitempty"`
	// CPUIDChosen names what, besides ifunc resolvers, picks some of the file's functions
	// by a CPUID test of its own (see cpuidChosen): their code counts as dispatched.
	CPUIDChosen          []string                  `json:"cpuidChosen,omitempty"`
	DispatchedBytes      int                       `json:"dispatchedBytes,omitempty"`
	Dispatched           x86.Ext                   `json:"-"`
	DispatchedExtensions map[string]int            `json:"dispatchedExtensions,omitempty"`
	DispatchedExamples   map[x86.Ext][]Instruction `json:"-"`
	// LoadUses is, for a ggml CPU variant, what the code that runs when ggml's loader
	// dlopens it to read its score needs (constructors, ifunc resolvers, ggml_backend_score);
	// LoadIndirect counts the calls through function pointers there that were not followed,
	// and LoadError says why that code could not be followed (see followInitCode).
	LoadUses     x86.Ext       `json:"-"`
	LoadIndirect int           `json:"loadIndirect,omitempty"`
	LoadError    string        `json:"loadError,omitempty"`
	LoadExamples []Instruction `json:"loadExamples,omitempty"`
}

// Instruction is one decoded instruction kept as evidence.
type Instruction struct {
	Addr     uint64 `json:"addr"`
	Bytes    string `json:"bytes"`              // hex
	Mnemonic string `json:"mnemonic,omitempty"` // e.g. "vpdpbusd", where the decoder names it
	Encoding string `json:"encoding"`           // e.g. "EVEX.512.66.0F38.W0 50"
	Needs    string `json:"needs"`              // e.g. "AVX512F+AVX512_VNNI"
	Section  string `json:"section"`
	Function string `json:"function,omitempty"` // the function symbol holding it, e.g. "scale.avx512f+0x1c"
}

// CUDARuntimeMajor returns the CUDA major version of the libcudart (or libcublas) the file
// needs, from DT_NEEDED, or 0.
func (b *Binary) CUDARuntimeMajor() int {
	for _, n := range b.Needed {
		for _, p := range []string{"libcudart.so.", "libcublas.so.", "libcublasLt.so."} {
			if v, ok := strings.CutPrefix(n, p); ok {
				maj, _, _ := strings.Cut(v, ".")
				if m, err := strconv.Atoi(maj); err == nil {
					return m
				}
			}
		}
	}
	return 0
}

// GGMLVariant returns the CPU variant of a ggml dynamic CPU backend
// (libggml-cpu-haswell.so → "haswell"), or "".
func (b *Binary) GGMLVariant() string {
	base := path.Base(b.Path)
	if v, ok := strings.CutPrefix(base, "libggml-cpu-"); ok {
		if i := strings.Index(v, ".so"); i > 0 {
			return v[:i]
		}
	}
	return ""
}

// ErrNotELF is returned by ReadBinary for files that are not ELF.
var ErrNotELF = errors.New("not an ELF file")

// IsELF reports whether data starts with the ELF magic.
func IsELF(head []byte) bool { return bytes.HasPrefix(head, []byte(elf.ELFMAG)) }

var syclDevice = regexp.MustCompile(`-device[ =]([a-z][a-z0-9_.-]{2,30})`)

// ReadBinary reads an ELF file's facts, decoding its code. name is how reports refer to it.
func ReadBinary(name string, r io.ReaderAt) (*Binary, error) {
	return readBinary(name, r, true)
}

func readBinary(name string, r io.ReaderAt, decode bool) (*Binary, error) {
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || !IsELF(magic[:]) {
		return nil, fmt.Errorf("%s: %w", name, ErrNotELF)
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("reading ELF %s: %w", name, err)
	}
	defer f.Close()
	b := &Binary{Path: name, Machine: machineName(f.Machine)}
	if libs, err := f.ImportedLibraries(); err == nil {
		b.Needed = libs
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		if rp, err := f.DynString(tag); err == nil && len(rp) > 0 {
			b.Runpath = strings.Split(rp[0], ":")
			b.RPath = tag == elf.DT_RPATH
			break
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b.Executable = true
		}
	}
	if sn, err := f.DynString(elf.DT_SONAME); err == nil && len(sn) > 0 {
		b.SONAME = sn[0]
	}
	if decode && f.Class == elf.ELFCLASS64 && f.Machine == elf.EM_X86_64 {
		code, err := scanCode(f, b.GGMLVariant() != "")
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		b.Code = code
	}
	isSYCL := strings.Contains(path.Base(name), "sycl")
	for _, s := range f.Sections {
		switch {
		case s.Name == ".nv_fatbin" && s.Type != elf.SHT_NOBITS:
			data, err := s.Data()
			if err != nil {
				return nil, fmt.Errorf("reading %s .nv_fatbin: %w", name, err)
			}
			entries, err := fatbin.Parse(data)
			b.Fatbin = entries
			if err != nil {
				b.FatbinError = err.Error()
			}
		case isSYCL && s.Type != elf.SHT_NOBITS && s.Flags&elf.SHF_EXECINSTR == 0:
			// Where an ahead-of-time SYCL build keeps its ocloc options ("-device bmg-g31")
			// is not confirmed on a real binary: search every data section.
			if data, err := s.Data(); err == nil {
				b.SYCLDevices = appendSYCLDevices(b.SYCLDevices, data)
				b.SYCL = b.SYCL || bytes.Contains(data, []byte("spir64"))
			}
		}
	}
	return b, nil
}

func appendSYCLDevices(have []string, data []byte) []string {
	for _, m := range syclDevice.FindAllSubmatch(data, -1) {
		d := string(m[1])
		found := false
		for _, h := range have {
			found = found || h == d
		}
		if !found {
			have = append(have, d)
		}
	}
	sort.Strings(have)
	return have
}

func machineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86-64"
	case elf.EM_AARCH64:
		return "aarch64"
	}
	return strings.TrimPrefix(m.String(), "EM_")
}

// scanCode decodes f's code. For a ggml CPU variant (variant set) it also follows the code
// that runs when ggml's loader only dlopens it to read its score.
func scanCode(f *elf.File, variant bool) (*CodeFacts, error) {
	facts := &CodeFacts{Extensions: map[string]int{}, Examples: map[x86.Ext][]Instruction{}}
	var spans []codeSpan
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		spans = append(spans, codeSpan{s.Name, s.Addr, data})
	}
	var dm *dispatchMap
	fromSections := len(spans) > 0
	if fromSections {
		dm = findDispatched(f, spans)
	} else {
		// No executable sections (section headers stripped, or never written): the loader
		// maps and runs the executable PT_LOAD segments regardless, so decode those.
		for i, p := range f.Progs {
			if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || p.Filesz == 0 {
				continue
			}
			if p.Filesz > 1<<32 {
				return nil, fmt.Errorf("segment %d: %d bytes of code is not a real file", i, p.Filesz)
			}
			data := make([]byte, p.Filesz)
			if _, err := p.ReadAt(data, 0); err != nil {
				return nil, fmt.Errorf("segment %d: %w", i, err)
			}
			spans = append(spans, codeSpan{fmt.Sprintf("PT_LOAD[%d]", i), p.Vaddr, data})
		}
	}
	// functions a runtime's own CPUID test picks (libstdc++'s std::random_device) count as
	// dispatched too
	if fromSections {
		if chosen, by := chosenFunctions(f); len(chosen) > 0 {
			if dm == nil {
				dm = &dispatchMap{regions: wholeSpans(spans)}
			}
			dm.regions = markChosen(dm.regions, spans, chosen)
			facts.CPUIDChosen = by
		}
	}
	var st, sd x86.Stats
	if dm == nil {
		for _, sp := range spans {
			st.Scan(sp.data, sp.addr)
		}
	} else {
		facts.IFuncResolvers = dm.resolvers
		for _, r := range dm.regions {
			sp := spans[r.span]
			code := sp.data[r.start-sp.addr : r.end-sp.addr]
			if r.dispatched {
				sd.Scan(code, r.start)
			} else {
				st.Scan(code, r.start)
			}
		}
		facts.DispatchedBytes = sd.Bytes
		facts.DispatchedExtensions = map[string]int{}
		facts.DispatchedExamples = map[x86.Ext][]Instruction{}
	}
	facts.Bytes, facts.Instructions, facts.DecodeErrors = st.Bytes+sd.Bytes, st.Insts+sd.Insts, st.Errors+sd.Errors
	where := func(a uint64) string {
		for _, sp := range spans {
			if a >= sp.addr && a < sp.addr+uint64(len(sp.data)) {
				return sp.name
			}
		}
		return ""
	}
	if st.Errors > 0 {
		facts.FirstDecodeError = st.FirstError
		facts.FirstDecodeErrorAt = fmt.Sprintf("%s+%#x: %x", where(st.FirstError), st.FirstError, st.FirstErrorBytes)
	}
	names := newSymbolizer(f)
	switch {
	case variant && fromSections:
		in := followInitCode(f, spans, names)
		facts.LoadUses, facts.LoadIndirect, facts.LoadError = in.uses, in.indirect, in.err
		facts.LoadExamples = in.examples
	case variant:
		facts.LoadError = "no section headers: its constructors and relocations cannot be read"
	}
	collect := func(st *x86.Stats, counts map[string]int, examples map[x86.Ext][]Instruction) {
		st.Used.Each(func(e x86.Ext) {
			counts[e.String()] = st.CountOf(e)
			for _, smp := range st.SamplesOf(e) {
				examples[e] = append(examples[e], Instruction{
					Addr:     smp.Addr,
					Bytes:    fmt.Sprintf("%x", smp.Code()),
					Mnemonic: smp.Inst.Name(),
					Encoding: smp.Inst.String(),
					Needs:    smp.Inst.Ext.String(),
					Section:  where(smp.Addr),
					Function: names.at(smp.Addr),
				})
			}
		})
	}
	facts.Uses = st.Used
	collect(&st, facts.Extensions, facts.Examples)
	if dm != nil {
		facts.Dispatched = sd.Used
		collect(&sd, facts.DispatchedExtensions, facts.DispatchedExamples)
	}
	return facts, nil
}

// symbolizer names the function symbol an address lies in.
type symbolizer struct {
	syms   []elf.Symbol
	byAddr []elf.Symbol // syms sorted by address, made by the first bounds call
}

func newSymbolizer(f *elf.File) *symbolizer {
	z := &symbolizer{}
	syms, err := f.Symbols()
	if err != nil || len(syms) == 0 {
		syms, _ = f.DynamicSymbols()
	}
	for _, s := range syms {
		if t := elf.ST_TYPE(s.Info); (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC) && s.Size > 0 && s.Section != elf.SHN_UNDEF {
			z.syms = append(z.syms, s)
		}
	}
	return z
}

// bounds returns the start and end of the function symbol holding a.
func (z *symbolizer) bounds(a uint64) (start, end uint64, ok bool) {
	if z.byAddr == nil {
		// a copy: at names an address by the symbols' order in the file
		z.byAddr = slices.Clone(z.syms)
		sort.Slice(z.byAddr, func(i, j int) bool { return z.byAddr[i].Value < z.byAddr[j].Value })
	}
	i := sort.Search(len(z.byAddr), func(i int) bool { return z.byAddr[i].Value > a })
	for j := i - 1; j >= 0 && j >= i-8; j-- { // symbols that alias or nest end near each other
		if s := z.byAddr[j]; a >= s.Value && a < s.Value+s.Size {
			return s.Value, s.Value + s.Size, true
		}
	}
	return 0, 0, false
}

// at returns "name+0xoff" for the function symbol holding a, or "".
func (z *symbolizer) at(a uint64) string {
	for _, s := range z.syms {
		if a >= s.Value && a < s.Value+s.Size {
			if a == s.Value {
				return s.Name
			}
			return fmt.Sprintf("%s+%#x", s.Name, a-s.Value)
		}
	}
	return ""
}
