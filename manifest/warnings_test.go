package manifest

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/patches"
)

func TestWarnMissingPatchesNamesThePatchTheServerLacks(t *testing.T) {
	draft := &Model{Path: "models/draft.gguf"}
	withPatch := func(names ...string) Build {
		var b Build
		for _, n := range names {
			b.Patches = append(b.Patches, Patch{Name: n})
		}
		return b
	}
	native := Contract{PromptLogprobs: PromptLogprobsNative}
	alone := Contract{PromptLogprobs: PromptLogprobsNative, ScoresTrafficIndependent: true}
	tests := []struct {
		name        string
		m           Manifest
		scoresAlone bool
		want        []string
	}{
		{"a draft without the patch", Manifest{Models: Models{Draft: draft}, Contract: alone}, true, []string{patches.NoDraftWithProbs, "draft=models/draft.gguf"}},
		{"a draft with the patch", Manifest{Models: Models{Draft: draft}, Build: withPatch(patches.NoDraftWithProbs), Contract: alone}, true, nil},
		{"no draft", Manifest{Contract: alone}, true, nil},
		{"scores alone asked of a server without the patch", Manifest{Contract: native}, true, []string{patches.PromptLogprobsAlone}},
		{"scores alone not asked", Manifest{Contract: native}, false, nil},
	}
	for _, tt := range tests {
		var log bytes.Buffer
		WarnMissingPatches(slog.New(slog.NewTextHandler(&log, nil)), &tt.m, tt.scoresAlone)
		if got, want := strings.Count(log.String(), "level=WARN"), min(1, len(tt.want)); got != want {
			t.Errorf("%s: WarnMissingPatches() logged %q, want %d warning(s)", tt.name, log.String(), want)
		}
		for _, w := range tt.want {
			if !strings.Contains(log.String(), w) {
				t.Errorf("%s: WarnMissingPatches() logged %q, want it to name %q", tt.name, log.String(), w)
			}
		}
	}
}
