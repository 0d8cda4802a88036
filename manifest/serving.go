package manifest

import (
	"path"
	"strings"

	"github.com/llbuild/llbuild/patches"
)

// Serving is what serving a bundle takes from it: how to start its llama-server, the model's
// name for the API, and why the server keeps no prompt-logprob contract ("" when it keeps one).
type Serving struct {
	Launch
	ModelName        string
	NoPromptLogprobs string
}

// OpenServing verifies the bundle directory dir against its manifest (every file's size and
// sha256) and reads what serving it takes.
func OpenServing(dir string) (*Serving, error) {
	if err := VerifyError(dir, dir); err != nil {
		return nil, err
	}
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	l, err := m.Launch(dir)
	if err != nil {
		return nil, err
	}
	s := &Serving{Launch: l, ModelName: strings.TrimSuffix(path.Base(m.Models.Model.Path), ".gguf")}
	if m.Build.Series == patches.SeriesPlain {
		s.NoPromptLogprobs = "this bundle's llama-server was built with the plain series (upstream plus patch 0001), which keeps no prompt-logprob contract: echo with logprobs needs the scoring series; rebuild with llbuild build --series scoring and bundle that"
	}
	return s, nil
}
