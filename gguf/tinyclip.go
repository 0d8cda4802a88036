package gguf

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// TinyProjectorOptions describe a tiny random-weight multimodal projector
// ("mmproj") of LLaVA's kind, as llama.cpp 34af94cd9 reads it
// (tools/mtmd/clip.cpp, models/llava.cpp): a small CLIP vision transformer
// whose patches pass through a two-layer "mlp" projector into the text
// model's embedding space. llama-server loads it with --mmproj beside a
// TinyLlama model, so that tests can send images through the real server.
// Zero fields take the values of DefaultTinyProjector(DefaultTiny()).
type TinyProjectorOptions struct {
	// Seed makes the weights; the same options give the same bytes.
	Seed uint64
	// Name is general.name.
	Name string
	// ImageSize is the side of the square image the encoder sees (every
	// image is resized to it) and PatchSize the side of one patch;
	// ImageSize must be a multiple of PatchSize. Each image becomes
	// (ImageSize/PatchSize)² embeddings in the text model's context.
	ImageSize, PatchSize int
	// Embd, Layers, Heads and FF are the vision transformer's dimensions.
	// FF must differ from Embd: llama.cpp takes a LLaVA encoder whose
	// ffn_down is Embd wide for one converted with up and down swapped.
	// The LLaVA graph runs all layers but the last, as LLaVA takes the
	// second-to-last layer's output.
	Embd, Layers, Heads, FF int
	// ProjectorFF is the width of the projector's hidden layer.
	ProjectorFF int
	// TextEmbd is the projector's output width, which llama.cpp requires to
	// be the text model's n_embd.
	TextEmbd int
}

// DefaultTinyProjector is a projector for the text model text: a two-layer
// encoder of width 32 on 32×32 images in 8×8 patches (16 image tokens),
// projecting to text's embedding length, about 120 KB.
func DefaultTinyProjector(text TinyOptions) TinyProjectorOptions {
	text = text.withDefaults()
	return TinyProjectorOptions{
		Seed: text.Seed + 100, Name: text.Name + "-mmproj",
		ImageSize: 32, PatchSize: 8,
		Embd: 32, Layers: 2, Heads: 2, FF: 64,
		ProjectorFF: 64, TextEmbd: text.Embd,
	}
}

// TinyProjectorFor is DefaultTinyProjector for the text model model, read from its header: it
// projects to the model's embedding length, which llama.cpp requires of a projector, and is
// named after it. A file that is itself a projector, or names no embedding length, is refused.
func TinyProjectorFor(model *File) (TinyProjectorOptions, error) {
	fa := model.Facts()
	switch {
	case fa.Architecture == "":
		return TinyProjectorOptions{}, fmt.Errorf("the model names no general.architecture")
	case fa.Architecture == "clip":
		return TinyProjectorOptions{}, fmt.Errorf("the model is itself a projector (general.architecture clip): give the text model it is for")
	case fa.EmbeddingLength == 0 || fa.EmbeddingLength > 1<<20:
		return TinyProjectorOptions{}, fmt.Errorf("the model's %s.embedding_length is %d: no projector fits it", fa.Architecture, fa.EmbeddingLength)
	}
	name := fa.Name
	if name == "" {
		name = fa.Architecture
	}
	return DefaultTinyProjector(TinyOptions{Name: name, Embd: int(fa.EmbeddingLength)}), nil
}

func (o TinyProjectorOptions) withDefaults() TinyProjectorOptions {
	d := DefaultTinyProjector(DefaultTiny())
	if o.Name == "" {
		o.Name = d.Name
	}
	for _, p := range []struct{ v, d *int }{
		{&o.ImageSize, &d.ImageSize}, {&o.PatchSize, &d.PatchSize}, {&o.Embd, &d.Embd}, {&o.Layers, &d.Layers},
		{&o.Heads, &d.Heads}, {&o.FF, &d.FF}, {&o.ProjectorFF, &d.ProjectorFF}, {&o.TextEmbd, &d.TextEmbd},
	} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	return o
}

// TinyProjector builds the projector o describes, all F32: the keys
// llama.cpp's clip loader requires (clip.projector_type "mlp", the
// clip.vision.* hyperparameters, image_mean and image_std) and the tensors
// of a CLIP encoder (patch embedding with bias, position embedding,
// pre-layernorm, per layer ln1, attn_q/k/v/out, ln2, ffn_up/down, all with
// biases) and of the projector (mm.0 and mm.2, with a GELU between them).
// Weights are uniform with a 1/sqrt(fan-in) scale, so activations stay near
// unit size; norms are ones and biases zeros.
func TinyProjector(o TinyProjectorOptions) (*Builder, error) {
	o = o.withDefaults()
	switch {
	case o.ImageSize%o.PatchSize != 0:
		return nil, fmt.Errorf("tiny projector: image size %d is not a multiple of patch size %d", o.ImageSize, o.PatchSize)
	case o.Embd%o.Heads != 0:
		return nil, fmt.Errorf("tiny projector: n_embd %d does not divide into %d heads", o.Embd, o.Heads)
	case o.FF == o.Embd:
		return nil, fmt.Errorf("tiny projector: feed-forward length %d must differ from n_embd (llama.cpp would swap ffn_up and ffn_down)", o.FF)
	case o.Layers < 1:
		return nil, fmt.Errorf("tiny projector: %d layers", o.Layers)
	}
	side := o.ImageSize / o.PatchSize
	patches := side * side

	b := &Builder{Version: 3}
	b.Set("general.architecture", String("clip"))
	b.Set("general.name", String(o.Name))
	b.Set("general.description", String("tiny random-weight LLaVA-style projector for tests"))
	b.Set("general.file_type", Uint32(0)) // ALL_F32
	b.Set("general.alignment", Uint32(DefaultAlignment))
	b.Set("clip.projector_type", String("mlp"))
	b.Set("clip.has_vision_encoder", Bool(true))
	b.Set("clip.has_text_encoder", Bool(false))
	b.Set("clip.has_llava_projector", Bool(true))
	b.Set("clip.use_gelu", Bool(false)) // the encoder's FFN uses quick GELU, as CLIP's does
	b.Set("clip.vision.image_size", Uint32(uint32(o.ImageSize)))
	b.Set("clip.vision.patch_size", Uint32(uint32(o.PatchSize)))
	b.Set("clip.vision.embedding_length", Uint32(uint32(o.Embd)))
	b.Set("clip.vision.feed_forward_length", Uint32(uint32(o.FF)))
	b.Set("clip.vision.block_count", Uint32(uint32(o.Layers)))
	b.Set("clip.vision.projection_dim", Uint32(uint32(o.TextEmbd)))
	b.Set("clip.vision.attention.head_count", Uint32(uint32(o.Heads)))
	b.Set("clip.vision.attention.layer_norm_epsilon", Float32(1e-5))
	// CLIP's preprocessing constants.
	b.Set("clip.vision.image_mean", Array([]float32{0.48145466, 0.4578275, 0.40821073}))
	b.Set("clip.vision.image_std", Array([]float32{0.26862954, 0.26130258, 0.27577711}))

	rng := rand.New(rand.NewPCG(o.Seed, 0x6d6d70726f6a)) // "mmproj"
	uniform := func(name string, dims []uint64, scale float64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		b.Add(Tensor{Name: name, Type: TensorF32, Dims: dims, Data: f32Bytes(n, func() float64 { return (rng.Float64()*2 - 1) * scale })})
	}
	constant := func(name string, n int, v float64) {
		b.Add(Tensor{Name: name, Type: TensorF32, Dims: []uint64{uint64(n)}, Data: f32Bytes(uint64(n), func() float64 { return v })})
	}
	matrix := func(name string, in, out int) {
		uniform(name+".weight", []uint64{uint64(in), uint64(out)}, 1/math.Sqrt(float64(in)))
		constant(name+".bias", out, 0)
	}
	norm := func(name string) {
		constant(name+".weight", o.Embd, 1)
		constant(name+".bias", o.Embd, 0)
	}

	p, e := uint64(o.PatchSize), uint64(o.Embd)
	// A convolution kernel in ggml's order: width, height, channels, outputs.
	uniform("v.patch_embd.weight", []uint64{p, p, 3, e}, 1/math.Sqrt(float64(3*p*p)))
	constant("v.patch_embd.bias", o.Embd, 0)
	uniform("v.position_embd.weight", []uint64{e, uint64(patches)}, 0.1)
	norm("v.pre_ln")
	for i := 0; i < o.Layers; i++ {
		k := fmt.Sprintf("v.blk.%d.", i)
		norm(k + "ln1")
		matrix(k+"attn_q", o.Embd, o.Embd)
		matrix(k+"attn_k", o.Embd, o.Embd)
		matrix(k+"attn_v", o.Embd, o.Embd)
		matrix(k+"attn_out", o.Embd, o.Embd)
		norm(k + "ln2")
		matrix(k+"ffn_up", o.Embd, o.FF)
		matrix(k+"ffn_down", o.FF, o.Embd)
	}
	matrix("mm.0", o.Embd, o.ProjectorFF)
	matrix("mm.2", o.ProjectorFF, o.TextEmbd)
	return b, nil
}

// WriteTinyProjectorFile writes TinyProjector(o) to path, through a
// temporary file renamed into place.
func WriteTinyProjectorFile(path string, o TinyProjectorOptions) error {
	b, err := TinyProjector(o)
	if err != nil {
		return err
	}
	return b.WriteFile(path)
}
