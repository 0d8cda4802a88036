package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// Limits bound what a reader accepts, so that a file whose length fields
// lie gives an error instead of a huge allocation. Counts are also checked
// against the bytes left in the file.
type Limits struct {
	// MaxMetadataBytes bounds the header: key/value pairs plus tensor infos.
	// The memory the decoded values take is bounded by twice this.
	MaxMetadataBytes int64
	// MaxString bounds one string's length in bytes.
	MaxString uint64
	// MaxArray bounds one array's element count.
	MaxArray uint64
	// MaxKV and MaxTensors bound the counts in the header.
	MaxKV, MaxTensors uint64
	// MaxDepth bounds the nesting of arrays of arrays.
	MaxDepth int
}

// DefaultLimits are generous for real models (a 262k-token vocabulary with
// its merges takes about 10 MiB) and small enough to be harmless.
var DefaultLimits = Limits{
	MaxMetadataBytes: 64 << 20,
	MaxString:        16 << 20,
	MaxArray:         16 << 20,
	MaxKV:            1 << 20,
	MaxTensors:       1 << 20,
	MaxDepth:         8,
}

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor; its data starts at File.DataOffset +
// Offset.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   TensorType
	Offset uint64
}

// Elements is the tensor's number of elements.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Size is the tensor's data size in bytes, and false when its type is
// unknown or the shape is not a whole number of blocks.
func (t TensorInfo) Size() (uint64, bool) {
	tr, ok := tensorTypes[t.Type]
	if !ok || len(t.Dims) == 0 && tr.block != 1 || len(t.Dims) > 0 && t.Dims[0]%tr.block != 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(t.Elements()/tr.block, tr.size)
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return lo, true
}

// File is a GGUF file's header: everything but the tensor data.
type File struct {
	// Version is the GGUF version, 2 or 3.
	Version uint32
	// ByteOrder is binary.LittleEndian, or binary.BigEndian for files
	// written for big-endian hosts.
	ByteOrder binary.ByteOrder
	// KV holds the metadata in file order.
	KV []KV
	// Tensors holds the tensor infos in file order.
	Tensors []TensorInfo
	// Alignment is general.alignment or DefaultAlignment.
	Alignment uint64
	// DataOffset is where the tensor data section starts.
	DataOffset int64
	// DataSize is the data section's size (each tensor padded to
	// Alignment), or -1 when a tensor's type is unknown.
	DataSize int64
	// Size is the file's size.
	Size int64

	index map[string]int
}

// Get returns the value of key.
func (f *File) Get(key string) (Value, bool) {
	if i, ok := f.index[key]; ok {
		return f.KV[i].Value, true
	}
	return Value{}, false
}

// Open reads the header of the GGUF file at path.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	f, err := Read(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("reading gguf %s: %w", path, err)
	}
	return f, nil
}

// Read reads a GGUF header from r, whose size is size, with DefaultLimits.
func Read(r io.ReaderAt, size int64) (*File, error) {
	return DefaultLimits.Read(r, size)
}

// ErrNotGGUF is returned for input that does not start with the GGUF magic.
var ErrNotGGUF = errors.New("not a GGUF file")

// Read reads a GGUF header from r, whose size is size. It reads only the
// header, never tensor data.
func (l Limits) Read(r io.ReaderAt, size int64) (*File, error) {
	d := &decoder{
		r:      bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10),
		size:   size,
		limits: l,
		order:  binary.LittleEndian,
	}
	f, err := d.file()
	if err != nil {
		return nil, fmt.Errorf("at offset %d: %w", d.pos, err)
	}
	return f, nil
}

type decoder struct {
	r      *bufio.Reader
	pos    int64
	size   int64
	limits Limits
	order  binary.ByteOrder
	buf    [8]byte
	// cost estimates the memory the decoded values hold, so that many
	// small elements (an empty string is 8 bytes in the file and 16 in
	// memory) cannot multiply the header's size.
	cost int64
}

func (d *decoder) spend(n int64) error {
	d.cost += n
	if d.cost > 2*d.limits.MaxMetadataBytes {
		return fmt.Errorf("metadata would take more than %d bytes of memory", 2*d.limits.MaxMetadataBytes)
	}
	return nil
}

func (d *decoder) file() (*File, error) {
	var magic [4]byte
	if err := d.full(magic[:]); err != nil {
		return nil, ErrNotGGUF
	}
	if string(magic[:]) != Magic {
		return nil, fmt.Errorf("%w: magic %q", ErrNotGGUF, magic[:])
	}
	raw, err := d.fixed(4)
	if err != nil {
		return nil, fmt.Errorf("reading version: %w", err)
	}
	version := binary.LittleEndian.Uint32(raw)
	// A big-endian file has its version in the high bytes when read
	// little-endian (gguf.cpp and gguf-py detect it the same way).
	if version&0xffff == 0 && version != 0 {
		d.order = binary.BigEndian
		version = binary.BigEndian.Uint32(raw)
	}
	switch version {
	case 2, 3:
	case 1:
		return nil, fmt.Errorf("GGUF version 1 is not supported (llama.cpp dropped it too)")
	default:
		return nil, fmt.Errorf("unsupported GGUF version %d", version)
	}
	f := &File{Version: version, ByteOrder: d.order, Alignment: DefaultAlignment, Size: d.size, index: map[string]int{}}
	nTensors, err := d.u64()
	if err != nil {
		return nil, fmt.Errorf("reading tensor count: %w", err)
	}
	nKV, err := d.u64()
	if err != nil {
		return nil, fmt.Errorf("reading metadata count: %w", err)
	}
	// The smallest key/value pair is a 1-byte key with a uint8 value
	// (8+1+4+1 bytes); the smallest tensor info a 1-byte name, no dims
	// (8+1+4+4+8).
	if err := d.count("metadata count", nKV, 14, d.limits.MaxKV); err != nil {
		return nil, err
	}
	if err := d.count("tensor count", nTensors, 25, d.limits.MaxTensors); err != nil {
		return nil, err
	}
	f.KV = make([]KV, 0, min(nKV, 1024))
	for i := uint64(0); i < nKV; i++ {
		key, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("reading key %d: %w", i, err)
		}
		if key == "" {
			return nil, fmt.Errorf("key %d is empty", i)
		}
		if _, dup := f.index[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		t, err := d.u32()
		if err != nil {
			return nil, fmt.Errorf("reading type of %q: %w", key, err)
		}
		v, err := d.value(Type(t), 0)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", key, err)
		}
		f.index[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.Interface().(uint32)
		if !isU32 {
			return nil, fmt.Errorf("general.alignment is %s, want uint32", v.Type())
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %d is not a power of two", a)
		}
		f.Alignment = uint64(a)
	}
	f.Tensors = make([]TensorInfo, 0, min(nTensors, 4096))
	names := make(map[string]struct{}, min(nTensors, 4096))
	for i := uint64(0); i < nTensors; i++ {
		t, err := d.tensorInfo()
		if err != nil {
			return nil, fmt.Errorf("reading tensor info %d: %w", i, err)
		}
		if _, dup := names[t.Name]; dup {
			return nil, fmt.Errorf("duplicate tensor %q", t.Name)
		}
		names[t.Name] = struct{}{}
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = d.pos
	if nTensors > 0 {
		f.DataOffset = int64(pad(uint64(d.pos), f.Alignment))
	}
	return f, f.checkData()
}

// checkData computes DataSize and checks that tensors are laid out as
// llama.cpp requires (in order, each at the padded end of the previous one)
// and that the file holds all their data.
func (f *File) checkData() error {
	var end uint64
	for _, t := range f.Tensors {
		size, ok := t.Size()
		if !ok {
			if !t.Type.Known() {
				f.DataSize = -1
				return nil
			}
			return fmt.Errorf("tensor %q: shape %v is not a whole number of %s blocks or is too large", t.Name, t.Dims, t.Type)
		}
		if t.Offset != end {
			return fmt.Errorf("tensor %q at data offset %d, want %d", t.Name, t.Offset, end)
		}
		padded := pad(size, f.Alignment)
		if padded < size || end+padded < end || end+padded > math.MaxInt64 {
			return fmt.Errorf("tensor %q: size overflows", t.Name)
		}
		end += padded
	}
	f.DataSize = int64(end)
	// The last tensor's padding may be missing from the file.
	if len(f.Tensors) > 0 {
		last := f.Tensors[len(f.Tensors)-1]
		size, _ := last.Size()
		need := uint64(f.DataOffset) + last.Offset + size
		if need < uint64(f.DataOffset) || need > uint64(f.Size) {
			return fmt.Errorf("truncated: tensor data ends at byte %d, file has %d", need, f.Size)
		}
	}
	return nil
}

func pad(x, align uint64) uint64 {
	return x + (align-x%align)%align
}

func (d *decoder) remaining() uint64 {
	if d.pos >= d.size {
		return 0
	}
	return uint64(d.size - d.pos)
}

// count checks a count against the bytes left (each element needs at
// least minSize bytes) and against max.
func (d *decoder) count(what string, n uint64, minSize uint64, max uint64) error {
	if n > max {
		return fmt.Errorf("%s %d exceeds the limit %d", what, n, max)
	}
	if minSize > 0 && n > d.remaining()/minSize {
		return fmt.Errorf("%s %d cannot fit in the %d bytes left", what, n, d.remaining())
	}
	return nil
}

func (d *decoder) full(b []byte) error {
	if d.pos+int64(len(b)) > d.limits.MaxMetadataBytes {
		return fmt.Errorf("header exceeds the limit of %d bytes", d.limits.MaxMetadataBytes)
	}
	n, err := io.ReadFull(d.r, b)
	d.pos += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (d *decoder) fixed(n int) ([]byte, error) {
	if d.pos+int64(n) <= d.limits.MaxMetadataBytes {
		if b, err := d.r.Peek(n); err == nil {
			copy(d.buf[:n], b)
			d.r.Discard(n)
			d.pos += int64(n)
			return d.buf[:n], nil
		}
	}
	b := d.buf[:n]
	err := d.full(b)
	return b, err
}

func (d *decoder) u8() (uint8, error) {
	b, err := d.fixed(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (d *decoder) u16() (uint16, error) {
	b, err := d.fixed(2)
	if err != nil {
		return 0, err
	}
	return d.order.Uint16(b), nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.fixed(4)
	if err != nil {
		return 0, err
	}
	return d.order.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.fixed(8)
	if err != nil {
		return 0, err
	}
	return d.order.Uint64(b), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > d.limits.MaxString {
		return "", fmt.Errorf("string length %d exceeds the limit %d", n, d.limits.MaxString)
	}
	if n > d.remaining() {
		return "", fmt.Errorf("string length %d exceeds the %d bytes left", n, d.remaining())
	}
	if err := d.spend(16 + int64(n)); err != nil {
		return "", err
	}
	b := make([]byte, n)
	if err := d.full(b); err != nil {
		return "", err
	}
	return string(b), nil
}

// strings reads an array of n strings as its encoded bytes, validating
// every length, and leaves splitting them into Go strings to the first
// caller that asks (see lazyStrings): a 200k-token vocabulary then costs
// one pointer-free allocation while the header is read.
func (d *decoder) strings(n uint64) (Value, error) {
	raw := make([]byte, 0, min(n*24, d.remaining()))
	for i := uint64(0); i < n; i++ {
		lb, err := d.fixed(8)
		if err != nil {
			return Value{}, fmt.Errorf("array element %d: %w", i, err)
		}
		l := d.order.Uint64(lb)
		if l > d.limits.MaxString {
			return Value{}, fmt.Errorf("array element %d: string length %d exceeds the limit %d", i, l, d.limits.MaxString)
		}
		if l > d.remaining() {
			return Value{}, fmt.Errorf("array element %d: string length %d exceeds the %d bytes left", i, l, d.remaining())
		}
		if err := d.spend(16 + int64(l)); err != nil {
			return Value{}, err
		}
		raw = append(raw, lb...)
		if b, err := d.r.Peek(int(l)); err == nil && d.pos+int64(l) <= d.limits.MaxMetadataBytes {
			raw = append(raw, b...)
			d.r.Discard(int(l))
			d.pos += int64(l)
			continue
		}
		start := len(raw)
		raw = append(raw, make([]byte, l)...)
		if err := d.full(raw[start:]); err != nil {
			return Value{}, fmt.Errorf("array element %d: %w", i, err)
		}
	}
	return Value{typ: TypeArray, elem: TypeString, v: &lazyStrings{raw: raw, n: int(n), order: d.order}}, nil
}

func (d *decoder) value(t Type, depth int) (Value, error) {
	v := Value{typ: t}
	var err error
	switch t {
	case TypeUint8:
		v.v, err = d.u8()
	case TypeInt8:
		var x uint8
		x, err = d.u8()
		v.v = int8(x)
	case TypeUint16:
		v.v, err = d.u16()
	case TypeInt16:
		var x uint16
		x, err = d.u16()
		v.v = int16(x)
	case TypeUint32:
		v.v, err = d.u32()
	case TypeInt32:
		var x uint32
		x, err = d.u32()
		v.v = int32(x)
	case TypeFloat32:
		var x uint32
		x, err = d.u32()
		v.v = math.Float32frombits(x)
	case TypeBool:
		var x uint8
		x, err = d.u8()
		if err == nil && x > 1 {
			err = fmt.Errorf("bool byte %d, want 0 or 1", x)
		}
		v.v = x == 1
	case TypeString:
		v.v, err = d.str()
	case TypeUint64:
		v.v, err = d.u64()
	case TypeInt64:
		var x uint64
		x, err = d.u64()
		v.v = int64(x)
	case TypeFloat64:
		var x uint64
		x, err = d.u64()
		v.v = math.Float64frombits(x)
	case TypeArray:
		return d.array(depth)
	default:
		return v, fmt.Errorf("unknown value type %d", uint32(t))
	}
	return v, err
}

func (d *decoder) array(depth int) (Value, error) {
	if depth >= d.limits.MaxDepth {
		return Value{}, fmt.Errorf("arrays nested deeper than %d", d.limits.MaxDepth)
	}
	// A Value in a []Value plus its slice header.
	if err := d.spend(64); err != nil {
		return Value{}, err
	}
	et, err := d.u32()
	if err != nil {
		return Value{}, fmt.Errorf("reading array type: %w", err)
	}
	elem := Type(et)
	if !elem.valid() {
		return Value{}, fmt.Errorf("unknown array element type %d", et)
	}
	n, err := d.u64()
	if err != nil {
		return Value{}, fmt.Errorf("reading array length: %w", err)
	}
	minSize := uint64(elem.size())
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if err := d.count("array length", n, minSize, d.limits.MaxArray); err != nil {
		return Value{}, err
	}
	// Slices grow as elements arrive, so memory follows the bytes read,
	// not the length field.
	capHint := int(min(n, 4096))
	switch elem {
	case TypeString:
		return d.strings(n)
	case TypeArray:
		a := make([]Value, 0, capHint)
		for i := uint64(0); i < n; i++ {
			v, err := d.array(depth + 1)
			if err != nil {
				return Value{}, fmt.Errorf("array element %d: %w", i, err)
			}
			a = append(a, v)
		}
		return Array(a), nil
	}
	// Fixed-size elements: n*size bytes are known to be in the file.
	if err := d.spend(int64(2 * n * minSize)); err != nil {
		return Value{}, err
	}
	raw := make([]byte, n*minSize)
	if err := d.full(raw); err != nil {
		return Value{}, err
	}
	return decodeFixed(elem, raw, d.order)
}

func decodeFixed(elem Type, raw []byte, o binary.ByteOrder) (Value, error) {
	switch elem {
	case TypeUint8:
		return Array(raw), nil
	case TypeInt8:
		return Array(convert(raw, func(b byte) int8 { return int8(b) })), nil
	case TypeBool:
		for i, b := range raw {
			if b > 1 {
				return Value{}, fmt.Errorf("array element %d: bool byte %d, want 0 or 1", i, b)
			}
		}
		return Array(convert(raw, func(b byte) bool { return b == 1 })), nil
	case TypeUint16, TypeInt16:
		u := make([]uint16, len(raw)/2)
		for i := range u {
			u[i] = o.Uint16(raw[2*i:])
		}
		if elem == TypeUint16 {
			return Array(u), nil
		}
		return Array(convert(u, func(x uint16) int16 { return int16(x) })), nil
	case TypeUint32, TypeInt32, TypeFloat32:
		u := make([]uint32, len(raw)/4)
		for i := range u {
			u[i] = o.Uint32(raw[4*i:])
		}
		switch elem {
		case TypeUint32:
			return Array(u), nil
		case TypeInt32:
			return Array(convert(u, func(x uint32) int32 { return int32(x) })), nil
		}
		return Array(convert(u, math.Float32frombits)), nil
	default: // 64-bit
		u := make([]uint64, len(raw)/8)
		for i := range u {
			u[i] = o.Uint64(raw[8*i:])
		}
		switch elem {
		case TypeUint64:
			return Array(u), nil
		case TypeInt64:
			return Array(convert(u, func(x uint64) int64 { return int64(x) })), nil
		}
		return Array(convert(u, math.Float64frombits)), nil
	}
}

// convert returns f of every element of s, in order.
func convert[S, T any](s []S, f func(S) T) []T {
	out := make([]T, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// maxTensorName is ggml's GGML_MAX_NAME; names must be shorter.
const maxTensorName = 64

func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str(); err != nil {
		return t, fmt.Errorf("reading name: %w", err)
	}
	if len(t.Name) >= maxTensorName {
		return t, fmt.Errorf("tensor name %q is %d bytes, want fewer than %d", t.Name, len(t.Name), maxTensorName)
	}
	nDims, err := d.u32()
	if err != nil {
		return t, fmt.Errorf("tensor %q: reading dimension count: %w", t.Name, err)
	}
	if nDims > maxDims {
		return t, fmt.Errorf("tensor %q has %d dimensions, at most %d allowed", t.Name, nDims, maxDims)
	}
	t.Dims = make([]uint64, nDims)
	elems := uint64(1)
	for i := range t.Dims {
		if t.Dims[i], err = d.u64(); err != nil {
			return t, fmt.Errorf("tensor %q: reading dimension %d: %w", t.Name, i, err)
		}
		// ggml stores dimensions as int64 and needs their product to fit.
		if t.Dims[i] > math.MaxInt64 || t.Dims[i] != 0 && elems > math.MaxInt64/t.Dims[i] {
			return t, fmt.Errorf("tensor %q: shape %v overflows", t.Name, t.Dims[:i+1])
		}
		elems *= t.Dims[i]
	}
	typ, err := d.u32()
	if err != nil {
		return t, fmt.Errorf("tensor %q: reading type: %w", t.Name, err)
	}
	t.Type = TensorType(typ)
	if t.Offset, err = d.u64(); err != nil {
		return t, fmt.Errorf("tensor %q: reading offset: %w", t.Name, err)
	}
	return t, nil
}
