// Command randgguf writes a random-weight llama GGUF of a given shape with llbuild's own
// writer (package gguf), for benchmarks on machines that cannot download a model: a tiny,
// mid or 1B-class model, its vocabulary optionally padded to a real model's size.
//
//	go run ./internal/tools/randgguf -shape 1b -vocab 32000 -o model.gguf
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llbuild/llbuild/gguf"
)

func main() {
	out := flag.String("o", "", "output `FILE.gguf`")
	shape := flag.String("shape", "tiny", "tiny (2 layers × 64), draft (1 × 32), mid (8 × 512) or 1b (16 × 2048, about 0.8B parameters with a 32,000 vocabulary)")
	vocab := flag.Int("vocab", 0, "pad the vocabulary to `N` tokens (0: the tiny vocabulary's 540)")
	seed := flag.Uint64("seed", 1, "weights' random `SEED`")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: randgguf -o FILE.gguf [-shape tiny|draft|mid|1b] [-vocab N] [-seed S]")
		os.Exit(2)
	}
	o := gguf.DefaultTiny()
	switch *shape {
	case "tiny":
	case "draft":
		o = gguf.DraftTiny()
	case "mid":
		o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-mid-llama", 512, 8, 8, 8, 1536
	case "1b":
		o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-1b-llama", 2048, 16, 16, 16, 5632
	default:
		fmt.Fprintf(os.Stderr, "randgguf: -shape %q: use tiny, draft, mid or 1b\n", *shape)
		os.Exit(2)
	}
	o.Seed = *seed
	if err := write(*out, o, *vocab); err != nil {
		fmt.Fprintf(os.Stderr, "randgguf: %v\n", err)
		os.Exit(1)
	}
}

func write(path string, o gguf.TinyOptions, vocab int) error {
	b, err := gguf.TinyLlama(o)
	if err != nil {
		return err
	}
	gguf.PadVocab(b, o, vocab)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".randgguf-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := b.WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
