package gguf

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestCorpusVocabTokenizesItsText(t *testing.T) {
	text := strings.Repeat(tinyCorpus, 3)
	tokens, _, types, seq := CorpusVocab(text, 80)
	var b strings.Builder
	for _, id := range seq {
		if types[id] != tokenNormal {
			t.Fatalf("token %d (%q) of the text is not a normal piece", id, tokens[id])
		}
		b.WriteString(tokens[id])
	}
	if want := spaceMark + strings.Join(strings.Fields(text), spaceMark); b.String() != want {
		t.Errorf("the pieces do not spell the text:\n%.200s\nwant\n%.200s", b.String(), want)
	}
	if len(tokens) < 259+80 {
		t.Errorf("%d tokens, want the 259 control and byte tokens, the characters and 80 merges", len(tokens))
	}
}

func TestBigramLlamaIsDeterministicAndSharesItsVocabulary(t *testing.T) {
	text := strings.Repeat(tinyCorpus, 3)
	shape := func(seed uint64, embd, rank int, noise float64) BigramOptions {
		return BigramOptions{Model: TinyOptions{Seed: seed, Embd: embd, Layers: 1, Heads: 2, FF: 32, Merges: 80, F32: true}, Rank: rank, Noise: noise}
	}
	write := func(o BigramOptions) ([]byte, *Builder) {
		b, st, err := BigramLlama(text, o)
		if err != nil {
			t.Fatal(err)
		}
		if st.Explained <= 0 || st.Explained > 1.0000001 || st.Tokens == 0 {
			t.Errorf("stats %+v", st)
		}
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), b
	}
	a1, target := write(shape(1, 24, 16, 0))
	a2, _ := write(shape(1, 24, 16, 0))
	if !bytes.Equal(a1, a2) {
		t.Error("the same text and options gave different bytes")
	}
	_, draft := write(shape(2, 20, 16, 0.5))
	kv := func(b *Builder, key string) any {
		for _, e := range b.KV {
			if e.Key == key {
				return e.Value.Interface()
			}
		}
		return nil
	}
	for _, key := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"} {
		if v := kv(target, key); v == nil || !reflect.DeepEqual(v, kv(draft, key)) {
			t.Errorf("%s differs between the target and its draft", key)
		}
	}
	if _, _, err := BigramLlama(text, shape(1, 16, 16, 0)); err == nil || !strings.Contains(err.Error(), "n_embd-2") {
		t.Errorf("rank 16 in n_embd 16: %v, want a refusal", err)
	}
}
