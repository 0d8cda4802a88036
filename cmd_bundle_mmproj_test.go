package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/cmdutil"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/manifest"
)

func pngDataURL(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 24))
	for y := 0; y < 24; y++ {
		for x := 0; x < 40; x++ {
			img.Set(x, y, color.RGBA{uint8(6 * x), uint8(10 * y), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// A vision bundle on real parts: the recipe's llama-server with the tiny text model and a tiny
// random LLaVA-style projector written by the gguf package, bundled with --mmproj and served by
// llbuild serve: a chat request with an image is answered, the image's 16 embeddings in its
// prompt. A projector for another model and a file that is no projector are refused.
func TestBundleMMProjServesAnImageRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	server := enginetest.PatchedServer(t)
	dir := t.TempDir()
	model, proj, other := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "tiny-mmproj.gguf"), filepath.Join(dir, "wide-mmproj.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteTinyProjectorFile(proj, gguf.DefaultTinyProjector(gguf.DefaultTiny())); err != nil {
		t.Fatal(err)
	}
	wide := gguf.DefaultTinyProjector(gguf.DefaultTiny())
	wide.TextEmbd *= 2
	if err := gguf.WriteTinyProjectorFile(other, wide); err != nil {
		t.Fatal(err)
	}
	bundle := func(o, mmproj string) (int, string) {
		code, _, stderr := runCLI(t, "bundle", "-t", "cpu-v3", "--artifacts", filepath.Dir(server), "--model", model, "--mmproj", mmproj,
			"--ctx-size", "1024", "--threads", "2", "--parallel", "1", "-o", o, "-q", "--link")
		return code, stderr
	}
	b := filepath.Join(dir, "vision")
	if code, stderr := bundle(b, proj); code != exitOK {
		t.Fatalf("bundle --mmproj: exit %d\n%s", code, stderr)
	} else if strings.Contains(stderr, "another plan") {
		// the provisioned build is of a plain directory: the current plan is that tree's
		t.Errorf("bundle warns of a stale plan for artifacts of the current one:\n%s", stderr)
	}
	m, err := manifest.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	pj := m.Models.MMProj
	if pj == nil || pj.Path != "models/tiny-mmproj.gguf" || pj.Type != "mlp" || !pj.Vision || pj.Audio || pj.EmbeddingLength != m.Models.Model.GGUF.EmbeddingLength {
		t.Errorf("models.mmproj = %+v, want models/tiny-mmproj.gguf, mlp, vision, projecting to the model's %d", pj, m.Models.Model.GGUF.EmbeddingLength)
	}
	if i := slices.Index(m.Server.Args, "--mmproj"); i < 0 || i+1 >= len(m.Server.Args) || m.Server.Args[i+1] != "models/tiny-mmproj.gguf" {
		t.Errorf("llama-server's arguments %v lack --mmproj models/tiny-mmproj.gguf", m.Server.Args)
	}
	// re-made as a template (bisect, the publish gate), the bundle keeps its projector
	tgt, err := cmdutil.LoadTarget("cpu-v3", "")
	if err != nil {
		t.Fatal(err)
	}
	if in, err := manifest.TemplateInput(b, tgt, filepath.Dir(server)); err != nil || in.MMProj != filepath.Join(b, "models", "tiny-mmproj.gguf") || slices.Contains(in.ExtraArgs, "--mmproj") {
		t.Errorf("TemplateInput: mmproj %q extra %v (%v), want the bundle's projector, not an extra argument", in.MMProj, in.ExtraArgs, err)
	}
	for _, tc := range []struct{ mmproj, want string }{
		{other, "projects to 128-wide embeddings"},
		{model, "not a multimodal projector"},
	} {
		o := filepath.Join(dir, "refused")
		if code, stderr := bundle(o, tc.mmproj); code == exitOK || !strings.Contains(stderr, tc.want) {
			t.Errorf("bundle --mmproj %s: exit %d, want a refusal with %q\n%s", filepath.Base(tc.mmproj), code, tc.want, stderr)
		}
		if _, err := os.Stat(o); err == nil {
			t.Errorf("bundle --mmproj %s wrote %s", filepath.Base(tc.mmproj), o)
		}
	}

	base := startServe(t, b).base
	chat := func(content any) (int, int, []byte) {
		body, _ := json.Marshal(map[string]any{"max_tokens": 4, "temperature": 0,
			"messages": []map[string]any{{"role": "user", "content": content}}})
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		var out struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
			Choices []struct{} `json:"choices"`
		}
		if json.Unmarshal(buf.Bytes(), &out) != nil || len(out.Choices) != 1 {
			return resp.StatusCode, 0, buf.Bytes()
		}
		return resp.StatusCode, out.Usage.PromptTokens, buf.Bytes()
	}
	text := map[string]any{"type": "text", "text": "describe"}
	st, withImage, body := chat([]any{text, map[string]any{"type": "image_url", "image_url": map[string]any{"url": pngDataURL(t)}}})
	if st != 200 {
		t.Fatalf("chat with an image: status %d\n%s", st, body)
	}
	st, without, body := chat([]any{text})
	if st != 200 || withImage < without+16 {
		t.Errorf("prompt tokens %d with the image, %d without (status %d %s): want 16 more, the projector's embeddings", withImage, without, st, body)
	}
}

// The plain series on real parts: the provisioned build with patch 0001 alone, bundled and served
// by llbuild serve, answers completions and refuses echo with prompt logprobs, saying to rebuild
// with the scoring series.
func TestServeRefusesEchoOnARealPlainBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	server := enginetest.UnpatchedServer(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "plain")
	if code, _, stderr := runCLI(t, "bundle", "-t", "cpu-v3", "--artifacts", filepath.Dir(server), "--model", model, "--ctx-size", "1024",
		"--threads", "2", "--parallel", "1", "-o", b, "-q", "--link"); code != exitOK {
		t.Fatalf("bundle: exit %d\n%s", code, stderr)
	}
	m, err := manifest.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Build.Series != "plain" || m.Build.Contract != "upstream" {
		t.Fatalf("build series %q contract %q, want plain and upstream", m.Build.Series, m.Build.Contract)
	}
	base := startServe(t, b).base
	post := func(body map[string]any) (int, string) {
		raw, _ := json.Marshal(body)
		resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	if st, body := post(map[string]any{"prompt": "the quick brown fox", "max_tokens": 2, "temperature": 0}); st != 200 {
		t.Errorf("a plain completion: status %d\n%s", st, body)
	}
	st, body := post(map[string]any{"prompt": "the quick brown fox", "max_tokens": 1, "logprobs": 1, "echo": true})
	if st != 400 || !strings.Contains(body, "--series scoring") {
		t.Errorf("echo with logprobs: status %d %s, want 400 saying to rebuild with the scoring series", st, body)
	}
}
