package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestTinyLlamaFacts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts TinyOptions
		want Facts
	}{
		{"default", DefaultTiny(), Facts{
			Version: 3, Architecture: "llama", Name: "llbuild-tiny-llama",
			FileType: 1, FileTypeName: "MOSTLY_F16", Quantization: "F16",
			ContextLength: 2048, BlockCount: 2, EmbeddingLength: 64, VocabSize: 519,
			TokenizerModel: "llama", BOS: 1, EOS: 2, TensorCount: 21,
		}},
		{"f32 v2", func() TinyOptions { o := DefaultTiny(); o.F32, o.Version = true, 2; return o }(), Facts{
			Version: 2, Architecture: "llama", Name: "llbuild-tiny-llama",
			FileType: 0, FileTypeName: "ALL_F32", Quantization: "F32",
			ContextLength: 2048, BlockCount: 2, EmbeddingLength: 64, VocabSize: 519,
			TokenizerModel: "llama", BOS: 1, EOS: 2, TensorCount: 21,
		}},
		{"draft", DraftTiny(), Facts{
			Version: 3, Architecture: "llama", Name: "llbuild-tiny-llama-draft",
			FileType: 1, FileTypeName: "MOSTLY_F16", Quantization: "F16",
			ContextLength: 2048, BlockCount: 1, EmbeddingLength: 32, VocabSize: 519,
			TokenizerModel: "llama", BOS: 1, EOS: 2, TensorCount: 12,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteTinyLlama(&buf, tc.opts); err != nil {
				t.Fatal(err)
			}
			got := decode(t, buf.Bytes()).Facts()
			if got.VocabSHA256 == "" || got.Parameters == 0 {
				t.Errorf("VocabSHA256 %q Parameters %d, want both set", got.VocabSHA256, got.Parameters)
			}
			got.VocabSHA256, got.Parameters = "", 0
			if got != tc.want {
				t.Errorf("Facts() =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestDraftVocabularies(t *testing.T) {
	facts := func(o TinyOptions) Facts {
		var buf bytes.Buffer
		if err := WriteTinyLlama(&buf, o); err != nil {
			t.Fatal(err)
		}
		return decode(t, buf.Bytes()).Facts()
	}
	model, draft, other := facts(DefaultTiny()), facts(DraftTiny()), facts(OtherVocabTiny())
	if draft.VocabSHA256 != model.VocabSHA256 || draft.VocabSize != model.VocabSize {
		t.Errorf("DraftTiny vocabulary %d %s, want the model's %d %s", draft.VocabSize, draft.VocabSHA256, model.VocabSize, model.VocabSHA256)
	}
	if other.VocabSHA256 == model.VocabSHA256 || other.VocabSize == model.VocabSize {
		t.Errorf("OtherVocabTiny vocabulary %d equals the model's %d", other.VocabSize, model.VocabSize)
	}
}

func TestTinyLlamaIsDeterministic(t *testing.T) {
	write := func(o TinyOptions) [32]byte {
		var buf bytes.Buffer
		if err := WriteTinyLlama(&buf, o); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(buf.Bytes())
	}
	a, b := write(DefaultTiny()), write(DefaultTiny())
	if a != b {
		t.Errorf("two writes with seed 1 differ: %x, %x", a, b)
	}
	o := DefaultTiny()
	o.Seed = 99
	if write(o) == a {
		t.Errorf("seeds 1 and 99 gave the same bytes")
	}
}

func TestTinyLlamaSizeAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteTinyLlamaFile(path, DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size < 100<<10 || f.Size > 1<<20 {
		t.Errorf("tiny model is %d bytes, want a few hundred KB", f.Size)
	}
	if f.DataOffset+f.DataSize != f.Size {
		t.Errorf("DataOffset %d + DataSize %d != file size %d", f.DataOffset, f.DataSize, f.Size)
	}
}

// TestTinyVocabPieces checks the tokenizer's shape: the control tokens and
// byte tokens at llama.cpp's SPM positions, ▁-prefixed words, and merged
// pieces scored above single characters.
func TestTinyVocabPieces(t *testing.T) {
	tokens, scores, types := TinyVocab(220)
	if tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[2] != "</s>" || types[0] != tokenUnknown || types[1] != tokenControl {
		t.Errorf("first tokens %q types %v, want <unk> <s> </s> as unknown, control, control", tokens[:3], types[:3])
	}
	if tokens[3] != "<0x00>" || tokens[3+0x0A] != "<0x0A>" || tokens[258] != "<0xFF>" || types[258] != tokenByte {
		t.Errorf("byte tokens %q %q %q type %d, want <0x00> <0x0A> <0xFF> type %d", tokens[3], tokens[13], tokens[258], types[258], tokenByte)
	}
	index := map[string]int{}
	for i, tok := range tokens {
		if _, dup := index[tok]; dup {
			t.Errorf("token %q appears twice", tok)
		}
		index[tok] = i
	}
	for _, w := range []string{"▁the", "▁hello", "▁world", "▁model", "▁capital", "e", "▁"} {
		if _, ok := index[w]; !ok {
			t.Errorf("piece %q missing", w)
		}
	}
	if scores[index["▁the"]] <= scores[index["e"]] {
		t.Errorf("score of ▁the %g <= score of e %g, want merged pieces first", scores[index["▁the"]], scores[index["e"]])
	}
}

// TestMTPDraftFacts builds the header of a gemma4-assistant draft as
// llama.cpp's converter writes it (conversion/gemma.py,
// Gemma4AssistantModel) and checks what a bundle needs to pair it with its
// target.
func TestMTPDraftFacts(t *testing.T) {
	tokens, _, _ := TinyVocab(50)
	b := &Builder{}
	b.Set("general.architecture", String("gemma4-assistant"))
	b.Set("general.name", String("Gemma 4 Assistant"))
	b.Set("general.file_type", Uint32(2))
	b.Set("gemma4-assistant.context_length", Uint32(131072))
	b.Set("gemma4-assistant.block_count", Uint32(4))
	b.Set("gemma4-assistant.embedding_length", Uint32(1024))
	b.Set("gemma4-assistant.embedding_length_out", Uint32(3840))
	b.Set("gemma4-assistant.nextn_predict_layers", Uint32(4))
	b.Set("tokenizer.ggml.model", String("gemma4"))
	b.Set("tokenizer.ggml.tokens", Array(tokens))
	got := decode(t, encode(t, b)).Facts()
	if got.DraftFor != "gemma4" || got.NextNPredictLayers != 4 || got.EmbeddingLengthOut != 3840 || got.Quantization != "Q4_0" || got.VocabSize != uint64(len(tokens)) {
		t.Errorf("Facts() = %+v, want DraftFor gemma4, 4 nextn layers, embedding_length_out 3840, Q4_0, %d tokens", got, len(tokens))
	}
	target := &Builder{}
	target.Set("general.architecture", String("gemma4"))
	if f := decode(t, encode(t, target)).Facts(); f.DraftFor != "" {
		t.Errorf("gemma4 model DraftFor = %q, want empty", f.DraftFor)
	}
}

func TestGuessedQuantization(t *testing.T) {
	b := &Builder{}
	b.Set("general.architecture", String("llama"))
	b.Add(Tensor{Name: "n", Type: TensorF32, Dims: []uint64{32}, Data: make([]byte, 128)})
	b.Add(Tensor{Name: "a", Type: TensorQ8_0, Dims: []uint64{32, 1}, Data: make([]byte, 34)})
	b.Add(Tensor{Name: "b", Type: TensorQ8_0, Dims: []uint64{32, 1}, Data: make([]byte, 34)})
	b.Add(Tensor{Name: "c", Type: TensorF16, Dims: []uint64{32, 1}, Data: make([]byte, 64)})
	got := decode(t, encode(t, b)).Facts()
	if got.FileType != -1 || got.Quantization != "Q8_0 (guessed)" || got.Parameters != 128 {
		t.Errorf("Facts() FileType %d Quantization %q Parameters %d, want -1, Q8_0 (guessed), 128", got.FileType, got.Quantization, got.Parameters)
	}
}

func TestFactsJSONIsStable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTinyLlama(&buf, DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	f := decode(t, buf.Bytes()).Facts()
	a, _ := json.Marshal(f)
	var back Facts
	if err := json.Unmarshal(a, &back); err != nil || back != f {
		t.Errorf("JSON round trip = %+v, %v; want %+v", back, err, f)
	}
	var m map[string]any
	json.Unmarshal(a, &m)
	for _, k := range []string{"architecture", "quantization", "vocab_size", "vocab_sha256", "tokenizer_model", "context_length", "block_count", "file_type"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, a)
		}
	}
}

func TestVocabDigestIgnoresByteOrder(t *testing.T) {
	tokens, _, _ := TinyVocab(30)
	digest := func(big bool) string {
		b := &Builder{BigEndian: big}
		b.Set("tokenizer.ggml.tokens", Array(tokens))
		return decode(t, encode(t, b)).Facts().VocabSHA256
	}
	le, be := digest(false), digest(true)
	if le != be || le != vocabDigest(tokens) {
		t.Errorf("vocab digest little-endian %s, big-endian %s, from the strings %s; want all equal", le, be, vocabDigest(tokens))
	}
}
