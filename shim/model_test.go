package shim

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/gguf"
)

// testVocab is a SentencePiece-style vocabulary: control tokens, the 256
// byte-fallback tokens <0x00>..<0xFF>, and pieces with the ▁ space marker.
// Text outside it (most CJK, emoji) can only be spelled with byte tokens,
// whose pieces are incomplete UTF-8 on their own.
func testVocab() (tokens []string, scores []float32, types []int32) {
	add := func(s string, score float32, typ int32) {
		tokens = append(tokens, s)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, 2)
	add("<s>", 0, 3)
	add("</s>", 0, 3)
	for b := 0; b < 256; b++ {
		add(byteTokenName(b), 0, 6)
	}
	var normal []string
	for c := 'a'; c <= 'z'; c++ {
		normal = append(normal, string(c))
	}
	for c := 'A'; c <= 'Z'; c++ {
		normal = append(normal, string(c))
	}
	for _, s := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ".", ",", "!", "?", ":", ";", "'", "-", "\n", "▁",
		"世", "界", "é", "€"} {
		normal = append(normal, s)
	}
	for _, w := range []string{"the", "cat", "sat", "on", "mat", "a", "dog", "ran", "hello", "world", "is", "and", "of", "to", "in",
		"he", "she", "it", "was", "big", "small", "red", "blue", "Question", "Answer", "yes", "no", "Paris", "France", "capital"} {
		normal = append(normal, "▁"+w)
	}
	for _, s := range []string{"he", "ll", "llo", "at", "an", "in", "er", "th", "wor", "ld", "ca", "es"} {
		normal = append(normal, s)
	}
	seen := map[string]bool{}
	for _, s := range normal {
		if seen[s] {
			continue
		}
		seen[s] = true
		add(s, float32(len([]rune(s)))-float32(len(tokens))*1e-4, 1)
	}
	return tokens, scores, types
}

func byteTokenName(b int) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[b>>4]) + string(hex[b&15]) + ">"
}

// writeTestModel writes a tiny random-weight llama model to dir and
// returns its path.
func writeTestModel(tb testing.TB, dir string) string {
	tb.Helper()
	const (
		nEmbd  = 64
		nHead  = 4
		nFF    = 128
		nLayer = 2
		nCtx   = 2048
	)
	tokens, scores, types := testVocab()
	nVocab := uint64(len(tokens))
	rng := rand.New(rand.NewPCG(1, 2))
	var b gguf.Builder
	b.Set("general.architecture", gguf.String("llama"))
	b.Set("general.name", gguf.String("shim-test"))
	b.Set("llama.context_length", gguf.Uint32(nCtx))
	b.Set("llama.embedding_length", gguf.Uint32(nEmbd))
	b.Set("llama.block_count", gguf.Uint32(nLayer))
	b.Set("llama.feed_forward_length", gguf.Uint32(nFF))
	b.Set("llama.attention.head_count", gguf.Uint32(nHead))
	b.Set("llama.attention.head_count_kv", gguf.Uint32(nHead))
	b.Set("llama.attention.layer_norm_rms_epsilon", gguf.Float32(1e-5))
	b.Set("llama.rope.dimension_count", gguf.Uint32(nEmbd/nHead))
	b.Set("tokenizer.ggml.model", gguf.String("llama"))
	b.Set("tokenizer.ggml.tokens", gguf.Array(tokens))
	b.Set("tokenizer.ggml.scores", gguf.Array(scores))
	b.Set("tokenizer.ggml.token_type", gguf.Array(types))
	b.Set("tokenizer.ggml.bos_token_id", gguf.Uint32(1))
	b.Set("tokenizer.ggml.eos_token_id", gguf.Uint32(2))
	b.Set("tokenizer.ggml.unknown_token_id", gguf.Uint32(0))
	b.Set("tokenizer.ggml.add_bos_token", gguf.Bool(true))
	b.Set("tokenizer.ggml.add_eos_token", gguf.Bool(false))
	tensor := func(name string, scale float64, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		data := make([]byte, 4*n)
		for i := uint64(0); i < n; i++ {
			v := float32(rng.NormFloat64() * scale)
			if scale == 0 {
				v = 1
			}
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		b.Add(gguf.Tensor{Name: name, Type: gguf.TensorF32, Dims: dims, Data: data})
	}
	tensor("token_embd.weight", 1, nEmbd, nVocab)
	for l := 0; l < nLayer; l++ {
		p := "blk." + string(rune('0'+l)) + "."
		tensor(p+"attn_norm.weight", 0, nEmbd)
		tensor(p+"attn_q.weight", 0.2, nEmbd, nEmbd)
		tensor(p+"attn_k.weight", 0.2, nEmbd, nEmbd)
		tensor(p+"attn_v.weight", 0.2, nEmbd, nEmbd)
		tensor(p+"attn_output.weight", 0.2, nEmbd, nEmbd)
		tensor(p+"ffn_norm.weight", 0, nEmbd)
		tensor(p+"ffn_gate.weight", 0.2, nEmbd, nFF)
		tensor(p+"ffn_up.weight", 0.2, nEmbd, nFF)
		tensor(p+"ffn_down.weight", 0.2, nFF, nEmbd)
	}
	tensor("output_norm.weight", 0, nEmbd)
	tensor("output.weight", 0.5, nEmbd, nVocab)
	path := filepath.Join(dir, "shim-test.gguf")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := b.WriteTo(f); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestWriteModelScratch(t *testing.T) {
	if os.Getenv("SHIM_SCRATCH") == "" {
		t.Skip("scratch")
	}
	p := writeTestModel(t, "/tmp/shimscratch")
	t.Log(p)
}
