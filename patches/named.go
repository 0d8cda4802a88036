package patches

import (
	"fmt"
	"strings"
)

// Named series: what a build carries, chosen by name.
const (
	// SeriesScoring is the whole built-in series: what the build needs plus the scoring
	// contract (echo and prompt logprobs, 0002-0010).
	SeriesScoring = "scoring"
	// SeriesPlain is upstream plus what the build needs and nothing that changes how the
	// server behaves: patch 0001 alone.
	SeriesPlain = "plain"
)

// BuildPatch is the one patch a plain build carries: a CUDA build with shared libraries links
// against the driver stub only with it.
const BuildPatch = "0001-ggml-cuda-link-driver-interface.patch"

// SeriesNames are the named series.
var SeriesNames = []string{SeriesScoring, SeriesPlain}

// Named returns the built-in series of that name.
func Named(name string) ([]Patch, error) {
	all, err := Series()
	if err != nil {
		return nil, err
	}
	switch name {
	case SeriesScoring:
		return all, nil
	case SeriesPlain:
		for _, p := range all {
			if p.Name == BuildPatch {
				return []Patch{p}, nil
			}
		}
		return nil, fmt.Errorf("the built-in series has no %s", BuildPatch)
	}
	return nil, fmt.Errorf("no series named %q: the named series are %s", name, strings.Join(SeriesNames, ", "))
}
