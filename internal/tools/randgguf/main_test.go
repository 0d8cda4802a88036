package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/llamatest"
)

func randgguf(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	if code := run(args, &stderr); code != 0 {
		t.Fatalf("randgguf %s = exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
}

// clipKeys are the keys llama.cpp's clip loader (tools/mtmd/clip.cpp) requires of a LLaVA
// projector, besides general.architecture clip.
var clipKeys = []string{
	"clip.projector_type", "clip.has_vision_encoder",
	"clip.vision.image_size", "clip.vision.patch_size", "clip.vision.embedding_length",
	"clip.vision.feed_forward_length", "clip.vision.block_count", "clip.vision.projection_dim",
	"clip.vision.attention.head_count", "clip.vision.attention.layer_norm_epsilon",
	"clip.vision.image_mean", "clip.vision.image_std",
}

// TestProjectorFitsTheModelItIsFor: -shape projector writes a projector whose output width is
// the embedding length of the model -model names (or -embd gives), with the keys and tensors
// llama.cpp's clip loader reads.
func TestProjectorFitsTheModelItIsFor(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		args func(model string) []string
		want uint64
	}{
		{"tiny", func(m string) []string { return []string{"-model", m} }, 64},
		{"draft", func(m string) []string { return []string{"-model", m} }, 32},
		{"embd", func(string) []string { return []string{"-embd", "2048"} }, 2048},
	} {
		t.Run(tt.name, func(t *testing.T) {
			model := filepath.Join(dir, tt.name+".gguf")
			if tt.name != "embd" {
				randgguf(t, "-shape", tt.name, "-o", model)
			}
			proj := filepath.Join(dir, tt.name+"-mmproj.gguf")
			randgguf(t, append([]string{"-shape", "projector", "-o", proj}, tt.args(model)...)...)
			f, err := gguf.Open(proj)
			if err != nil {
				t.Fatal(err)
			}
			if a := f.Facts().Architecture; a != "clip" {
				t.Errorf("general.architecture = %q, want clip", a)
			}
			for _, k := range clipKeys {
				if _, ok := f.Get(k); !ok {
					t.Errorf("%s missing", k)
				}
			}
			if v, ok := f.Get("clip.vision.projection_dim"); ok {
				if n, _ := v.AsUint(); n != tt.want {
					t.Errorf("clip.vision.projection_dim = %d, want %d", n, tt.want)
				}
			}
			var out []uint64
			for _, ti := range f.Tensors {
				if ti.Name == "mm.2.weight" {
					out = ti.Dims
				}
			}
			if len(out) != 2 || out[1] != tt.want {
				t.Errorf("mm.2.weight dims = %v, want [..., %d]: the model's embedding length", out, tt.want)
			}
		})
	}
}

// TestProjectorUsage: a projector needs the model it is for, once; model-only flags are refused
// for a projector and projector-only flags for a model, as usage (exit 2).
func TestProjectorUsage(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	proj := filepath.Join(dir, "p.gguf")
	randgguf(t, "-o", model)
	randgguf(t, "-shape", "projector", "-model", model, "-o", proj)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-shape", "projector"}, "-model MODEL.gguf or -embd N"},
		{[]string{"-shape", "projector", "-model", model, "-embd", "64"}, "one of them"},
		{[]string{"-shape", "projector", "-model", proj}, "itself a projector"},
		{[]string{"-shape", "projector", "-embd", "64", "-vocab", "1000"}, "-vocab applies to a model"},
		{[]string{"-model", model}, "apply to -shape projector"},
		{[]string{"-shape", "huge"}, "projector"},
	} {
		var stderr bytes.Buffer
		code := run(append(tt.args, "-o", filepath.Join(dir, "out.gguf")), &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("randgguf %v = exit %d, %q; want 2 saying %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

// TestRealServerLoadsTheProjector: the recipe's llama-server (LLBUILD_PATCHED_LLAMA_SERVER)
// loads randgguf's tiny model with randgguf's projector for it as --mmproj and answers a chat
// message holding an image, whose 16 embeddings add to the prompt.
func TestRealServerLoadsTheProjector(t *testing.T) {
	server := enginetest.PatchedServer(t)
	b, err := llamatest.External(context.Background(), server)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	proj := filepath.Join(dir, "mmproj.gguf")
	randgguf(t, "-o", model)
	randgguf(t, "-shape", "projector", "-model", model, "-o", proj)
	srv := llamatest.StartWith(t, b, model, "--mmproj", proj, "-c", "512", "-t", "2", "--parallel", "1")

	chat := func(content any) (promptTokens int) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{
			"messages":   []map[string]any{{"role": "user", "content": content}},
			"max_tokens": 2, "temperature": 0,
		})
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/chat/completions: status %d: %s (log %s)", resp.StatusCode, raw, srv.Log)
		}
		var out struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("decoding %s: %v", raw, err)
		}
		return out.Usage.PromptTokens
	}
	text := map[string]any{"type": "text", "text": "describe"}
	with := chat([]map[string]any{text, {"type": "image_url", "image_url": map[string]any{"url": pngDataURL(t)}}})
	without := chat([]map[string]any{text})
	if with < without+16 {
		t.Errorf("prompt tokens with the image %d, without %d: want at least 16 image tokens more", with, without)
	}
}

func pngDataURL(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for y := 0; y < 8; y++ {
		for x := 0; x < 8; x++ {
			img.Set(x, y, color.RGBA{uint8(32 * x), uint8(32 * y), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}
