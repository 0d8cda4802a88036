package manifest

import (
	"log/slog"

	"github.com/llbuild/llbuild/patches"
)

// WarnMissingPatches warns of what a bundle's server cannot keep for want of a patch. A draft
// packed with a llama-server built without patches.NoDraftWithProbs would answer logprob 0 for
// every drafted token, so serve refuses requests for the logprobs of generated tokens; and
// with scoresAlone asked for, native prompt-token logprobs of a server without
// patches.PromptLogprobsAlone depend on concurrent traffic.
func WarnMissingPatches(log *slog.Logger, m *Manifest, scoresAlone bool) {
	if m.Models.Draft != nil && !m.Build.hasPatch(patches.NoDraftWithProbs) {
		log.Warn("the draft is packed with a llama-server built without patch "+patches.NoDraftWithProbs+": it would answer logprob 0 for every drafted token, so serve refuses requests for the logprobs of generated tokens; build with the patch series, or bundle without --draft",
			"draft", m.Models.Draft.Path)
	}
	if ct := m.Contract; scoresAlone && ct.PromptLogprobs == PromptLogprobsNative && !ct.ScoresTrafficIndependent {
		log.Warn("native prompt-token logprobs will depend on concurrent traffic: the server was built without patch " +
			patches.PromptLogprobsAlone + "; rebuild with the patch series for bit-identical scores")
	}
}

func (b Build) hasPatch(name string) bool {
	for _, p := range b.Patches {
		if p.Name == name {
			return true
		}
	}
	return false
}
