package patches

import (
	"fmt"
	"strings"
)

// Named series: what a build carries, chosen by name.
const (
	// SeriesScoring is the whole built-in series: what the build needs, the scoring contract
	// (echo and prompt logprobs, 0002-0010), 0011 (a draft's work overlaps the target's) and
	// 0012-0013 (a step switches threads only for a waiting task the worker takes).
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

// NameOf says which series a build's applied patches are, given as "NAME sha256" pairs in
// order: scoring or plain when they are exactly that named series, none when empty, else
// custom.
func NameOf(applied [][2]string) string {
	if len(applied) == 0 {
		return "none"
	}
	for _, name := range SeriesNames {
		s, err := Named(name)
		if err != nil || len(s) != len(applied) {
			continue
		}
		same := true
		for i, p := range s {
			same = same && p.Name == applied[i][0] && strings.TrimPrefix(p.SHA256, "sha256:") == strings.TrimPrefix(applied[i][1], "sha256:")
		}
		if same {
			return name
		}
	}
	return "custom"
}

// Contract says what a build with these patches serves beyond upstream's llama-server:
// "scoring" (echo and prompt-token logprobs computed in the server, patch 0002) or "upstream".
func Contract(applied [][2]string) string {
	for _, p := range applied {
		if p[0] == PromptLogprobs {
			return "scoring"
		}
	}
	return "upstream"
}
