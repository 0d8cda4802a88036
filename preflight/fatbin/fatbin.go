package fatbin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Magic starts every fat binary container.
const Magic = 0xBA55ED50

// Kind is what an entry holds.
type Kind uint16

// Entry kinds.
const (
	PTX   Kind = 1
	Cubin Kind = 2
)

// String names the kind as cuobjdump does (ptx, cubin).
func (k Kind) String() string {
	switch k {
	case PTX:
		return "ptx"
	case Cubin:
		return "cubin"
	}
	return "kind" + strconv.Itoa(int(k))
}

// Entry-header flag bits, read off nvcc 13.0 builds made for this purpose (see
// testdata/realbuild): 0x8000 is set on compressed payloads, 0x100000 on arch-specific
// (sm_90a, sm_120a) and 0x200000 on family-specific (sm_100f, sm_120f) code.
const (
	flagCompressed     = 0x8000
	flagArchSpecific   = 0x100000
	flagFamilySpecific = 0x200000
)

// minEntryHeader is the fixed part of an entry header; newer architectures append more.
const minEntryHeader = 0x40

// Entry is one PTX or cubin entry of a fat binary.
type Entry struct {
	Kind Kind `json:"kind"`
	// SM is the architecture number: 86 for sm_86 / compute_86, 120 for sm_120.
	SM int `json:"sm"`
	// ArchSpecific marks sm_XYa / compute_XYa code, which runs only on exactly that
	// compute capability.
	ArchSpecific bool `json:"archSpecific,omitempty"`
	// FamilySpecific marks sm_XYf / compute_XYf code.
	FamilySpecific bool `json:"familySpecific,omitempty"`
	Compressed     bool `json:"compressed,omitempty"`
	// Decompressed says a compressed payload was read (a zstd frame, as nvcc 13 writes).
	Decompressed bool `json:"decompressed,omitempty"`
	// Version is the entry's code version: the PTX ISA version (9.0) for PTX, the cubin
	// format version for cubins.
	VersionMajor int `json:"versionMajor"`
	VersionMinor int `json:"versionMinor"`
	// Offset is where the entry header starts within the parsed data.
	Offset int `json:"offset"`
	// HeaderSize and PayloadSize (padded, as stored) locate the payload.
	HeaderSize  int    `json:"headerSize"`
	PayloadSize int    `json:"payloadSize"`
	Flags       uint64 `json:"flags"`
	// Blob is the index of the container the entry sits in. nvcc writes one container per
	// translation unit (and one without kernels for -shared links): the driver loads each
	// on its own, so each needs code for the GPU.
	Blob int `json:"blob"`
	// Inspected says the payload was read for kernels; payloads compressed other than with
	// zstd (or not decompressing to their stated size) and ones that are neither an ELF cubin
	// nor PTX text are not.
	Inspected bool `json:"inspected"`
	// Kernels names the kernels an inspected payload defines: its cubin's .text.NAME
	// sections, its PTX's .entry NAME directives.
	Kernels []string `json:"kernels,omitempty"`
}

// Arch names the entry's architecture the way nvcc does: sm_90a for a cubin, compute_90
// for PTX, with an 'a' or 'f' suffix for arch- or family-specific code.
func (e Entry) Arch() string {
	p := "sm_"
	if e.Kind == PTX {
		p = "compute_"
	}
	return p + strconv.Itoa(e.SM) + e.suffix()
}

func (e Entry) suffix() string {
	switch {
	case e.ArchSpecific:
		return "a"
	case e.FamilySpecific:
		return "f"
	}
	return ""
}

// CuobjdumpName is the name `cuobjdump --list-elf/--list-ptx` gives the entry: base, its
// 1-based index among entries of its kind, sm_XY with an 'a' suffix for arch-specific code
// (cuobjdump 13.0 prints no suffix for family-specific code), and .cubin or .ptx.
func (e Entry) CuobjdumpName(base string, index int) string {
	ext, sfx := ".cubin", ""
	if e.Kind == PTX {
		ext = ".ptx"
	}
	if e.ArchSpecific {
		sfx = "a"
	}
	return fmt.Sprintf("%s.%d.sm_%d%s%s", base, index, e.SM, sfx, ext)
}

// Errors Parse returns.
var (
	ErrBadMagic  = errors.New("not a fat binary (bad magic)")
	ErrTruncated = errors.New("fat binary truncated")
	ErrMalformed = errors.New("malformed fat binary")
)

// Parse lists the entries of one or more concatenated fat binary containers, as found in
// an ELF file's .nv_fatbin section. Zero padding between containers is skipped. Compressed
// payloads are decompressed (zstd) only to read their kernels' names.
func Parse(data []byte) ([]Entry, error) {
	var out []Entry
	off, blob := 0, 0
	for {
		for off < len(data) && data[off] == 0 {
			off++
		}
		if off >= len(data) {
			return out, nil
		}
		if len(data)-off < 16 {
			return out, fmt.Errorf("container at %#x: %w", off, ErrTruncated)
		}
		if binary.LittleEndian.Uint32(data[off:]) != Magic {
			return out, fmt.Errorf("container at %#x: %w", off, ErrBadMagic)
		}
		hs := int(binary.LittleEndian.Uint16(data[off+6:]))
		size := binary.LittleEndian.Uint64(data[off+8:])
		if hs < 16 || hs > len(data)-off || uint64(len(data)-off-hs) < size {
			return out, fmt.Errorf("container at %#x (header %d, size %d, %d bytes left): %w", off, hs, size, len(data)-off, ErrTruncated)
		}
		end := off + hs + int(size)
		entries, err := parseEntries(data[:end], off+hs, blob)
		out = append(out, entries...)
		blob++
		if err != nil {
			return out, fmt.Errorf("container at %#x: %w", off, err)
		}
		off = end
	}
}

func parseEntries(data []byte, off, blob int) ([]Entry, error) {
	var out []Entry
	for off < len(data) {
		if len(data)-off < minEntryHeader {
			return out, fmt.Errorf("entry at %#x: %w", off, ErrTruncated)
		}
		h := data[off:]
		e := Entry{
			Kind:         Kind(binary.LittleEndian.Uint16(h[0:])),
			HeaderSize:   int(binary.LittleEndian.Uint32(h[4:])),
			VersionMinor: int(binary.LittleEndian.Uint16(h[0x18:])),
			VersionMajor: int(binary.LittleEndian.Uint16(h[0x1a:])),
			SM:           int(binary.LittleEndian.Uint32(h[0x1c:])),
			Flags:        binary.LittleEndian.Uint64(h[0x28:]),
			Offset:       off,
			Blob:         blob,
		}
		padded := binary.LittleEndian.Uint64(h[8:])
		if e.HeaderSize < minEntryHeader || e.HeaderSize > len(h) {
			return out, fmt.Errorf("entry at %#x: header size %d: %w", off, e.HeaderSize, ErrMalformed)
		}
		if padded > uint64(len(h)-e.HeaderSize) {
			return out, fmt.Errorf("entry at %#x: payload %d past the container end: %w", off, padded, ErrTruncated)
		}
		e.PayloadSize = int(padded)
		e.Compressed = e.Flags&flagCompressed != 0
		e.ArchSpecific = e.Flags&flagArchSpecific != 0
		e.FamilySpecific = e.Flags&flagFamilySpecific != 0
		payload := h[e.HeaderSize : e.HeaderSize+e.PayloadSize]
		if e.Compressed {
			// nvcc 13 compresses with zstd; the header holds the payload's exact size
			// (u32 at 0x10) and its size uncompressed (u32 at 0x38)
			n := int(binary.LittleEndian.Uint32(h[0x10:]))
			if n > 0 && n <= len(payload) {
				payload = payload[:n]
			}
			if raw, err := unzstd(payload, int(binary.LittleEndian.Uint32(h[0x38:]))); err == nil {
				e.Kernels, e.Inspected = kernels(e.Kind, raw)
				e.Decompressed = e.Inspected
			}
		} else {
			e.Kernels, e.Inspected = kernels(e.Kind, payload)
		}
		out = append(out, e)
		off += e.HeaderSize + e.PayloadSize
	}
	return out, nil
}

// CC is a compute capability, e.g. 12.0.
type CC struct{ Major, Minor int }

// ParseCC parses "12.0" (or "120", or "sm_120").
func ParseCC(s string) (CC, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "sm_")
	if maj, min, ok := strings.Cut(t, "."); ok {
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		if err1 != nil || err2 != nil || a < 0 || b < 0 || b > 9 {
			return CC{}, fmt.Errorf("compute capability %q: want major.minor such as 12.0", s)
		}
		return CC{a, b}, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 10 {
		return CC{}, fmt.Errorf("compute capability %q: want major.minor such as 12.0", s)
	}
	return CC{n / 10, n % 10}, nil
}

// String formats the capability as major.minor.
func (c CC) String() string { return fmt.Sprintf("%d.%d", c.Major, c.Minor) }

// SM returns the architecture number (120 for 12.0).
func (c CC) SM() int { return c.Major*10 + c.Minor }

// CC returns the entry's compute capability.
func (e Entry) CC() CC { return CC{e.SM / 10, e.SM % 10} }

// RunsOn says whether a cubin entry can be loaded by a device of compute capability dev
// as it is: the same major version and a minor at most the device's, or exactly the
// device's for arch-specific code. PTX entries never run as they are; see JITsOn.
func (e Entry) RunsOn(dev CC) bool {
	if e.Kind != Cubin {
		return false
	}
	c := e.CC()
	if e.ArchSpecific {
		return c == dev
	}
	return c.Major == dev.Major && c.Minor <= dev.Minor
}

// JITsOn says whether a PTX entry can be compiled for a device of compute capability dev:
// its capability at most the device's (exactly the device's for arch-specific PTX, the
// same major for family-specific PTX). Whether the driver understands the PTX ISA version
// is a separate question: see MinDriverCUDA.
func (e Entry) JITsOn(dev CC) bool {
	if e.Kind != PTX {
		return false
	}
	c := e.CC()
	switch {
	case e.ArchSpecific:
		return c == dev
	case e.FamilySpecific:
		return c.Major == dev.Major && c.Minor <= dev.Minor
	}
	return c.SM() <= dev.SM()
}

// ptxISA maps PTX ISA versions to the CUDA release that introduced them: a driver must
// support at least that CUDA version to JIT the PTX (CUDA error 222 otherwise).
var ptxISA = map[[2]int][2]int{
	{7, 0}: {11, 0}, {7, 1}: {11, 1}, {7, 2}: {11, 2}, {7, 3}: {11, 3}, {7, 4}: {11, 4},
	{7, 5}: {11, 5}, {7, 6}: {11, 6}, {7, 7}: {11, 7}, {7, 8}: {11, 8},
	{8, 0}: {12, 0}, {8, 1}: {12, 1}, {8, 2}: {12, 2}, {8, 3}: {12, 3}, {8, 4}: {12, 4},
	{8, 5}: {12, 5}, {8, 6}: {12, 7}, {8, 7}: {12, 8}, {8, 8}: {12, 9},
	{9, 0}: {13, 0}, {9, 1}: {13, 1}, {9, 2}: {13, 2},
}

// MinDriverCUDA returns the CUDA version (major, minor) a driver must support to JIT this
// PTX entry, from its PTX ISA version; ok is false for ISA versions the table does not know.
func (e Entry) MinDriverCUDA() (major, minor int, ok bool) {
	if e.Kind != PTX {
		return 0, 0, false
	}
	v, ok := ptxISA[[2]int{e.VersionMajor, e.VersionMinor}]
	return v[0], v[1], ok
}
