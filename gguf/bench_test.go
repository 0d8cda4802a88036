package gguf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// largeHeader is the header of a 20 GB model whose metadata resembles a
// real one: a 152k-token vocabulary with scores, types and as many merges,
// and 400 quantised tensors.
func largeHeader() *Builder {
	const vocab = 152000
	tokens := make([]string, vocab)
	merges := make([]string, vocab)
	scores := make([]float32, vocab)
	types := make([]int32, vocab)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%06d", i)
		merges[i] = fmt.Sprintf("t%d o%d", i, i)
		scores[i] = -float32(i)
		types[i] = 1
	}
	b := &Builder{}
	b.Set("general.architecture", String("llama"))
	b.Set("general.name", String("large"))
	b.Set("general.file_type", Uint32(7))
	b.Set("llama.context_length", Uint32(131072))
	b.Set("llama.block_count", Uint32(80))
	b.Set("tokenizer.ggml.model", String("gpt2"))
	b.Set("tokenizer.ggml.tokens", Array(tokens))
	b.Set("tokenizer.ggml.scores", Array(scores))
	b.Set("tokenizer.ggml.token_type", Array(types))
	b.Set("tokenizer.ggml.merges", Array(merges))
	// 400 Q8_0 tensors of 8192x6144 elements: 53.5 MB each, 21.4 GB total.
	for i := 0; i < 400; i++ {
		b.Add(Tensor{Name: fmt.Sprintf("blk.%d.w%d.weight", i/5, i%5), Type: TensorQ8_0, Dims: []uint64{8192, 6144}})
	}
	return b
}

// writeSparseModel writes largeHeader and extends the file to its full
// size without writing the data (a sparse file).
func writeSparseModel(tb testing.TB) (path string, header int64, size int64) {
	tb.Helper()
	path = filepath.Join(tb.TempDir(), "large.gguf")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b := largeHeader()
	e, align, err := b.writeHeader(f, false)
	if err == nil {
		err = e.w.Flush()
	}
	if err != nil {
		tb.Fatal(err)
	}
	header = e.n
	size = header
	for _, t := range b.Tensors {
		s, _ := TensorInfo{Dims: t.Dims, Type: t.Type}.Size()
		size += int64(pad(s, align))
	}
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	return path, header, size
}

type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func TestSparseModelOpensAndReadsOnlyTheHeader(t *testing.T) {
	path, header, size := writeSparseModel(t)
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	c := &countingReaderAt{r: fh}
	f, err := Read(c, size)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataOffset != header || f.DataOffset+f.DataSize != size {
		t.Errorf("DataOffset %d DataSize %d, want %d and file size %d", f.DataOffset, f.DataSize, header, size)
	}
	// The reader buffers 64 KiB at a time, so it may read a little past
	// the header, never into the tensor data beyond that buffer.
	if got := c.n.Load(); got < header || got > header+64<<10 {
		t.Errorf("read %d bytes of a %d-byte header in a %d-byte file", got, header, size)
	}
	if fa := f.Facts(); fa.VocabSize != 152000 || fa.Quantization != "Q8_0" || fa.TensorCount != 400 {
		t.Errorf("Facts() = %+v", fa)
	}
}

// BenchmarkOpenLarge opens a 21 GB sparse model and extracts its facts,
// against the baseline of reading the header's bytes without parsing.
func BenchmarkOpenLarge(b *testing.B) {
	path, header, size := writeSparseModel(b)
	b.Logf("file %d bytes, header %d bytes", size, header)
	b.Run("ReadHeaderBytes", func(b *testing.B) {
		buf := make([]byte, header)
		b.SetBytes(header)
		for b.Loop() {
			fh, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(fh, buf); err != nil {
				b.Fatal(err)
			}
			fh.Close()
		}
	})
	b.Run("OpenFacts", func(b *testing.B) {
		b.SetBytes(header)
		var read int64
		for b.Loop() {
			fh, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			c := &countingReaderAt{r: fh}
			f, err := Read(c, size)
			if err != nil {
				b.Fatal(err)
			}
			_ = f.Facts()
			fh.Close()
			read = c.n.Load()
		}
		b.ReportMetric(float64(read), "bytes-read/op")
		b.ReportMetric(float64(size), "file-bytes")
	})
}
