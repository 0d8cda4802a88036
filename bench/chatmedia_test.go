package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/manifest"
)

// pngSignature is base64 of a PNG file's first bytes: enough for a part to be checked, which
// decodes the base64 and leaves the image to the server.
const pngSignature = "iVBORw0KGgo="

func messagesWith(parts string) string {
	return `[{"role":"system","content":"Answer briefly."},{"role":"user","content":[{"type":"text","text":"What is this?"}` + parts + `]}]`
}

func imagePart(url string) string {
	return `,{"type":"image_url","image_url":{"url":"` + url + `"}}`
}

// The images of chat messages are their image_url parts' base64, in order; an image is a data:
// URL of an image type in base64 (a remote or local URL would make the server fetch it), a part
// is text or image_url, and every problem is reported at once, each naming its part.
func TestChatImagesTakeDataURLsOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		want    int
		wantErr []string
	}{
		{"plain text", "Name the days of the week.", 0, nil},
		{"text messages", `[{"role":"user","content":"hello"}]`, 0, nil},
		{"not JSON, refused before a server starts", `[{"role": 1`, 0, []string{"starts with [ but is not a JSON array of chat messages", "unexpected end of JSON input"}},
		{"an empty conversation", `[]`, 0, []string{"no message in it"}},
		{"text parts", messagesWith(""), 0, nil},
		{"two images", messagesWith(imagePart("data:image/png;base64,"+pngSignature) + imagePart("data:image/jpeg;base64,"+pngSignature)), 2, nil},
		{"a remote image", messagesWith(imagePart("https://example.com/cat.png")), 0,
			[]string{`messages[1].content[1].image_url.url: "https://example.com/cat.png" is not a data: URL: bench fetches nothing`}},
		{"a local file", messagesWith(imagePart("file:///tmp/cat.png")), 0, []string{"is not a data: URL"}},
		{"not base64", messagesWith(imagePart("data:image/png,rawbytes")), 0, []string{"want data:image/TYPE;base64,"}},
		{"not an image", messagesWith(imagePart("data:text/plain;base64,aGk=")), 0, []string{"want data:image/TYPE;base64,"}},
		{"broken base64", messagesWith(imagePart("data:image/png;base64,@@@@")), 0, []string{"the image's base64 does not decode"}},
		{"an image_url part without a url", messagesWith(`,{"type":"image_url"}`), 0, []string{`messages[1].content[1]: an image_url part without`}},
		{"audio", messagesWith(`,{"type":"input_audio","input_audio":{"data":"aGk=","format":"wav"}}`), 0,
			[]string{`messages[1].content[1]: type "input_audio": bench sends text and image_url parts only`}},
		{"every problem together", messagesWith(imagePart("http://x/a.png") + imagePart("data:image/png;base64,"+pngSignature) + imagePart("data:image/png;base64,@")), 1,
			[]string{"messages[1].content[1].image_url.url", "messages[1].content[3].image_url.url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chatImages(tc.text)
			if len(got) != tc.want {
				t.Errorf("chatImages() = %d images, want %d", len(got), tc.want)
			}
			for _, img := range got {
				if img != pngSignature {
					t.Errorf("chatImages() image %q, want the URL's base64 alone", img)
				}
			}
			if tc.wantErr == nil && err != nil {
				t.Errorf("chatImages() error %v, want none", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("chatImages() error %v, want %q", err, w)
				}
			}
		})
	}
}

// A --chat prompt file's images are counted into the protocol, whose key then differs from the
// same messages' without them and says how many; without --chat the file is text and has
// none. A remote image is a usage problem naming the file and the part.
func TestSettingsCountTheChatImages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	withImage := write("image.json", messagesWith(imagePart("data:image/png;base64,"+pngSignature)))
	s := defaultSettings()
	s.PromptFile, s.Chat = withImage, true
	o, err := s.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.Protocol.Images != 1 || !strings.Contains(o.Protocol.Key(), "-img1-") {
		t.Errorf("protocol images %d, key %s: want 1 image, named in the key", o.Protocol.Images, o.Protocol.Key())
	}
	if full := o.Protocol.FullMode(false); full.Images != 1 {
		t.Errorf("FullMode() images %d, want the sweep's 1", full.Images)
	}
	s.Chat = false
	if o, err := s.Options(); err != nil || o.Protocol.Images != 0 {
		t.Errorf("without --chat: images %d (%v), want 0: the file is text", o.Protocol.Images, err)
	}
	s.PromptFile, s.Chat = write("remote.json", messagesWith(imagePart("https://example.com/cat.png"))), true
	if _, err := s.Options(); err == nil || !strings.Contains(err.Error(), "prompt file "+s.PromptFile+": messages[1].content[1].image_url.url") {
		t.Errorf("Options() with a remote image: %v, want the file and the part named", err)
	}
	p := o.Protocol
	p.Images = 2
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "images 2: the prompt file's messages hold 1") {
		t.Errorf("Validate() with a wrong count: %v", err)
	}
}

// Images need a vision projector in every bundle measured, the control included: a bundle
// without one is refused before anything starts (the campaign directory is not made), as the
// caller's mistake, naming the fix.
func TestRunRefusesImagesWithoutAProjector(t *testing.T) {
	withVision := testBundle(func(m *manifest.Manifest) {
		m.Models.MMProj = &manifest.Projector{Path: "models/mmproj.gguf", Type: "mlp", Vision: true}
	})
	audioOnly := testBundle(func(m *manifest.Manifest) {
		m.Models.MMProj = &manifest.Projector{Path: "models/audio.gguf", Type: "whisper", Audio: true}
	})
	if err := takesImages([]*Bundle{withVision}, nil, 1); err != nil {
		t.Errorf("takesImages(a vision bundle) = %v, want nil", err)
	}
	if err := takesImages([]*Bundle{testBundle()}, nil, 0); err != nil {
		t.Errorf("takesImages(no images) = %v, want nil", err)
	}
	if err := takesImages([]*Bundle{withVision}, audioOnly, 1); err == nil || !strings.Contains(err.Error(), "takes audio, not images") {
		t.Errorf("takesImages(an audio control) = %v, want it refused", err)
	}

	p := fastProtocol(ModeScreen)
	p.Chat, p.Prompt, p.PromptFile, p.PromptText, p.Images = true, PromptFile, "m.json", messagesWith(imagePart("data:image/png;base64,"+pngSignature)), 1
	dir := filepath.Join(t.TempDir(), "campaign")
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: p, Dir: dir})
	if res != nil || err == nil || !inputerr.Is(err) || !strings.Contains(err.Error(), "has no vision projector") || !strings.Contains(err.Error(), "bundle it with --mmproj") {
		t.Errorf("Run() = %v, %v; want a usage error naming --mmproj", res, err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("Run() made %s before refusing", dir)
	}
}
