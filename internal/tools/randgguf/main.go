// Command randgguf writes a random-weight llama GGUF of a given shape with llbuild's own
// writer (package gguf), for benchmarks on machines that cannot download a model: a tiny,
// mid or 1B-class model, its vocabulary optionally padded to a real model's size; or a tiny
// vision projector (mmproj) for such a model, to try bundle --mmproj and chat with images.
//
//	go run ./internal/tools/randgguf -shape 1b -vocab 32000 -o model.gguf
//	go run ./internal/tools/randgguf -shape projector -model model.gguf -o mmproj.gguf
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/llbuild/llbuild/gguf"
)

const usage = "usage: randgguf -o FILE.gguf [-shape tiny|draft|mid|1b] [-vocab N] [-seed S]\n" +
	"       randgguf -o MMPROJ.gguf -shape projector (-model MODEL.gguf | -embd N) [-seed S]"

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run is the command: its exit status is 0, 1 when writing failed, 2 for a usage mistake.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("randgguf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output `FILE.gguf`")
	shape := fs.String("shape", "tiny", "tiny (2 layers × 64), draft (1 × 32), mid (8 × 512), 1b (16 × 2048, about 0.8B parameters with a 32,000 vocabulary), "+
		"or projector: a tiny LLaVA-style vision projector (CLIP encoder, mlp projector; 32×32 images, 16 image tokens) for the model -model or -embd names, which llama-server loads with --mmproj")
	vocab := fs.Int("vocab", 0, "pad the vocabulary to `N` tokens (0: the tiny vocabulary's 540)")
	seed := fs.Uint64("seed", 1, "weights' random `SEED`")
	model := fs.String("model", "", "with -shape projector: the text `MODEL.gguf` the projector is for (it projects to its embedding length)")
	embd := fs.Int("embd", 0, "with -shape projector: the text model's embedding length `N`, instead of -model")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "randgguf: "+format+"\n", a...)
		return code
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if *shape == "projector" {
		if *vocab != 0 {
			return fail(2, "-vocab applies to a model, not a projector")
		}
		o, err := projectorOptions(*model, *embd)
		if err != nil {
			return fail(2, "%v", err)
		}
		o.Seed = *seed
		b, err := gguf.TinyProjector(o)
		if err == nil {
			err = writeFile(*out, b)
		}
		if err != nil {
			return fail(1, "%v", err)
		}
		return 0
	}
	if *model != "" || *embd != 0 {
		return fail(2, "-model and -embd apply to -shape projector")
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
		return fail(2, "-shape %q: use tiny, draft, mid, 1b or projector", *shape)
	}
	o.Seed = *seed
	b, err := gguf.TinyLlama(o)
	if err != nil {
		return fail(1, "%v", err)
	}
	gguf.PadVocab(b, o, *vocab)
	if err := writeFile(*out, b); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// projectorOptions are the projector for the model file, or for a model of embedding length
// embd: exactly one of them.
func projectorOptions(model string, embd int) (gguf.TinyProjectorOptions, error) {
	switch {
	case (model == "") == (embd == 0):
		return gguf.TinyProjectorOptions{}, errors.New("-shape projector needs the model it is for: -model MODEL.gguf or -embd N, one of them")
	case embd < 0:
		return gguf.TinyProjectorOptions{}, fmt.Errorf("-embd %d: want the text model's embedding length", embd)
	case embd > 0:
		return gguf.DefaultTinyProjector(gguf.TinyOptions{Embd: embd}), nil
	}
	f, err := gguf.Open(model)
	if err != nil {
		return gguf.TinyProjectorOptions{}, err
	}
	o, err := gguf.TinyProjectorFor(f)
	if err != nil {
		return o, fmt.Errorf("%s: %w", model, err)
	}
	return o, nil
}

// writeFile writes b to path through a temporary file renamed into place.
func writeFile(path string, b *gguf.Builder) error {
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
