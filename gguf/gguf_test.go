package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// allValues has one key per scalar type, one array per element type, an
// empty array and arrays of arrays.
func allValues() []KV {
	return []KV{
		{"u8", Uint8(200)},
		{"i8", Int8(-100)},
		{"u16", Uint16(60000)},
		{"i16", Int16(-30000)},
		{"u32", Uint32(4000000000)},
		{"i32", Int32(-2000000000)},
		{"f32", Float32(3.25)},
		{"bool.true", Bool(true)},
		{"bool.false", Bool(false)},
		{"str", String("héllo ▁world")},
		{"str.empty", String("")},
		{"u64", Uint64(math.MaxUint64)},
		{"i64", Int64(math.MinInt64)},
		{"f64", Float64(-1.5e300)},
		{"arr.u8", Array([]uint8{0, 1, 255})},
		{"arr.i8", Array([]int8{-128, 0, 127})},
		{"arr.u16", Array([]uint16{1, 65535})},
		{"arr.i16", Array([]int16{-32768, 32767})},
		{"arr.u32", Array([]uint32{7, 8, 9})},
		{"arr.i32", Array([]int32{-1, 1})},
		{"arr.f32", Array([]float32{0.5, -0.25})},
		{"arr.bool", Array([]bool{true, false, true})},
		{"arr.str", Array([]string{"a", "", "▁b"})},
		{"arr.u64", Array([]uint64{1 << 40})},
		{"arr.i64", Array([]int64{-(1 << 40)})},
		{"arr.f64", Array([]float64{math.Pi})},
		{"arr.empty", Array([]string{})},
		{"arr.nested", Array([]Value{Array([]uint32{1, 2}), Array([]string{"x"}), Array([]Value{Array([]int8{-1})})})},
	}
}

func encode(t testing.TB, b *Builder) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}

func decode(t testing.TB, data []byte) *File {
	t.Helper()
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return f
}

func TestEveryValueTypeRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name      string
		version   uint32
		bigEndian bool
	}{
		{"v3", 3, false},
		{"v2", 2, false},
		{"v3 big-endian", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Builder{Version: tc.version, BigEndian: tc.bigEndian, KV: allValues()}
			f := decode(t, encode(t, b))
			if f.Version != tc.version {
				t.Errorf("Version = %d, want %d", f.Version, tc.version)
			}
			wantOrder := binary.ByteOrder(binary.LittleEndian)
			if tc.bigEndian {
				wantOrder = binary.BigEndian
			}
			if f.ByteOrder != wantOrder {
				t.Errorf("ByteOrder = %v, want %v", f.ByteOrder, wantOrder)
			}
			if len(f.KV) != len(b.KV) {
				t.Fatalf("got %d keys, want %d", len(f.KV), len(b.KV))
			}
			for i, want := range b.KV {
				got := f.KV[i]
				if got.Key != want.Key || !got.Value.Equal(want.Value) {
					t.Errorf("KV[%d] = %s %#v, want %s %#v", i, got.Key, got.Value, want.Key, want.Value)
				}
				if v, ok := f.Get(want.Key); !ok || !v.Equal(want.Value) {
					t.Errorf("Get(%q) = %#v, %v", want.Key, v, ok)
				}
			}
			if f.DataOffset != int64(len(encode(t, b))) || f.DataSize != 0 {
				t.Errorf("no tensors: DataOffset = %d, DataSize = %d, want end of header and 0", f.DataOffset, f.DataSize)
			}
		})
	}
}

// TestV2AndV3ShareTheLayout checks what gguf-py's reader and gguf.cpp
// assume: versions 2 and 3 differ only in the version field (v3 added
// big-endian files); both use uint64 counts and lengths, unlike v1's
// uint32.
func TestV2AndV3ShareTheLayout(t *testing.T) {
	v2 := encode(t, &Builder{Version: 2, KV: allValues()})
	v3 := encode(t, &Builder{Version: 3, KV: allValues()})
	if !bytes.Equal(v2[:4], v3[:4]) || !bytes.Equal(v2[8:], v3[8:]) {
		t.Errorf("v2 and v3 encodings differ outside the version field")
	}
	if got := binary.LittleEndian.Uint64(v3[16:24]); got != uint64(len(allValues())) {
		t.Errorf("kv count as uint64 at offset 16 = %d, want %d", got, len(allValues()))
	}
}

func TestValueAccessors(t *testing.T) {
	for _, tc := range []struct {
		v        Value
		wantUint uint64
		uintOK   bool
		wantInt  int64
		intOK    bool
	}{
		{Uint8(5), 5, true, 5, true},
		{Int8(-5), 0, false, -5, true},
		{Uint64(math.MaxUint64), math.MaxUint64, true, 0, false},
		{Int32(7), 7, true, 7, true},
		{String("7"), 0, false, 0, false},
		{Float32(1), 0, false, 0, false},
	} {
		u, uok := tc.v.AsUint()
		i, iok := tc.v.AsInt()
		if u != tc.wantUint || uok != tc.uintOK || i != tc.wantInt || iok != tc.intOK {
			t.Errorf("%s %v: AsUint = %d,%v AsInt = %d,%v; want %d,%v %d,%v", tc.v.Type(), tc.v.Interface(), u, uok, i, iok, tc.wantUint, tc.uintOK, tc.wantInt, tc.intOK)
		}
	}
	if f, ok := Float64(2.5).AsFloat(); !ok || f != 2.5 {
		t.Errorf("Float64(2.5).AsFloat() = %v, %v", f, ok)
	}
	if n := Array([]Value{Array([]int8{1})}).Len(); n != 1 {
		t.Errorf("nested Len() = %d, want 1", n)
	}
}

func tensorBuilder(align uint32) *Builder {
	b := &Builder{}
	if align != 0 {
		b.Set("general.alignment", Uint32(align))
	}
	b.Set("general.architecture", String("test"))
	b.Add(Tensor{Name: "a", Type: TensorF32, Dims: []uint64{3}, Data: make([]byte, 12)})
	b.Add(Tensor{Name: "b", Type: TensorF16, Dims: []uint64{2, 5}, Data: make([]byte, 20)})
	b.Add(Tensor{Name: "q", Type: TensorQ8_0, Dims: []uint64{32, 2}, Data: make([]byte, 68)})
	return b
}

func TestAlignmentAndDataOffset(t *testing.T) {
	for _, align := range []uint32{0, 1, 8, 64, 4096} {
		want := uint64(align)
		if align == 0 {
			want = DefaultAlignment
		}
		data := encode(t, tensorBuilder(align))
		f := decode(t, data)
		if f.Alignment != want {
			t.Errorf("align %d: Alignment = %d, want %d", align, f.Alignment, want)
		}
		if f.DataOffset%int64(want) != 0 {
			t.Errorf("align %d: DataOffset %d is not aligned", align, f.DataOffset)
		}
		wantOffsets := []uint64{0, pad(12, want), pad(12, want) + pad(20, want)}
		for i, ti := range f.Tensors {
			if ti.Offset != wantOffsets[i] {
				t.Errorf("align %d: tensor %s Offset = %d, want %d", align, ti.Name, ti.Offset, wantOffsets[i])
			}
		}
		if f.DataSize != int64(wantOffsets[2]+pad(68, want)) {
			t.Errorf("align %d: DataSize = %d, want %d", align, f.DataSize, wantOffsets[2]+pad(68, want))
		}
		if int64(len(data)) != f.DataOffset+f.DataSize {
			t.Errorf("align %d: file is %d bytes, want DataOffset+DataSize = %d", align, len(data), f.DataOffset+f.DataSize)
		}
		// The tensor data really is at DataOffset + Offset.
		q := f.Tensors[2]
		if q.Name != "q" || q.Type != TensorQ8_0 || !reflect.DeepEqual(q.Dims, []uint64{32, 2}) {
			t.Errorf("tensor 2 = %+v", q)
		}
	}
}

func TestTensorDataIsFoundAtItsOffset(t *testing.T) {
	b := tensorBuilder(64)
	for i := range b.Tensors {
		for j := range b.Tensors[i].Data {
			b.Tensors[i].Data[j] = byte(i*50 + j)
		}
	}
	data := encode(t, b)
	f := decode(t, data)
	for i, ti := range f.Tensors {
		start := f.DataOffset + int64(ti.Offset)
		size, _ := ti.Size()
		if got := data[start : start+int64(size)]; !bytes.Equal(got, b.Tensors[i].Data) {
			t.Errorf("tensor %s data at %d = %v, want %v", ti.Name, start, got[:4], b.Tensors[i].Data[:4])
		}
	}
}

// put overwrites data at off with a little-endian uint64.
func put64(data []byte, off int, v uint64) []byte {
	out := bytes.Clone(data)
	binary.LittleEndian.PutUint64(out[off:], v)
	return out
}

func TestMalformedInputIsAnError(t *testing.T) {
	valid := encode(t, tensorBuilder(0))
	oneString := encode(t, &Builder{KV: []KV{{"k", String("v")}}})
	oneArray := encode(t, &Builder{KV: []KV{{"k", Array([]string{"v"})}}})
	nested := Array([]uint8{1})
	for range 20 {
		nested = Array([]Value{nested})
	}
	deep := encode(t, &Builder{KV: []KV{{"k", nested}}})
	// The writer refuses bad alignments, so write another key and rename it.
	withBadAlign := func(v Value) []byte {
		d := encode(t, &Builder{KV: []KV{{"general.alignmenX", v}}})
		return bytes.Replace(d, []byte("general.alignmenX"), []byte("general.alignment"), 1)
	}
	// Header layout: magic 0, version 4, tensors 8, kvs 16, first key 24.
	// For oneString: key len 24, "k" 32, type 33, value len 37, "v" 45.
	// For oneArray: elem type 37, count 41.
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty input", nil, "not a GGUF"},
		{"wrong magic", append([]byte("GGML"), valid[4:]...), "not a GGUF"},
		{"version 1", func() []byte { d := bytes.Clone(valid); d[4] = 1; return d }(), "version 1"},
		{"version 4", func() []byte { d := bytes.Clone(valid); d[4] = 4; return d }(), "unsupported GGUF version 4"},
		{"truncated header", valid[:20], "unexpected EOF"},
		{"truncated in metadata", valid[:40], ""},
		{"truncated tensor data", valid[:len(valid)-40], "truncated"},
		{"lying kv count", put64(oneString, 16, 1<<62), "metadata count"},
		{"lying tensor count", put64(oneString, 8, 1<<40), "tensor count"},
		{"lying key length", put64(oneString, 24, 1<<60), "string length"},
		{"lying string length", put64(oneString, 37, 1<<40), "string length"},
		{"string longer than file", put64(oneString, 37, 100), "bytes left"},
		{"lying array count", put64(oneArray, 41, 1<<50), "array length"},
		{"array count beyond file", put64(oneArray, 41, 1000), "bytes left"},
		{"unknown value type", func() []byte { d := bytes.Clone(oneString); d[33] = 13; return d }(), "unknown value type"},
		{"unknown array element type", func() []byte { d := bytes.Clone(oneArray); d[37] = 99; return d }(), "element type"},
		{"arrays nested too deep", deep, "nested deeper"},
		{"alignment not a power of two", withBadAlign(Uint32(48)), "power of two"},
		{"alignment zero", withBadAlign(Uint32(0)), "power of two"},
		{"alignment of the wrong type", withBadAlign(Uint64(32)), "want uint32"},
		{"duplicate key", encode(t, &Builder{KV: []KV{{"a", Uint8(1)}, {"a", Uint8(2)}}}), "duplicate key"},
		{"bool byte 2", func() []byte {
			d := encode(t, &Builder{KV: []KV{{"b", Bool(true)}}})
			d[len(d)-1] = 2
			return d
		}(), "bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err == nil {
				t.Fatalf("Read() succeeded, want an error containing %q", tc.want)
			}
			t.Logf("%v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestTensorInfoErrors(t *testing.T) {
	mk := func(mod func(*Builder)) []byte {
		b := tensorBuilder(0)
		mod(b)
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	valid := mk(func(*Builder) {})
	f := decode(t, valid)
	// Offset of tensor "b"'s offset field: find it by re-encoding.
	offsetField := func(i int) int {
		// Walk the tensor infos from the end of the metadata.
		var meta bytes.Buffer
		(&Builder{KV: tensorBuilder(0).KV}).WriteTo(&meta)
		pos := meta.Len()
		for j, ti := range f.Tensors {
			pos += 8 + len(ti.Name) + 4 + 8*len(ti.Dims) + 4
			if j == i {
				return pos
			}
			pos += 8
		}
		return -1
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"tensor out of order", put64(valid, offsetField(1), 0), "at data offset 0, want 32"},
		{"too many dimensions", func() []byte {
			d := bytes.Clone(valid)
			pos := offsetField(0) - 4 - 8 - 4 // n_dims of tensor a (1 dim)
			binary.LittleEndian.PutUint32(d[pos:], 5)
			return d
		}(), "dimensions"},
		{"shape overflow", put64(valid, offsetField(0)-4-8, 1<<63), "overflows"},
		{"row not a whole number of blocks", put64(valid, offsetField(2)-4-16, 31), "blocks"},
		{"duplicate tensor name", mk(func(b *Builder) { b.Tensors[1].Name = "a" }), "duplicate tensor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestUnknownTensorTypeLeavesSizeUnknown(t *testing.T) {
	b := &Builder{}
	b.Add(Tensor{Name: "x", Type: TensorF32, Dims: []uint64{1}, Data: make([]byte, 4)})
	data := encode(t, b)
	// The type field is 12 bytes before the end of the tensor info.
	off := int(decode(t, data).DataOffset)
	for i := off - 1; i > 0; i-- {
		// find the info: name "x" followed by n_dims 1, dim 1, type 0, offset 0
		if data[i] == 'x' && binary.LittleEndian.Uint32(data[i+1:]) == 1 {
			binary.LittleEndian.PutUint32(data[i+1+4+8:], 250)
			break
		}
	}
	f := decode(t, data)
	if f.Tensors[0].Type != 250 || f.DataSize != -1 {
		t.Errorf("type %v DataSize %d, want ggml_type(250) and -1", f.Tensors[0].Type, f.DataSize)
	}
}

func TestWriterRejectsWrongDataSize(t *testing.T) {
	b := &Builder{}
	b.Add(Tensor{Name: "x", Type: TensorF32, Dims: []uint64{3}, Data: make([]byte, 8)})
	if _, err := b.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("WriteTo() with 8 bytes for 3 floats succeeded, want an error")
	}
}

func TestLimitsBoundAllocation(t *testing.T) {
	// A 1000-element array of empty strings is 8000 bytes; a limit of 100
	// elements must refuse it before reading them.
	data := encode(t, &Builder{KV: []KV{{"k", Array(make([]string, 1000))}}})
	l := DefaultLimits
	l.MaxArray = 100
	if _, err := l.Read(bytes.NewReader(data), int64(len(data))); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("Read() error = %v, want the array limit", err)
	}
	l = DefaultLimits
	l.MaxMetadataBytes = 1000
	if _, err := l.Read(bytes.NewReader(data), int64(len(data))); err == nil || !strings.Contains(err.Error(), "header exceeds") {
		t.Errorf("Read() error = %v, want the header limit", err)
	}
}

func TestErrNotGGUF(t *testing.T) {
	_, err := Read(bytes.NewReader([]byte("PK\x03\x04 not a model")), 18)
	if !errors.Is(err, ErrNotGGUF) {
		t.Errorf("Read(zip) error = %v, want ErrNotGGUF", err)
	}
}

func TestFloat16(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff},
		{1e6, 0x7c00}, {float32(math.Inf(-1)), 0xfc00}, {5.9604645e-8, 0x0001},
		{6.1035156e-5, 0x0400}, {1.0009766, 0x3c01}, {1.00048828125, 0x3c00}, // tie to even
	} {
		if got := Float16(tc.f); got != tc.want {
			t.Errorf("Float16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
	for h := 0; h < 0x7c00; h++ {
		if got := Float16(Float16To32(uint16(h))); got != uint16(h) {
			t.Fatalf("Float16(Float16To32(%#04x)) = %#04x", h, got)
		}
	}
}

func TestQuantizationNames(t *testing.T) {
	for _, tc := range []struct {
		ft        uint32
		name, qnt string
	}{
		{0, "ALL_F32", "F32"},
		{1, "MOSTLY_F16", "F16"},
		{2, "MOSTLY_Q4_0", "Q4_0"},
		{7, "MOSTLY_Q8_0", "Q8_0"},
		{15, "MOSTLY_Q4_K_M", "Q4_K_M"},
		{32, "MOSTLY_BF16", "BF16"},
		{38, "MOSTLY_MXFP4_MOE", "MXFP4_MOE"},
		{1024 + 15, "MOSTLY_Q4_K_M", "Q4_K_M"},
		{4, "", "ftype(4)"},
	} {
		name, _ := FileTypeName(tc.ft)
		if name != tc.name || Quantization(tc.ft) != tc.qnt {
			t.Errorf("file type %d: name %q quantization %q, want %q %q", tc.ft, name, Quantization(tc.ft), tc.name, tc.qnt)
		}
	}
}

func TestManySmallValuesHitTheMemoryBudget(t *testing.T) {
	// Empty nested arrays are 12 bytes each in the file and several times
	// that in memory.
	empty := make([]Value, 5000)
	for i := range empty {
		empty[i] = Array([]uint8{})
	}
	data := encode(t, &Builder{KV: []KV{{"k", Array(empty)}}})
	l := DefaultLimits
	l.MaxMetadataBytes = int64(len(data)) + 1
	if _, err := l.Read(bytes.NewReader(data), int64(len(data))); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("Read() error = %v, want the memory budget", err)
	}
	l.MaxMetadataBytes = 64 * int64(len(data))
	if _, err := l.Read(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Errorf("Read() with room = %v, want success", err)
	}
}
