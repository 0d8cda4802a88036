package gguf_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/llamatest"
)

// TestTinyProjectorReadsBack checks that the projector is a well-formed
// GGUF file of architecture "clip" with the tensors llama.cpp's LLaVA
// loader looks for, and that its output width is the text model's.
func TestTinyProjectorReadsBack(t *testing.T) {
	text := gguf.DefaultTiny()
	o := gguf.DefaultTinyProjector(text)
	path := filepath.Join(t.TempDir(), "mmproj.gguf")
	if err := gguf.WriteTinyProjectorFile(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Facts().Architecture; got != "clip" {
		t.Errorf("architecture %q, want clip", got)
	}
	for key, want := range map[string]string{"clip.projector_type": "mlp"} {
		if v, ok := f.Get(key); !ok {
			t.Errorf("%s missing", key)
		} else if s, _ := v.AsString(); s != want {
			t.Errorf("%s = %q, want %q", key, s, want)
		}
	}
	if v, ok := f.Get("clip.has_vision_encoder"); !ok {
		t.Error("clip.has_vision_encoder missing")
	} else if b, _ := v.AsBool(); !b {
		t.Error("clip.has_vision_encoder is false")
	}
	if v, _ := f.Get("clip.vision.image_mean"); v.Len() != 3 {
		t.Errorf("clip.vision.image_mean has %d elements, want 3", v.Len())
	}
	dims := map[string][]uint64{}
	for _, ti := range f.Tensors {
		if ti.Type != gguf.TensorF32 {
			t.Errorf("%s is %v, want F32", ti.Name, ti.Type)
		}
		dims[ti.Name] = ti.Dims
	}
	side := uint64(o.ImageSize / o.PatchSize)
	for name, want := range map[string][]uint64{
		"v.patch_embd.weight":     {uint64(o.PatchSize), uint64(o.PatchSize), 3, uint64(o.Embd)},
		"v.position_embd.weight":  {uint64(o.Embd), side * side},
		"v.blk.1.ffn_down.weight": {uint64(o.FF), uint64(o.Embd)},
		"mm.0.weight":             {uint64(o.Embd), uint64(o.ProjectorFF)},
		"mm.2.weight":             {uint64(o.ProjectorFF), uint64(text.Embd)},
		"mm.2.bias":               {uint64(text.Embd)},
	} {
		if fmt.Sprint(dims[name]) != fmt.Sprint(want) {
			t.Errorf("%s dims %v, want %v", name, dims[name], want)
		}
	}

	// The same options give the same bytes.
	again := filepath.Join(t.TempDir(), "again.gguf")
	if err := gguf.WriteTinyProjectorFile(again, o); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two writes of the same options differ")
	}

	bad := o
	bad.FF = bad.Embd
	if err := gguf.WriteTinyProjectorFile(filepath.Join(t.TempDir(), "bad.gguf"), bad); err == nil {
		t.Error("a feed-forward length equal to n_embd was accepted")
	}
}

// tinyPNG is an 8×8 colour gradient, as a data URL.
func tinyPNG(t *testing.T) string {
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

// TestRealServerTakesImagesWithTinyProjector starts the recipe's llama-server
// (LLBUILD_PATCHED_LLAMA_SERVER) on the tiny text model with the tiny
// projector as --mmproj and sends a chat message holding an image: the
// server answers, and the image's embeddings add to the prompt's tokens.
func TestRealServerTakesImagesWithTinyProjector(t *testing.T) {
	server := enginetest.PatchedServer(t)
	dir := t.TempDir()
	text := gguf.DefaultTiny()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, text); err != nil {
		t.Fatal(err)
	}
	proj := gguf.DefaultTinyProjector(text)
	mmproj := filepath.Join(dir, "mmproj.gguf")
	if err := gguf.WriteTinyProjectorFile(mmproj, proj); err != nil {
		t.Fatal(err)
	}

	port, err := llamatest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "llama-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, server, "-m", model, "--mmproj", mmproj,
		"--host", "127.0.0.1", "--port", fmt.Sprint(port), "-c", "512", "-t", "2", "--parallel", "1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		logFile.Close()
	})
	serverLog := func() string {
		b, _ := os.ReadFile(logPath)
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		return string(b)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("llama-server exited before becoming healthy: %v\n%s", err, serverLog())
		default:
		}
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server not healthy after two minutes:\n%s", serverLog())
		}
	}

	type usage struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	chat := func(content any) usage {
		t.Helper()
		body, _ := json.Marshal(map[string]any{
			"messages":   []map[string]any{{"role": "user", "content": content}},
			"max_tokens": 4, "temperature": 0,
		})
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST /v1/chat/completions: %v\n%s", err, serverLog())
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/chat/completions: status %d: %s\n%s", resp.StatusCode, raw, serverLog())
		}
		var out usage
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("decoding %s: %v", raw, err)
		}
		return out
	}
	textPart := map[string]any{"type": "text", "text": "describe"}
	withImage := chat([]map[string]any{textPart, {"type": "image_url", "image_url": map[string]any{"url": tinyPNG(t)}}})
	without := chat([]map[string]any{textPart})
	if len(withImage.Choices) != 1 || withImage.Usage.CompletionTokens == 0 {
		t.Errorf("chat with an image = %+v, want one choice with generated tokens", withImage)
	}
	imageTokens := (proj.ImageSize / proj.PatchSize) * (proj.ImageSize / proj.PatchSize)
	// The image is (ImageSize/PatchSize)² embeddings in place of the media
	// marker, so the prompt grows by at least that many tokens.
	if withImage.Usage.PromptTokens < without.Usage.PromptTokens+imageTokens {
		t.Errorf("prompt tokens with the image %d, without %d: want at least %d image tokens more",
			withImage.Usage.PromptTokens, without.Usage.PromptTokens, imageTokens)
	}
	t.Logf("prompt tokens: %d with the image, %d without (%d image tokens); reply %q",
		withImage.Usage.PromptTokens, without.Usage.PromptTokens, imageTokens, withImage.Choices[0].Message.Content)
}
