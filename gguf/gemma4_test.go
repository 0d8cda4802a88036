package gguf

import (
	"bytes"
	"strings"
	"testing"
)

func TestGemma4PairFacts(t *testing.T) {
	o := TinyGemma4()
	read := func(b *Builder, err error) Facts {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		return f.Facts()
	}
	tf, af := read(Gemma4Target(o)), read(Gemma4Assistant(o))
	if tf.Architecture != "gemma4" || tf.EmbeddingLength != 64 || tf.BlockCount != 4 {
		t.Errorf("target facts %+v", tf)
	}
	if af.Architecture != "gemma4-assistant" || af.DraftFor != "gemma4" || af.EmbeddingLengthOut != tf.EmbeddingLength ||
		af.NextNPredictLayers != 2 || af.VocabSHA256 != tf.VocabSHA256 {
		t.Errorf("assistant facts %+v, want an MTP draft for gemma4 of the target's hidden size and vocabulary", af)
	}
	o.AssistantEmbd = o.Embd
	if _, err := Gemma4Assistant(o); err == nil || !strings.Contains(err.Error(), "must differ") {
		t.Errorf("an assistant of the target's own width: %v, want a refusal (llama.cpp would take it for no embedding_length_out)", err)
	}
}

func TestBigramGemma4Shapes(t *testing.T) {
	text := strings.Repeat(tinyCorpus, 3)
	o := TinyGemma4()
	o.Embd, o.Merges = 24, 80
	tb, ab, _, err := BigramGemma4(text, o, BigramOptions{Rank: 16, Noise: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	facts := func(b *Builder) Facts {
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		return f.Facts()
	}
	tf, af := facts(tb), facts(ab)
	if tf.Architecture != "gemma4" || af.DraftFor != "gemma4" || af.EmbeddingLength != 18 || af.EmbeddingLengthOut != 24 || af.VocabSHA256 != tf.VocabSHA256 {
		t.Errorf("target %+v, assistant %+v: want an assistant of rank+2 = 18 for the target's 24 and its vocabulary", tf, af)
	}
	if _, _, _, err := BigramGemma4(text, o, BigramOptions{Rank: 22}); err == nil {
		t.Error("rank 22 in a target of 24: no refusal (the assistant's 24 would equal the target's)")
	}
}
