package gguf

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// TinyOptions describe a tiny random-weight llama model. Zero fields take
// the values of DefaultTiny.
type TinyOptions struct {
	// Seed makes the weights; the same options give the same bytes.
	Seed uint64
	// Name is general.name.
	Name string
	// Embd, Layers, Heads, HeadsKV and FF are the model's dimensions
	// (n_embd, n_layer, n_head, n_head_kv, n_ff). Embd/Heads must be even.
	Embd, Layers, Heads, HeadsKV, FF int
	// Context is llama.context_length.
	Context int
	// Merges is the number of merged pieces in the vocabulary; it sets the
	// vocabulary (3 control tokens + 256 byte tokens + characters + merges).
	// Two models with the same Merges share their vocabulary exactly.
	Merges int
	// F32 writes every tensor as F32 (file type ALL_F32) instead of F16
	// matrices with F32 norms (MOSTLY_F16).
	F32 bool
	// Version is the GGUF version, 2 or 3.
	Version uint32
	// NoChatTemplate leaves tokenizer.chat_template out.
	NoChatTemplate bool
}

// DefaultTiny is a two-layer model of about 400 KB with a 540-token
// vocabulary.
func DefaultTiny() TinyOptions {
	return TinyOptions{
		Seed: 1, Name: "llbuild-tiny-llama",
		Embd: 64, Layers: 2, Heads: 4, HeadsKV: 4, FF: 128,
		Context: 2048, Merges: 220, Version: 3,
	}
}

// DraftTiny is a one-layer model with DefaultTiny's vocabulary, usable as
// llama-server's --model-draft for a DefaultTiny model.
func DraftTiny() TinyOptions {
	o := DefaultTiny()
	o.Seed, o.Name = 2, "llbuild-tiny-llama-draft"
	o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = 32, 1, 2, 2, 64
	return o
}

// OtherVocabTiny is DraftTiny with a smaller, different vocabulary: a draft
// that a bundle must refuse to pair with a DefaultTiny model.
func OtherVocabTiny() TinyOptions {
	o := DraftTiny()
	o.Seed, o.Name, o.Merges = 3, "llbuild-tiny-llama-other-vocab", 120
	return o
}

func (o TinyOptions) withDefaults() TinyOptions {
	d := DefaultTiny()
	if o.Name == "" {
		o.Name = d.Name
	}
	for _, p := range []struct{ v, d *int }{
		{&o.Embd, &d.Embd}, {&o.Layers, &d.Layers}, {&o.Heads, &d.Heads},
		{&o.FF, &d.FF}, {&o.Context, &d.Context}, {&o.Merges, &d.Merges},
	} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	if o.HeadsKV == 0 {
		o.HeadsKV = o.Heads
	}
	if o.Version == 0 {
		o.Version = 3
	}
	return o
}

// tinyChatTemplate is a minimal Jinja chat template the server can render.
const tinyChatTemplate = "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"

// TinyLlama builds a tiny random-weight llama model with a SentencePiece
// ("llama") tokenizer: <unk>, <s>, </s>, the 256 byte-fallback tokens
// <0x00>..<0xFF>, the characters of a small English corpus and pieces
// merged from it (many of them ▁-prefixed words), with scores and token
// types as llama.cpp expects them.
func TinyLlama(o TinyOptions) (*Builder, error) {
	o = o.withDefaults()
	if o.Embd%o.Heads != 0 || (o.Embd/o.Heads)%2 != 0 || o.Heads%o.HeadsKV != 0 {
		return nil, fmt.Errorf("tiny llama: n_embd %d, n_head %d, n_head_kv %d do not divide into even heads", o.Embd, o.Heads, o.HeadsKV)
	}
	tokens, scores, types := TinyVocab(o.Merges)
	return llamaModel(o, tokens, scores, types), nil
}

// llamaModel is a random-weight llama model of o's shape with the given vocabulary.
func llamaModel(o TinyOptions, tokens []string, scores []float32, types []int32) *Builder {
	headDim := o.Embd / o.Heads
	kvDim := headDim * o.HeadsKV
	ft := uint32(1) // MOSTLY_F16
	if o.F32 {
		ft = 0 // ALL_F32
	}
	b := &Builder{Version: o.Version}
	b.Set("general.architecture", String("llama"))
	b.Set("general.name", String(o.Name))
	b.Set("general.file_type", Uint32(ft))
	b.Set("general.alignment", Uint32(DefaultAlignment))
	b.Set("llama.context_length", Uint32(uint32(o.Context)))
	b.Set("llama.embedding_length", Uint32(uint32(o.Embd)))
	b.Set("llama.block_count", Uint32(uint32(o.Layers)))
	b.Set("llama.feed_forward_length", Uint32(uint32(o.FF)))
	b.Set("llama.attention.head_count", Uint32(uint32(o.Heads)))
	b.Set("llama.attention.head_count_kv", Uint32(uint32(o.HeadsKV)))
	b.Set("llama.rope.dimension_count", Uint32(uint32(headDim)))
	b.Set("llama.rope.freq_base", Float32(10000))
	b.Set("llama.attention.layer_norm_rms_epsilon", Float32(1e-5))
	b.Set("llama.vocab_size", Uint32(uint32(len(tokens))))
	setTokenizer(b, tokens, scores, types)
	if !o.NoChatTemplate {
		b.Set("tokenizer.chat_template", String(tinyChatTemplate))
	}

	rng := rand.New(rand.NewPCG(o.Seed, 0x6c6c6275696c64)) // "llbuild"
	vocab := uint64(len(tokens))
	embd, ff, kv := uint64(o.Embd), uint64(o.FF), uint64(kvDim)
	matrix := func(name string, in, out uint64, scale float64) {
		b.Add(weights(name, rng, []uint64{in, out}, scale, o.F32))
	}
	ones := func(name string) {
		b.Add(Tensor{Name: name, Type: TensorF32, Dims: []uint64{embd}, Data: f32Bytes(embd, func() float64 { return 1 })})
	}
	matrix("token_embd.weight", embd, vocab, 1)
	for i := 0; i < o.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ones(p + "attn_norm.weight")
		matrix(p+"attn_q.weight", embd, embd, 1/math.Sqrt(float64(embd)))
		matrix(p+"attn_k.weight", embd, kv, 1/math.Sqrt(float64(embd)))
		matrix(p+"attn_v.weight", embd, kv, 1/math.Sqrt(float64(embd)))
		matrix(p+"attn_output.weight", embd, embd, 1/math.Sqrt(float64(embd)))
		ones(p + "ffn_norm.weight")
		matrix(p+"ffn_gate.weight", embd, ff, 1/math.Sqrt(float64(embd)))
		matrix(p+"ffn_up.weight", embd, ff, 1/math.Sqrt(float64(embd)))
		matrix(p+"ffn_down.weight", ff, embd, 1/math.Sqrt(float64(ff)))
	}
	ones("output_norm.weight")
	// Large output weights make the next-token distributions peaked and
	// varied, so logprob orderings in tests are not near-ties. The rows of
	// control and byte tokens are damped so that greedy text is mostly
	// whole pieces rather than stray bytes of invalid UTF-8.
	out := weights("output.weight", rng, []uint64{embd, vocab}, 0.5, o.F32)
	damp(out, embd, types)
	b.Add(out)
	return b
}

// WriteTinyLlama writes TinyLlama(o) to w.
func WriteTinyLlama(w io.Writer, o TinyOptions) error {
	b, err := TinyLlama(o)
	if err != nil {
		return err
	}
	_, err = b.WriteTo(w)
	return err
}

// WriteTinyLlamaFile writes TinyLlama(o) to path, through a temporary file
// renamed into place.
func WriteTinyLlamaFile(path string, o TinyOptions) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tiny-*.gguf")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := WriteTinyLlama(tmp, o); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// damp scales the output rows of non-normal tokens by 1/32.
func damp(t Tensor, embd uint64, types []int32) {
	for tok, typ := range types {
		if typ == tokenNormal {
			continue
		}
		for j := uint64(0); j < embd; j++ {
			i := uint64(tok)*embd + j
			if t.Type == TensorF32 {
				u := uint32(t.Data[4*i]) | uint32(t.Data[4*i+1])<<8 | uint32(t.Data[4*i+2])<<16 | uint32(t.Data[4*i+3])<<24
				u = math.Float32bits(math.Float32frombits(u) / 32)
				t.Data[4*i], t.Data[4*i+1], t.Data[4*i+2], t.Data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
				continue
			}
			h := uint16(t.Data[2*i]) | uint16(t.Data[2*i+1])<<8
			h = Float16(Float16To32(h) / 32)
			t.Data[2*i], t.Data[2*i+1] = byte(h), byte(h>>8)
		}
	}
}

// Float16To32 converts from IEEE 754 half precision.
func Float16To32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / 1024 / 16384 // mant * 2^-24
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// weights draws uniform values in [-scale, scale].
func weights(name string, rng *rand.Rand, dims []uint64, scale float64, f32 bool) Tensor {
	n := dims[0] * dims[1]
	next := func() float64 { return (rng.Float64()*2 - 1) * scale }
	if f32 {
		return Tensor{Name: name, Type: TensorF32, Dims: dims, Data: f32Bytes(n, next)}
	}
	data := make([]byte, 2*n)
	for i := uint64(0); i < n; i++ {
		h := Float16(float32(next()))
		data[2*i], data[2*i+1] = byte(h), byte(h>>8)
	}
	return Tensor{Name: name, Type: TensorF16, Dims: dims, Data: data}
}

func f32Bytes(n uint64, next func() float64) []byte {
	data := make([]byte, 4*n)
	for i := uint64(0); i < n; i++ {
		u := math.Float32bits(float32(next()))
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return data
}

// Float16 converts to IEEE 754 half precision, rounding to nearest even.
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14: // normal
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		rest := mant & 0x1fff
		h := uint32(sign) | e | m
		if rest > 0x1000 || rest == 0x1000 && m&1 == 1 {
			h++ // may carry into the exponent, which is correct
		}
		return uint16(h)
	case exp-127 >= -25: // subnormal
		mant |= 0x800000
		shift := uint32(-14-(exp-127)) + 13
		m := mant >> shift
		rest := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || rest == half && m&1 == 1 {
			m++
		}
		return sign | uint16(m)
	}
	return sign
}

// Token types, as llama.cpp's llama_token_type numbers them.
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// spaceMark is SentencePiece's visible space, U+2581.
const spaceMark = "▁"

// tinyCorpus is the text the tiny vocabulary's pieces are merged from.
const tinyCorpus = `the quick brown fox jumps over the lazy dog
hello world this is a tiny model made for tests of the server
a model reads the prompt and writes the next token one at a time
the answer is yes and the answer is no
one two three four five six seven eight nine ten
what is the capital of france paris is the capital of france
it was the best of times it was the worst of times
to be or not to be that is the question
we test logprobs echo streaming and tokenization with this model
The Quick Brown Fox said Hello World to The Server
numbers like 1 2 3 42 100 and 2026 appear in text too
`

// setTokenizer writes a SentencePiece ("llama") tokenizer of TinyVocab's layout: <unk> 0,
// BOS 1 (added), EOS 2.
func setTokenizer(b *Builder, tokens []string, scores []float32, types []int32) {
	b.Set("tokenizer.ggml.model", String("llama"))
	b.Set("tokenizer.ggml.tokens", Array(tokens))
	b.Set("tokenizer.ggml.scores", Array(scores))
	b.Set("tokenizer.ggml.token_type", Array(types))
	b.Set("tokenizer.ggml.unknown_token_id", Uint32(0))
	b.Set("tokenizer.ggml.bos_token_id", Uint32(1))
	b.Set("tokenizer.ggml.eos_token_id", Uint32(2))
	b.Set("tokenizer.ggml.add_bos_token", Bool(true))
	b.Set("tokenizer.ggml.add_eos_token", Bool(false))
}

// TinyVocab returns the tiny tokenizer's tokens, scores and token types
// with the given number of merged pieces: CorpusVocab of the tiny corpus.
func TinyVocab(merges int) (tokens []string, scores []float32, types []int32) {
	tokens, scores, types, _ = CorpusVocab(tinyCorpus, merges)
	return tokens, scores, types
}

// PadVocab grows a TinyLlama model's vocabulary to vocab tokens (normal tokens that the
// tokenizer never produces, with the lowest score) and its token embedding and output
// matrices with it, so that a benchmark model pays a real model's per-token vocabulary cost
// (a softmax over 32,000 logits, say). A smaller vocab leaves b as it is. Two models padded
// to the same size from the same Merges share their vocabulary exactly.
func PadVocab(b *Builder, o TinyOptions, vocab int) {
	o = o.withDefaults()
	tokens, scores, types := TinyVocab(o.Merges)
	if vocab <= len(tokens) {
		return
	}
	for i := len(tokens); i < vocab; i++ {
		tokens = append(tokens, fmt.Sprintf("\u2400%d", i))
		scores = append(scores, -1e9)
		types = append(types, 1) // normal
	}
	b.Set("llama.vocab_size", Uint32(uint32(vocab)))
	b.Set("tokenizer.ggml.tokens", Array(tokens))
	b.Set("tokenizer.ggml.scores", Array(scores))
	b.Set("tokenizer.ggml.token_type", Array(types))
	rng := rand.New(rand.NewPCG(o.Seed, uint64(vocab)))
	for i, t := range b.Tensors {
		scale := map[string]float64{"token_embd.weight": 1, "output.weight": 0.5}[t.Name]
		if scale == 0 {
			continue
		}
		n := t.Dims[0] * uint64(vocab)
		data := make([]byte, 2*n)
		for j := uint64(0); j < n; j++ {
			h := Float16(float32((rng.Float64()*2 - 1) * scale))
			data[2*j], data[2*j+1] = byte(h), byte(h>>8)
		}
		b.Tensors[i] = Tensor{Name: t.Name, Type: TensorF16, Dims: []uint64{t.Dims[0], uint64(vocab)}, Data: data}
	}
}
