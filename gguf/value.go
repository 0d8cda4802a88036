package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"sync"
)

// lazyStrings is a string array as read from a file: the encoded elements
// (a uint64 length and the bytes, in the file's byte order), split into
// Go strings on first use.
type lazyStrings struct {
	raw   []byte
	n     int
	order binary.ByteOrder

	once sync.Once
	vals []string
}

func (l *lazyStrings) strings() []string {
	l.once.Do(func() {
		all := string(l.raw)
		l.vals = make([]string, l.n)
		off := 0
		for i := range l.vals {
			n := int(l.order.Uint64(l.raw[off:]))
			off += 8
			l.vals[i] = all[off : off+n]
			off += n
		}
	})
	return l.vals
}

// Type is a GGUF metadata value type.
type Type uint32

// The metadata value types, numbered as in the GGUF specification.
const (
	TypeUint8   Type = 0
	TypeInt8    Type = 1
	TypeUint16  Type = 2
	TypeInt16   Type = 3
	TypeUint32  Type = 4
	TypeInt32   Type = 5
	TypeFloat32 Type = 6
	TypeBool    Type = 7
	TypeString  Type = 8
	TypeArray   Type = 9
	TypeUint64  Type = 10
	TypeInt64   Type = 11
	TypeFloat64 Type = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size type, or 0 for strings and arrays.
func (t Type) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t Type) valid() bool { return t <= TypeFloat64 }

// Value is one metadata value. Scalars hold a Go value of the matching
// type (uint8 ... float64, bool, string). Arrays hold a typed slice
// ([]uint8 ... []float64, []bool, []string), or []Value when the elements
// are themselves arrays.
type Value struct {
	typ  Type
	elem Type
	v    any
}

// Type is the value's type; TypeArray for arrays.
func (v Value) Type() Type { return v.typ }

// Elem is the element type of an array value.
func (v Value) Elem() Type { return v.elem }

// Interface returns the underlying Go value.
func (v Value) Interface() any {
	if l, ok := v.v.(*lazyStrings); ok {
		return l.strings()
	}
	return v.v
}

// Len is the number of elements of an array value, 0 for scalars.
func (v Value) Len() int {
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	case *lazyStrings:
		return a.n
	}
	return 0
}

// AsUint returns an integer scalar as uint64; false for other types and
// negative values.
func (v Value) AsUint() (uint64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8, int16, int32, int64:
		i, _ := v.AsInt()
		if i < 0 {
			return 0, false
		}
		return uint64(i), true
	}
	return 0, false
}

// AsInt returns an integer scalar as int64; false for other types and
// values above math.MaxInt64.
func (v Value) AsInt() (int64, bool) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8, uint16, uint32, uint64:
		u, _ := v.AsUint()
		if u > math.MaxInt64 {
			return 0, false
		}
		return int64(u), true
	}
	return 0, false
}

// AsFloat returns a numeric scalar as float64.
func (v Value) AsFloat() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.AsInt(); ok {
		return float64(i), true
	}
	if u, ok := v.AsUint(); ok {
		return float64(u), true
	}
	return 0, false
}

// AsBool returns a bool scalar.
func (v Value) AsBool() (bool, bool) {
	b, ok := v.v.(bool)
	return b, ok
}

// AsString returns a string scalar.
func (v Value) AsString() (string, bool) {
	s, ok := v.v.(string)
	return s, ok
}

// AsStrings returns an array of strings.
func (v Value) AsStrings() ([]string, bool) {
	s, ok := v.Interface().([]string)
	return s, ok
}

// Equal reports whether two values have the same type and contents.
func (v Value) Equal(w Value) bool {
	return v.typ == w.typ && v.elem == w.elem && equalAny(v.Interface(), w.Interface())
}

func equalAny(a, b any) bool {
	av, aok := a.([]Value)
	bv, bok := b.([]Value)
	if aok != bok {
		return false
	}
	if !aok {
		return reflect.DeepEqual(a, b)
	}
	if len(av) != len(bv) {
		return false
	}
	for i := range av {
		if !av[i].Equal(bv[i]) {
			return false
		}
	}
	return true
}

// Scalar constructors.

// Uint8 makes a uint8 value.
func Uint8(x uint8) Value { return Value{typ: TypeUint8, v: x} }

// Int8 makes an int8 value.
func Int8(x int8) Value { return Value{typ: TypeInt8, v: x} }

// Uint16 makes a uint16 value.
func Uint16(x uint16) Value { return Value{typ: TypeUint16, v: x} }

// Int16 makes an int16 value.
func Int16(x int16) Value { return Value{typ: TypeInt16, v: x} }

// Uint32 makes a uint32 value.
func Uint32(x uint32) Value { return Value{typ: TypeUint32, v: x} }

// Int32 makes an int32 value.
func Int32(x int32) Value { return Value{typ: TypeInt32, v: x} }

// Float32 makes a float32 value.
func Float32(x float32) Value { return Value{typ: TypeFloat32, v: x} }

// Bool makes a bool value.
func Bool(x bool) Value { return Value{typ: TypeBool, v: x} }

// String makes a string value.
func String(x string) Value { return Value{typ: TypeString, v: x} }

// Uint64 makes a uint64 value.
func Uint64(x uint64) Value { return Value{typ: TypeUint64, v: x} }

// Int64 makes an int64 value.
func Int64(x int64) Value { return Value{typ: TypeInt64, v: x} }

// Float64 makes a float64 value.
func Float64(x float64) Value { return Value{typ: TypeFloat64, v: x} }

// Array makes an array value from a typed slice ([]uint8 ... []float64,
// []bool, []string) or from a []Value whose elements are all arrays.
// It panics on any other argument, which is a programming error.
func Array(slice any) Value {
	var elem Type
	switch a := slice.(type) {
	case []uint8:
		elem = TypeUint8
	case []int8:
		elem = TypeInt8
	case []uint16:
		elem = TypeUint16
	case []int16:
		elem = TypeInt16
	case []uint32:
		elem = TypeUint32
	case []int32:
		elem = TypeInt32
	case []float32:
		elem = TypeFloat32
	case []bool:
		elem = TypeBool
	case []string:
		elem = TypeString
	case []uint64:
		elem = TypeUint64
	case []int64:
		elem = TypeInt64
	case []float64:
		elem = TypeFloat64
	case []Value:
		for i, v := range a {
			if v.typ != TypeArray {
				panic(fmt.Sprintf("gguf.Array: element %d is %s, want array (use a typed slice for scalars)", i, v.typ))
			}
		}
		elem = TypeArray
	default:
		panic(fmt.Sprintf("gguf.Array: unsupported %T", slice))
	}
	return Value{typ: TypeArray, elem: elem, v: slice}
}
