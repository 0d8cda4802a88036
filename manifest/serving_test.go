package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/patches"
)

func TestOpenServingReadsWhatServeTakes(t *testing.T) {
	m, contents := sample(t)
	dir := writeBundle(t, m, contents)
	s, err := OpenServing(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSuffix(filepath.Base(m.Models.Model.Path), ".gguf"); s.ModelName != want || s.NoPromptLogprobs != "" {
		t.Errorf("OpenServing() = model %q, no-prompt-logprobs %q; want %q and the contract kept", s.ModelName, s.NoPromptLogprobs, want)
	}
	if !filepath.IsAbs(s.Path) || s.Dir == "" {
		t.Errorf("OpenServing() launch = %+v, want an absolute program and the bundle's root", s.Launch)
	}

	m, contents = sample(t)
	m.Build.Series = patches.SeriesPlain
	if s, err := OpenServing(writeBundle(t, m, contents)); err != nil || !strings.Contains(s.NoPromptLogprobs, "plain series") {
		t.Errorf("OpenServing(plain series) = %+v, %v; want why echo with logprobs is refused", s, err)
	}

	os.Remove(filepath.Join(dir, "lib/libllama.so.0.1"))
	if _, err := OpenServing(dir); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("OpenServing(missing library) = %v, want the bundle refused", err)
	}
}
