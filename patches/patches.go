package patches

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/llbuild/llbuild/internal/digest"
)

//go:embed series *.patch
var embedded embed.FS

// PromptLogprobs is the patch that makes llama-server return prompt-token logprobs from one
// prefill (POST /completion "prompt_logprobs", advertised in GET /props).
const PromptLogprobs = "0002-server-prompt-logprobs.patch"

// PromptLogprobsAlone is the patch that gives llama-server --prompt-logprobs-alone: a scoring
// request shares no batch with another, so its log probabilities do not depend on the traffic.
const PromptLogprobsAlone = "0007-server-prompt-logprobs-alone.patch"

// NoDraftWithProbs is the patch that makes llama-server generate without drafting for a
// request that asks for token probabilities, so that no drafted token is answered logprob 0.
const NoDraftWithProbs = "0004-server-no-draft-with-probs.patch"

// Patch is one entry of the series.
type Patch struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	// Data is the patch file's contents.
	Data []byte `json:"-"`
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Series returns the built-in patch series, every file verified against its pinned digest.
func Series() ([]Patch, error) { return Load(embedded, "series") }

// Load reads a series file from fsys and the patches it names, checking each digest. All
// problems are reported together.
func Load(fsys fs.FS, seriesPath string) ([]Patch, error) {
	data, err := fs.ReadFile(fsys, seriesPath)
	if err != nil {
		return nil, fmt.Errorf("reading patch series: %w", err)
	}
	dir := path.Dir(seriesPath)
	var (
		out  []Patch
		errs []error
		seen = map[string]bool{}
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		where := fmt.Sprintf("%s:%d", seriesPath, line)
		if len(fields) != 2 || !strings.HasPrefix(fields[1], "sha256:") || !hex64.MatchString(strings.TrimPrefix(fields[1], "sha256:")) {
			errs = append(errs, fmt.Errorf("%s: want \"<file>.patch sha256:<64 hex>\", got %q", where, text))
			continue
		}
		name, want := fields[0], strings.TrimPrefix(fields[1], "sha256:")
		if strings.Contains(name, "/") || !strings.HasSuffix(name, ".patch") {
			errs = append(errs, fmt.Errorf("%s: %q must be a .patch file in the series' directory", where, name))
			continue
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("%s: %s is listed twice", where, name))
			continue
		}
		seen[name] = true
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if got := digest.SHA256Hex(body); got != want {
			errs = append(errs, fmt.Errorf("%s: %s has sha256 %s but the series pins %s; if the change is intended, update the series line to sha256:%s", where, name, got, want, got))
			continue
		}
		out = append(out, Patch{Name: name, SHA256: want, Data: body})
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// WriteSeries writes the built-in series file and its patches into dir, as they are embedded.
func WriteSeries(dir string) error {
	names := []string{"series"}
	s, err := Series()
	if err != nil {
		return err
	}
	for _, p := range s {
		names = append(names, p.Name)
	}
	for _, n := range names {
		b, err := embedded.ReadFile(n)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
