package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Tensor is a tensor to write: its info and its raw data in the tensor
// type's layout.
type Tensor struct {
	Name string
	Type TensorType
	Dims []uint64
	Data []byte
}

// Builder assembles a GGUF file in memory and writes it out.
type Builder struct {
	// Version is the GGUF version to write, 2 or 3; 0 means 3.
	Version uint32
	// BigEndian writes a file for big-endian hosts.
	BigEndian bool
	// KV is the metadata, written in this order.
	KV []KV
	// Tensors are written in this order.
	Tensors []Tensor
}

// Set appends key with value, or replaces it if it is already set.
func (b *Builder) Set(key string, v Value) {
	for i := range b.KV {
		if b.KV[i].Key == key {
			b.KV[i].Value = v
			return
		}
	}
	b.KV = append(b.KV, KV{Key: key, Value: v})
}

// Add appends a tensor.
func (b *Builder) Add(t Tensor) { b.Tensors = append(b.Tensors, t) }

// WriteFile writes the file to path whole: through a temporary file beside it, renamed into
// place (mode 0644).
func (b *Builder) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gguf-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	if _, err := b.WriteTo(w); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Replace puts t in place of the tensor of its name, or adds it.
func (b *Builder) Replace(t Tensor) {
	for i := range b.Tensors {
		if b.Tensors[i].Name == t.Name {
			b.Tensors[i] = t
			return
		}
	}
	b.Add(t)
}

func (b *Builder) alignment() (uint64, error) {
	for _, kv := range b.KV {
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.Interface().(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return 0, fmt.Errorf("general.alignment must be a uint32 power of two, got %v", kv.Value.Interface())
			}
			return uint64(a), nil
		}
	}
	return DefaultAlignment, nil
}

// WriteTo writes the file to w.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	e, align, err := b.writeHeader(w, true)
	if err != nil {
		return e.n, err
	}
	for _, t := range b.Tensors {
		e.bytes(t.Data)
		e.zeros(pad(uint64(len(t.Data)), align) - uint64(len(t.Data)))
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

// writeHeader writes everything before the tensor data, padding included.
// With checkData false, tensors need no Data, so a header for any size of
// model can be written.
func (b *Builder) writeHeader(w io.Writer, checkData bool) (*encoder, uint64, error) {
	e := &encoder{w: bufio.NewWriterSize(w, 64<<10), order: binary.LittleEndian}
	align, err := b.alignment()
	if err != nil {
		return e, 0, err
	}
	version := b.Version
	if version == 0 {
		version = 3
	}
	if version != 2 && version != 3 {
		return e, 0, fmt.Errorf("cannot write GGUF version %d", version)
	}
	if b.BigEndian {
		e.order = binary.BigEndian
	}
	e.bytes([]byte(Magic))
	e.u32(version)
	e.u64(uint64(len(b.Tensors)))
	e.u64(uint64(len(b.KV)))
	for _, kv := range b.KV {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	var offset uint64
	for _, t := range b.Tensors {
		info := TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type}
		size, ok := info.Size()
		if !ok {
			return e, 0, fmt.Errorf("tensor %q: cannot size %s %v", t.Name, t.Type, t.Dims)
		}
		if checkData && uint64(len(t.Data)) != size {
			return e, 0, fmt.Errorf("tensor %q: %d data bytes, want %d for %s %v", t.Name, len(t.Data), size, t.Type, t.Dims)
		}
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offset)
		offset += pad(size, align)
	}
	if len(b.Tensors) > 0 {
		e.zeros(pad(uint64(e.n), align) - uint64(e.n))
	}
	return e, align, e.err
}

type encoder struct {
	w     *bufio.Writer
	order binary.ByteOrder
	n     int64
	err   error
	buf   [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) u8(x uint8)   { e.bytes([]byte{x}) }
func (e *encoder) u16(x uint16) { e.order.PutUint16(e.buf[:2], x); e.bytes(e.buf[:2]) }
func (e *encoder) u32(x uint32) { e.order.PutUint32(e.buf[:4], x); e.bytes(e.buf[:4]) }
func (e *encoder) u64(x uint64) { e.order.PutUint64(e.buf[:8], x); e.bytes(e.buf[:8]) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

func (e *encoder) value(v Value) {
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		e.array(v)
	}
}

func (e *encoder) array(v Value) {
	if v.typ != TypeArray {
		if e.err == nil {
			e.err = errors.New("value with no content")
		}
		return
	}
	e.u32(uint32(v.elem))
	e.u64(uint64(v.Len()))
	switch a := v.v.(type) {
	case []uint8:
		e.bytes(a)
	case []int8:
		for _, x := range a {
			e.u8(uint8(x))
		}
	case []uint16:
		for _, x := range a {
			e.u16(x)
		}
	case []int16:
		for _, x := range a {
			e.u16(uint16(x))
		}
	case []uint32:
		for _, x := range a {
			e.u32(x)
		}
	case []int32:
		for _, x := range a {
			e.u32(uint32(x))
		}
	case []float32:
		for _, x := range a {
			e.u32(math.Float32bits(x))
		}
	case []bool:
		for _, x := range a {
			e.value(Bool(x))
		}
	case []string:
		for _, x := range a {
			e.str(x)
		}
	case []uint64:
		for _, x := range a {
			e.u64(x)
		}
	case []int64:
		for _, x := range a {
			e.u64(uint64(x))
		}
	case []float64:
		for _, x := range a {
			e.u64(math.Float64bits(x))
		}
	case []Value:
		for _, x := range a {
			e.array(x)
		}
	case *lazyStrings:
		if a.order == e.order {
			e.bytes(a.raw)
			return
		}
		for _, x := range a.strings() {
			e.str(x)
		}
	}
}
