package gguf

import (
	"bytes"
	"testing"
)

// A padded model has the vocabulary size asked for, matrices to match, and shares its
// vocabulary with another model padded to the same size (so one can draft for the other).
func TestPadVocab(t *testing.T) {
	facts := func(o TinyOptions, vocab int) Facts {
		b, err := TinyLlama(o)
		if err != nil {
			t.Fatal(err)
		}
		PadVocab(b, o, vocab)
		for _, tn := range b.Tensors {
			if (tn.Name == "token_embd.weight" || tn.Name == "output.weight") && vocab > 0 && tn.Dims[1] != uint64(vocab) {
				t.Errorf("%s dims %v, want %d rows", tn.Name, tn.Dims, vocab)
			}
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
	model, draft := facts(DefaultTiny(), 4000), facts(DraftTiny(), 4000)
	if model.VocabSize != 4000 || model.VocabSHA256 != draft.VocabSHA256 {
		t.Errorf("vocab %d (%s), draft's %s: want 4000 tokens shared", model.VocabSize, model.VocabSHA256, draft.VocabSHA256)
	}
	if plain := facts(DefaultTiny(), 0); plain.VocabSHA256 == model.VocabSHA256 || plain.VocabSize >= 4000 {
		t.Errorf("unpadded vocab %d has the padded one's digest", plain.VocabSize)
	}
}
