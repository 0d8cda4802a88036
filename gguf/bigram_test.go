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

// Vocab pads a bigram model's vocabulary with tokens it never gives: the text's tokens, their
// embeddings and output rows are the unpadded model's, every padded token's logit is PadLogit
// for every input (its output row reads only the embeddings' constant component), and a padded
// token's embedding has the norm the final RMS norm expects.
func TestBigramVocabPadding(t *testing.T) {
	text := strings.Repeat(tinyCorpus, 3)
	o := BigramOptions{Model: TinyOptions{Seed: 1, Embd: 24, Layers: 1, Heads: 2, FF: 32, Merges: 80, F32: true}, Rank: 16}
	plain, err := bigramMatrices(text, o, 24)
	if err != nil {
		t.Fatal(err)
	}
	V, n := len(plain.tokens), 24
	o.Vocab = V + 300
	padded, err := bigramMatrices(text, o, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(padded.tokens) != V+300 || len(padded.embd) != (V+300)*n || len(padded.out) != (V+300)*n ||
		padded.stats.Vocab != V || padded.stats.Padded != V+300 {
		t.Fatalf("padded to %d: %d tokens, %d embedding and %d output values, stats %+v", V+300, len(padded.tokens), len(padded.embd), len(padded.out), padded.stats)
	}
	if !reflect.DeepEqual(padded.tokens[:V], plain.tokens) || !reflect.DeepEqual(padded.embd[:V*n], plain.embd) || !reflect.DeepEqual(padded.out[:V*n], plain.out) {
		t.Error("padding changed the text's tokens, embeddings or output rows")
	}
	for s := V; s < V+300; s++ {
		if strings.Contains(text, padded.tokens[s]) || padded.scores[s] > -1e8 {
			t.Fatalf("padded token %d: %q score %v", s, padded.tokens[s], padded.scores[s])
		}
		var norm2 float64
		for _, v := range padded.embd[s*n : (s+1)*n] {
			norm2 += float64(v) * float64(v)
		}
		if norm2 < float64(n)*0.999 || norm2 > float64(n)*1.001 {
			t.Fatalf("padded token %d's embedding has squared norm %.3f, want %d", s, norm2, n)
		}
	}
	// the logit of every padded token after every token (embeddings of squared norm n: the RMS
	// norm leaves them as they are)
	for tok := 0; tok < V+300; tok += 7 {
		e := padded.embd[tok*n : (tok+1)*n]
		for s := V; s < V+300; s += 50 {
			var logit float64
			for k := 0; k < n; k++ {
				logit += float64(e[k]) * float64(padded.out[s*n+k])
			}
			if logit > PadLogit+0.01 || logit < PadLogit-0.01 {
				t.Fatalf("after token %d the padded token %d's logit is %.3f, want %v", tok, s, logit, PadLogit)
			}
		}
	}
	// the gemma4 pair pads target and assistant alike
	g := BigramGemma4Shape()
	g.Merges = 80
	d := BigramOptions{Model: TinyOptions{Seed: 2}, Rank: 16, Noise: 0.5, Vocab: V + 300}
	target, assistant, st, err := BigramGemma4(text, g, d)
	if err != nil {
		t.Fatal(err)
	}
	if nt, na := len(target.kvStrings("tokenizer.ggml.tokens")), len(assistant.kvStrings("tokenizer.ggml.tokens")); nt != V+300 || na != V+300 || st.Padded != V+300 {
		t.Errorf("gemma4 pair padded to %d: target %d tokens, assistant %d, stats %+v", V+300, nt, na, st)
	}
}
