package gguf

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Gemma4Options describe a tiny random-weight Gemma 4 target ("gemma4") and its MTP
// assistant ("gemma4-assistant"), with exactly the hyperparameters and tensors llama.cpp
// 34af94cd9 reads (src/models/gemma4.cpp, gemma4-assistant.cpp): a dense target (no
// per-layer embeddings, no experts) whose last two layers are sliding-window then full
// attention, as the assistant shares those two layers' KV cache, and an assistant whose
// embedding_length_out is the target's hidden size. Zero fields take TinyGemma4's values.
type Gemma4Options struct {
	Seed uint64
	// Embd, Layers and FF are the target's; AssistantEmbd, AssistantLayers and AssistantFF
	// the assistant's.
	Embd, Layers, FF                            int
	AssistantEmbd, AssistantLayers, AssistantFF int
	// Heads, HeadsKV and HeadDim are both models' (the assistant reads the target's KV).
	Heads, HeadsKV, HeadDim int
	// Window is the sliding window, Context the context length.
	Window, Context int
	Merges          int
	// F16 writes the blocks' matrices as F16 (MOSTLY_F16) instead of F32.
	F16 bool
}

// TinyGemma4 is a four-layer target of 64 with a two-layer assistant of 32, sharing
// DefaultTiny's vocabulary.
func TinyGemma4() Gemma4Options {
	return Gemma4Options{Seed: 21, Embd: 64, Layers: 4, FF: 128, AssistantEmbd: 32, AssistantLayers: 2, AssistantFF: 64,
		Heads: 2, HeadsKV: 1, HeadDim: 32, Window: 128, Context: 4096, Merges: 220}
}

func (o Gemma4Options) withDefaults() Gemma4Options {
	d := TinyGemma4()
	for _, p := range []struct{ v, d *int }{
		{&o.Embd, &d.Embd}, {&o.Layers, &d.Layers}, {&o.FF, &d.FF}, {&o.AssistantEmbd, &d.AssistantEmbd},
		{&o.AssistantLayers, &d.AssistantLayers}, {&o.AssistantFF, &d.AssistantFF}, {&o.Heads, &d.Heads},
		{&o.HeadsKV, &d.HeadsKV}, {&o.HeadDim, &d.HeadDim}, {&o.Window, &d.Window}, {&o.Context, &d.Context}, {&o.Merges, &d.Merges},
	} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	return o
}

// gemma4Common sets what target and assistant share: tokenizer, attention shape, rope, window.
func gemma4Common(b *Builder, arch, name string, o Gemma4Options, embd, layers, ff int, v vocab) {
	tokens, scores, types := v.tokens, v.scores, v.types
	if tokens == nil {
		tokens, scores, types = TinyVocab(o.Merges)
	}
	b.Set("general.architecture", String(arch))
	b.Set("general.name", String(name))
	b.Set("general.file_type", Uint32(0)) // ALL_F32
	if o.F16 {
		b.Set("general.file_type", Uint32(1)) // MOSTLY_F16
	}
	b.Set("general.alignment", Uint32(DefaultAlignment))
	k := func(s string) string { return arch + "." + s }
	b.Set(k("context_length"), Uint32(uint32(o.Context)))
	b.Set(k("embedding_length"), Uint32(uint32(embd)))
	b.Set(k("block_count"), Uint32(uint32(layers)))
	b.Set(k("feed_forward_length"), Uint32(uint32(ff)))
	b.Set(k("attention.head_count"), Uint32(uint32(o.Heads)))
	b.Set(k("attention.head_count_kv"), Uint32(uint32(o.HeadsKV)))
	b.Set(k("attention.key_length"), Uint32(uint32(o.HeadDim)))
	b.Set(k("attention.value_length"), Uint32(uint32(o.HeadDim)))
	b.Set(k("attention.key_length_swa"), Uint32(uint32(o.HeadDim)))
	b.Set(k("attention.value_length_swa"), Uint32(uint32(o.HeadDim)))
	b.Set(k("attention.sliding_window"), Uint32(uint32(o.Window)))
	pattern := make([]bool, layers)
	for i := range pattern {
		pattern[i] = i != layers-1 // the last layer full attention, the others sliding
	}
	b.Set(k("attention.sliding_window_pattern"), Array(pattern))
	b.Set(k("attention.layer_norm_rms_epsilon"), Float32(1e-6))
	b.Set(k("rope.freq_base"), Float32(1e6))
	b.Set(k("rope.freq_base_swa"), Float32(1e4))
	b.Set(k("vocab_size"), Uint32(uint32(len(tokens))))
	setTokenizer(b, tokens, scores, types)
	b.Set("tokenizer.chat_template", String(tinyChatTemplate))
}

// gemma4Tensors adds tensors: random matrices (F32, or F16) and all-ones F32 vectors.
type gemma4Tensors struct {
	b   *Builder
	rng *rand.Rand
	f16 bool
}

func (g gemma4Tensors) matrix(name string, in, out int) {
	g.b.Add(weights(name, g.rng, []uint64{uint64(in), uint64(out)}, 1/math.Sqrt(float64(in)), !g.f16))
}

func (g gemma4Tensors) ones(name string, n int) {
	g.b.Add(Tensor{Name: name, Type: TensorF32, Dims: []uint64{uint64(n)}, Data: f32Bytes(uint64(n), func() float64 { return 1 })})
}

// vocab is a tokenizer's tokens; empty means TinyVocab.
type vocab struct {
	tokens []string
	scores []float32
	types  []int32
}

// Gemma4Target builds the target.
func Gemma4Target(o Gemma4Options) (*Builder, error) { return gemma4Target(o, vocab{}) }

// Gemma4Assistant builds the MTP assistant of Gemma4Target(o).
func Gemma4Assistant(o Gemma4Options) (*Builder, error) { return gemma4Assistant(o, vocab{}) }

func gemma4Target(o Gemma4Options, v vocab) (*Builder, error) {
	o = o.withDefaults()
	if o.Layers < 2 || o.Heads%o.HeadsKV != 0 || o.HeadDim%2 != 0 {
		return nil, fmt.Errorf("gemma4: %d layers (at least 2: the assistant shares the last sliding and full layers), %d heads, %d KV heads, head size %d", o.Layers, o.Heads, o.HeadsKV, o.HeadDim)
	}
	b := &Builder{Version: 3}
	gemma4Common(b, "gemma4", "llbuild-tiny-gemma4", o, o.Embd, o.Layers, o.FF, v)
	b.Set("gemma4.embedding_length_per_layer_input", Uint32(0))
	g := gemma4Tensors{b, rand.New(rand.NewPCG(o.Seed, 0x67656d6d6134)), o.F16} // "gemma4"
	V := len(b.kvStrings("tokenizer.ggml.tokens"))
	g.b.Add(weights("token_embd.weight", g.rng, []uint64{uint64(o.Embd), uint64(V)}, 1, true))
	g.ones("output_norm.weight", o.Embd)
	q, kv := o.HeadDim*o.Heads, o.HeadDim*o.HeadsKV
	for i := 0; i < o.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		g.ones(p+"attn_norm.weight", o.Embd)
		g.matrix(p+"attn_q.weight", o.Embd, q)
		g.matrix(p+"attn_k.weight", o.Embd, kv)
		g.matrix(p+"attn_v.weight", o.Embd, kv)
		g.matrix(p+"attn_output.weight", q, o.Embd)
		g.ones(p+"attn_q_norm.weight", o.HeadDim)
		g.ones(p+"attn_k_norm.weight", o.HeadDim)
		g.ones(p+"post_attention_norm.weight", o.Embd)
		g.ones(p+"ffn_norm.weight", o.Embd)
		g.matrix(p+"ffn_gate.weight", o.Embd, o.FF)
		g.matrix(p+"ffn_up.weight", o.Embd, o.FF)
		g.matrix(p+"ffn_down.weight", o.FF, o.Embd)
		g.ones(p+"post_ffw_norm.weight", o.Embd)
	}
	g.ones("rope_freqs.weight", o.HeadDim/2)
	return b, nil
}

func gemma4Assistant(o Gemma4Options, v vocab) (*Builder, error) {
	o = o.withDefaults()
	if o.AssistantEmbd == o.Embd {
		return nil, fmt.Errorf("gemma4-assistant: its hidden size %d must differ from the target's (llama.cpp reads embedding_length_out as the target's)", o.AssistantEmbd)
	}
	b := &Builder{Version: 3}
	const arch = "gemma4-assistant"
	gemma4Common(b, arch, "llbuild-tiny-gemma4-assistant", o, o.AssistantEmbd, o.AssistantLayers, o.AssistantFF, v)
	b.Set(arch+".embedding_length_out", Uint32(uint32(o.Embd)))
	b.Set(arch+".nextn_predict_layers", Uint32(uint32(o.AssistantLayers)))
	g := gemma4Tensors{b, rand.New(rand.NewPCG(o.Seed, 0x617373697374)), o.F16} // "assist"
	V := len(b.kvStrings("tokenizer.ggml.tokens"))
	E, q := o.AssistantEmbd, o.HeadDim*o.Heads
	g.b.Add(weights("token_embd.weight", g.rng, []uint64{uint64(E), uint64(V)}, 1, true))
	g.ones("output_norm.weight", E)
	g.matrix("nextn.post_projection.weight", E, o.Embd)
	g.matrix("nextn.pre_projection.weight", 2*o.Embd, E)
	for i := 0; i < o.AssistantLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		g.ones(p+"attn_norm.weight", E)
		g.matrix(p+"attn_q.weight", E, q)
		g.matrix(p+"attn_output.weight", q, E)
		g.ones(p+"attn_q_norm.weight", o.HeadDim)
		g.ones(p+"post_attention_norm.weight", E)
		g.ones(p+"layer_output_scale.weight", 1)
		g.ones(p+"ffn_norm.weight", E)
		g.matrix(p+"ffn_gate.weight", E, o.AssistantFF)
		g.matrix(p+"ffn_up.weight", E, o.AssistantFF)
		g.matrix(p+"ffn_down.weight", o.AssistantFF, E)
		g.ones(p+"post_ffw_norm.weight", E)
	}
	g.ones("rope_freqs.weight", o.HeadDim/2)
	return b, nil
}

// kvStrings is a string array value of the builder's metadata.
func (b *Builder) kvStrings(key string) []string {
	for _, e := range b.KV {
		if e.Key == key {
			if s, ok := e.Value.AsStrings(); ok {
				return s
			}
		}
	}
	return nil
}

// BigramGemma4Shape is the gemma4 shape the bigram pair uses: TinyGemma4 widened to 68 (rank
// 64 and two), with BigramShapes' 1,000-merge vocabulary.
func BigramGemma4Shape() Gemma4Options {
	o := TinyGemma4()
	o.Embd, o.Merges = 68, 1000
	return o
}

// BigramGemma4Shape1B is BigramGemma4Shape at a 0.8B model's cost: 16 layers of 2048
// (16 heads of 128, 8 KV heads), F16 blocks; the assistant stays two layers of rank+2.
func BigramGemma4Shape1B() Gemma4Options {
	o := BigramGemma4Shape()
	o.Embd, o.Layers, o.FF, o.Heads, o.HeadsKV, o.HeadDim, o.Window, o.F16 = 2048, 16, 5632, 16, 8, 128, 512, true
	o.AssistantFF = 256
	return o
}

// BigramGemma4 is a Gemma 4 target and MTP assistant that agree the way a trained pair does:
// the target is BigramLlama's model of text in gemma4's shape (embedding and output carry the
// rank-Rank bigram log-probabilities; attention and feed-forward outputs zero), and the
// assistant, which sees the target's embedding of the last token and its hidden state,
// passes the embedding through (pre_projection selects it; its blocks' outputs are zero) to
// the target's output rows blurred by Noise: its guess of the token after next is the bigram
// of the token it is given. o's Embd must be at least Rank+3 (the assistant's hidden size is
// Rank+2, which must differ from the target's).
func BigramGemma4(text string, o Gemma4Options, b BigramOptions) (target, assistant *Builder, st *BigramStats, err error) {
	o = o.withDefaults()
	r := b.Rank
	o.AssistantEmbd = r + 2
	if o.Embd < r+3 {
		return nil, nil, nil, fmt.Errorf("bigram gemma4: n_embd %d, want at least rank+3 = %d", o.Embd, r+3)
	}
	b.Model.Merges = o.Merges
	clean := b
	clean.Noise = 0
	bm, err := bigramMatrices(text, clean, o.Embd)
	if err != nil {
		return nil, nil, nil, err
	}
	v := vocab{bm.tokens, bm.scores, bm.types}
	if target, err = gemma4Target(o, v); err != nil {
		return nil, nil, nil, err
	}
	E, V, Ea := uint64(o.Embd), uint64(len(bm.tokens)), uint64(o.AssistantEmbd)
	zero := func(bl *Builder, name string, in, out uint64) {
		bl.Replace(Tensor{Name: name, Type: TensorF32, Dims: []uint64{in, out}, Data: make([]byte, 4*in*out)})
	}
	q := uint64(o.HeadDim * o.Heads)
	target.Replace(Tensor{Name: "token_embd.weight", Type: TensorF32, Dims: []uint64{E, V}, Data: f32Slice(bm.embd)})
	target.Replace(Tensor{Name: "output.weight", Type: TensorF32, Dims: []uint64{E, V}, Data: f32Slice(bm.out)})
	for i := 0; i < o.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		zero(target, p+"attn_output.weight", q, E)
		zero(target, p+"ffn_down.weight", uint64(o.FF), E)
	}

	blurred, err := bigramMatrices(text, b, o.Embd)
	if err != nil {
		return nil, nil, nil, err
	}
	if assistant, err = gemma4Assistant(o, v); err != nil {
		return nil, nil, nil, err
	}
	// the assistant's output is its token embedding (tied): the blurred output rows, whose
	// entries past rank+1 are zero, cut to its width
	out := make([]float32, V*Ea)
	for t := uint64(0); t < V; t++ {
		copy(out[t*Ea:(t+1)*Ea], blurred.out[t*E:t*E+Ea])
	}
	assistant.Replace(Tensor{Name: "token_embd.weight", Type: TensorF32, Dims: []uint64{Ea, V}, Data: f32Slice(out)})
	// pre_projection [2E -> Ea]: the first Ea components of the target's (scaled) embedding
	pre := make([]float32, 2*E*Ea)
	for j := uint64(0); j < Ea; j++ {
		pre[j*2*E+j] = 1
	}
	assistant.Replace(Tensor{Name: "nextn.pre_projection.weight", Type: TensorF32, Dims: []uint64{2 * E, Ea}, Data: f32Slice(pre)})
	zero(assistant, "nextn.post_projection.weight", Ea, E)
	// the embedding arrives scaled by sqrt(E) with squared norm E·E over Ea dimensions: the
	// final norm's weight sqrt(E/Ea) gives back the embedding the output rows were made for
	w := float32(math.Sqrt(float64(E) / float64(Ea)))
	norm := make([]float32, Ea)
	for i := range norm {
		norm[i] = w
	}
	assistant.Replace(Tensor{Name: "output_norm.weight", Type: TensorF32, Dims: []uint64{Ea}, Data: f32Slice(norm)})
	for i := 0; i < o.AssistantLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		zero(assistant, p+"attn_output.weight", q, Ea)
		zero(assistant, p+"ffn_down.weight", uint64(o.AssistantFF), Ea)
	}
	target.Set("general.name", String("llbuild-bigram-gemma4"))
	assistant.Set("general.name", String("llbuild-bigram-gemma4-assistant"))
	return target, assistant, &bm.stats, nil
}
