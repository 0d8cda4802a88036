package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/manifest"
)

// Bundle is a verified bundle directory and how its llama-server starts.
type Bundle struct {
	// Dir is the bundle's directory, absolute.
	Dir string
	// Name is what the user called it (a directory or an archive), for messages.
	Name     string
	Manifest *manifest.Manifest
	// ManifestSHA256 is "sha256:HEX" of manifest.json.
	ManifestSHA256 string
	Launch         manifest.Launch
}

// OpenBundle verifies the bundle at dir (every file's size and sha256, the manifest's
// arguments and environment) and reads how to start it, as llbuild serve does.
func OpenBundle(dir, name string) (*Bundle, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if problems := manifest.Verify(abs); len(problems) > 0 {
		var b strings.Builder
		for _, p := range problems {
			b.WriteString("\n  " + p.String())
		}
		return nil, fmt.Errorf("bundle %s does not verify:%s", name, b.String())
	}
	raw, err := os.ReadFile(filepath.Join(abs, manifest.FileName))
	if err != nil {
		return nil, err
	}
	m, err := manifest.Load(abs)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	l, err := m.Launch(abs)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	sum := sha256.Sum256(raw)
	return &Bundle{Dir: abs, Name: name, Manifest: m, ManifestSHA256: "sha256:" + hex.EncodeToString(sum[:]), Launch: l}, nil
}

// deviceEnv is the environment that gives a run the device gpu: CUDA_VISIBLE_DEVICES for a
// CUDA bundle, ONEAPI_DEVICE_SELECTOR for a SYCL one (Level Zero), nothing for a CPU bundle.
func deviceEnv(backend, gpu string) []string {
	if gpu == "" {
		return nil
	}
	switch backend {
	case "cuda":
		return []string{"CUDA_VISIBLE_DEVICES=" + gpu}
	case "sycl":
		return []string{"ONEAPI_DEVICE_SELECTOR=level_zero:" + gpu}
	}
	return nil
}
