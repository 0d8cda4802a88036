// Command bigramgguf writes a llama GGUF that carries a low-rank bigram model of a text
// (gguf.BigramLlama): a target and a draft that agree the way a trained pair does.
//
//	bible -f Gen1:1-Mal4:6 | sed -E 's/^[^ ]+ //' > ot.txt   # Debian's bible-kjv: the King James Version
//	go run ./internal/tools/bigramgguf -text ot.txt -shape target -o target.gguf
//	go run ./internal/tools/bigramgguf -text ot.txt -shape draft -o draft.gguf
//	go run ./internal/tools/bigramgguf -text ot.txt -shape gemma4 -o gemma4.gguf -assistant gemma4-assistant.gguf
//	go run ./internal/tools/bigramgguf -text ot.txt -shape gemma4 -cycle 600 -o walk.gguf -assistant walk-assistant.gguf
//
// A text's bigram model's greedy output falls into a cycle of a few tokens, where a draft is
// accepted all or nothing at fixed places (bench warns of the loop). -cycle N writes a model of
// a walk through N of the text's pieces instead (gguf.BigramOptions.Cycle): its output repeats
// only after N tokens, and its draft or assistant agrees on about nine steps in ten, so that a
// draft's acceptance falls with its length as a trained draft's does: the pair to sweep draft
// settings on.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/llbuild/llbuild/gguf"
)

func main() {
	text := flag.String("text", "", "the text `FILE` to model")
	out := flag.String("o", "", "output `FILE.gguf`")
	assistant := flag.String("assistant", "", "with -shape gemma4: write its MTP assistant to `FILE.gguf`")
	cycle := flag.Int("cycle", 0, "model a walk through `N` of the text's pieces (128 or more) instead of its bigrams")
	vocab := flag.Int("vocab", 0, "pad the vocabulary to `N` tokens the model never gives (as a real model's 32000 or 262144: the output layer and the sampling then cost what theirs do; the text's logits and greedy output stay the same)")
	shape := flag.String("shape", "target", "target (2 layers × 128, rank 64), draft (1 × 68, the target's rank 64 blurred), 1b (16 × 2048, rank 64: the target's logits at a 0.8B model's cost) gemma4 (a gemma4 target of 68 with its MTP assistant, -assistant) or gemma4-1b (the same at a 0.8B model's cost)")
	flag.Parse()
	if *text == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: bigramgguf -text FILE -o FILE.gguf [-shape target|draft|1b]")
		os.Exit(2)
	}
	if *shape == "gemma4" || *shape == "gemma4-1b" {
		g := gguf.BigramGemma4Shape()
		if *shape == "gemma4-1b" {
			g = gguf.BigramGemma4Shape1B()
		}
		if *assistant == "" {
			fmt.Fprintln(os.Stderr, "bigramgguf: -shape gemma4 and gemma4-1b write a target and its MTP assistant: give -assistant FILE.gguf")
			os.Exit(2)
		}
		data, err := os.ReadFile(*text)
		if err == nil {
			var t, a *gguf.Builder
			d := gguf.BigramShapes["draft"]
			if *cycle != 0 {
				d.Cycle, d.Noise = *cycle, gguf.CycleDraftNoise
			}
			d.Vocab = *vocab
			if t, a, _, err = gguf.BigramGemma4(string(data), g, d); err == nil {
				if err = t.WriteFile(*out); err == nil {
					err = a.WriteFile(*assistant)
				}
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bigramgguf:", err)
			os.Exit(1)
		}
		return
	}
	o, ok := gguf.BigramShapes[*shape]
	if !ok {
		fmt.Fprintf(os.Stderr, "bigramgguf: -shape %q: use target, draft or 1b\n", *shape)
		os.Exit(2)
	}
	if *cycle != 0 {
		o.Cycle = *cycle
		if o.Noise != 0 {
			o.Noise = gguf.CycleDraftNoise
		}
	}
	o.Vocab = *vocab
	data, err := os.ReadFile(*text)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigramgguf:", err)
		os.Exit(1)
	}
	b, st, err := gguf.BigramLlama(string(data), o)
	if err == nil {
		err = b.WriteFile(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigramgguf:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "bigramgguf: %s: vocabulary %d (padded to %d), %d tokens of text, rank %d keeps %.1f%% of the bigram log-probabilities' variance\n",
		*out, st.Vocab, st.Padded, st.Tokens, o.Rank, 100*st.Explained)
}
