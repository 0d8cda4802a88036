package bench

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// chatImages are the images of a chat prompt file's messages (a JSON array of {"role",
// "content"}), in order: the base64 payloads of their image_url parts. A part is text or
// image_url, and an image is a data: URL of an image type in base64: the bench sends the bytes
// it measures and fetches nothing (llama-server would download a remote URL itself, its time
// and content outside the record). Text that is not a JSON array of messages has none; the run
// says what is wrong with it. The problems of every part are reported together.
func chatImages(text string) ([]string, error) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "[") {
		return nil, nil
	}
	var messages []struct {
		Content json.RawMessage `json:"content"`
	}
	// a chat prompt file that starts with [ is a conversation (what a run sends it as): one that
	// does not read as one is refused here, before any server starts
	if err := json.Unmarshal([]byte(t), &messages); err != nil || len(messages) == 0 {
		why := "no message in it"
		if err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("starts with [ but is not a JSON array of chat messages ({\"role\": ..., \"content\": ...}): %s", why)
	}
	var images []string
	var errs []error
	for i, m := range messages {
		c := strings.TrimSpace(string(m.Content))
		if !strings.HasPrefix(c, "[") {
			continue // text, null or absent: the template's business
		}
		var parts []struct {
			Type     string `json:"type"`
			ImageURL *struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal([]byte(c), &parts); err != nil {
			errs = append(errs, fmt.Errorf("messages[%d].content: want text or an array of parts ({\"type\": \"text\", ...} or {\"type\": \"image_url\", ...}): %v", i, err))
			continue
		}
		for j, p := range parts {
			at := fmt.Sprintf("messages[%d].content[%d]", i, j)
			switch p.Type {
			case "text":
			case "image_url":
				if p.ImageURL == nil {
					errs = append(errs, fmt.Errorf("%s: an image_url part without {\"image_url\": {\"url\": ...}}", at))
					continue
				}
				data, err := imageData(p.ImageURL.URL)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s.image_url.url: %w", at, err))
					continue
				}
				images = append(images, data)
			default:
				errs = append(errs, fmt.Errorf("%s: type %q: bench sends text and image_url parts only", at, p.Type))
			}
		}
	}
	return images, errors.Join(errs...)
}

// imageData is the base64 payload of a data: URL of an image.
func imageData(url string) (string, error) {
	shown := url
	if len(shown) > 48 {
		shown = shown[:48] + "…"
	}
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return "", fmt.Errorf("%q is not a data: URL: bench fetches nothing; put the image in the file as data:image/png;base64,…", shown)
	}
	header, payload, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(header, ";base64") || !strings.HasPrefix(header, "image/") {
		return "", fmt.Errorf("%q: want data:image/TYPE;base64,… (an image, base64-encoded)", shown)
	}
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", fmt.Errorf("%q: the image's base64 does not decode: %v", shown, err)
	}
	if len(raw) == 0 {
		return "", fmt.Errorf("%q: the image is empty", shown)
	}
	return payload, nil
}

// takesImages refuses, before anything starts, bundles that cannot see the protocol's images:
// without a vision projector the images would never reach an encoder and the run would
// measure text only under a protocol that says images.
func takesImages(bundles []*Bundle, control *Bundle, images int) error {
	if images == 0 {
		return nil
	}
	if control != nil {
		bundles = append(slices.Clip(bundles), control)
	}
	var errs []error
	for _, b := range bundles {
		switch pj := b.Manifest.Models.MMProj; {
		case pj == nil:
			errs = append(errs, inputerr.Errorf("bundle %s has no vision projector and the --chat messages hold %d image(s), which it would drop: bundle it with --mmproj PROJECTOR.gguf (the model's vision projector), or take the image parts out of the prompt file", b.Name, images))
		case pj.Audio && !pj.Vision:
			errs = append(errs, inputerr.Errorf("bundle %s's projector %s takes audio, not images, and the --chat messages hold %d image(s): bundle it with --mmproj and the model's vision projector", b.Name, pj.Path, images))
		}
	}
	return errors.Join(errs...)
}
