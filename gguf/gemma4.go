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
func gemma4Common(b *Builder, arch, name string, o Gemma4Options, embd, layers, ff int) {
	tokens, scores, types := TinyVocab(o.Merges)
	b.Set("general.architecture", String(arch))
	b.Set("general.name", String(name))
	b.Set("general.file_type", Uint32(0)) // ALL_F32
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
	b.Set("tokenizer.ggml.model", String("llama"))
	b.Set("tokenizer.ggml.tokens", Array(tokens))
	b.Set("tokenizer.ggml.scores", Array(scores))
	b.Set("tokenizer.ggml.token_type", Array(types))
	b.Set("tokenizer.ggml.unknown_token_id", Uint32(0))
	b.Set("tokenizer.ggml.bos_token_id", Uint32(1))
	b.Set("tokenizer.ggml.eos_token_id", Uint32(2))
	b.Set("tokenizer.ggml.add_bos_token", Bool(true))
	b.Set("tokenizer.ggml.add_eos_token", Bool(false))
	b.Set("tokenizer.chat_template", String(tinyChatTemplate))
}

// gemma4Tensors adds f32 tensors: random matrices and all-ones vectors.
type gemma4Tensors struct {
	b   *Builder
	rng *rand.Rand
}

func (g gemma4Tensors) matrix(name string, in, out int) {
	g.b.Add(weights(name, g.rng, []uint64{uint64(in), uint64(out)}, 1/math.Sqrt(float64(in)), true))
}

func (g gemma4Tensors) ones(name string, n int) {
	g.b.Add(Tensor{Name: name, Type: TensorF32, Dims: []uint64{uint64(n)}, Data: f32Bytes(uint64(n), func() float64 { return 1 })})
}

// Gemma4Target builds the target.
func Gemma4Target(o Gemma4Options) (*Builder, error) {
	o = o.withDefaults()
	if o.Layers < 2 || o.Heads%o.HeadsKV != 0 || o.HeadDim%2 != 0 {
		return nil, fmt.Errorf("gemma4: %d layers (at least 2: the assistant shares the last sliding and full layers), %d heads, %d KV heads, head size %d", o.Layers, o.Heads, o.HeadsKV, o.HeadDim)
	}
	b := &Builder{Version: 3}
	gemma4Common(b, "gemma4", "llbuild-tiny-gemma4", o, o.Embd, o.Layers, o.FF)
	b.Set("gemma4.embedding_length_per_layer_input", Uint32(0))
	g := gemma4Tensors{b, rand.New(rand.NewPCG(o.Seed, 0x67656d6d6134))} // "gemma4"
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

// Gemma4Assistant builds the MTP assistant of Gemma4Target(o).
func Gemma4Assistant(o Gemma4Options) (*Builder, error) {
	o = o.withDefaults()
	if o.AssistantEmbd == o.Embd {
		return nil, fmt.Errorf("gemma4-assistant: its hidden size %d must differ from the target's (llama.cpp reads embedding_length_out as the target's)", o.AssistantEmbd)
	}
	b := &Builder{Version: 3}
	const arch = "gemma4-assistant"
	gemma4Common(b, arch, "llbuild-tiny-gemma4-assistant", o, o.AssistantEmbd, o.AssistantLayers, o.AssistantFF)
	b.Set(arch+".embedding_length_out", Uint32(uint32(o.Embd)))
	b.Set(arch+".nextn_predict_layers", Uint32(uint32(o.AssistantLayers)))
	g := gemma4Tensors{b, rand.New(rand.NewPCG(o.Seed, 0x617373697374))} // "assist"
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
