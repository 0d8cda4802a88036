package gguf

import (
	"bytes"
	"testing"
)

func fuzzSeeds(t testing.TB) [][]byte {
	small := TinyOptions{Seed: 7, Embd: 8, Layers: 1, Heads: 2, FF: 16, Context: 64, Merges: 10}
	var model bytes.Buffer
	if err := WriteTinyLlama(&model, small); err != nil {
		t.Fatal(err)
	}
	m := model.Bytes()
	header := decode(t, m).DataOffset
	seeds := [][]byte{
		m[:header+64], // header plus the start of the data: fails the size check, exercises all of the header
		m[:header/2],  // truncated inside the vocabulary
		m[:30],
		encode(t, &Builder{KV: allValues()}),
		encode(t, &Builder{Version: 2, BigEndian: true, KV: allValues()}),
		encode(t, tensorBuilder(64)),
		[]byte("GGUF"),
	}
	return seeds
}

// FuzzRead checks that no input makes Read panic or allocate without
// bound, and that what it accepts without tensors re-encodes to the same
// bytes.
func FuzzRead(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := DefaultLimits
		// Keep each execution small; the limits' logic is the same.
		l.MaxMetadataBytes = 1 << 20
		file, err := l.Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		_ = file.Facts()
		if len(file.Tensors) != 0 {
			return
		}
		b := &Builder{Version: file.Version, BigEndian: file.ByteOrder.String() == "BigEndian", KV: file.KV}
		var out bytes.Buffer
		if _, err := b.WriteTo(&out); err != nil {
			t.Fatalf("re-encoding an accepted file: %v", err)
		}
		if !bytes.Equal(out.Bytes(), data[:file.DataOffset]) {
			t.Fatalf("re-encoded header differs from the input")
		}
	})
}
