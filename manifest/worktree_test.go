package manifest

import (
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
)

// A build from a plain directory keeps, in the bundle, that its commit was not checked and the
// tree it was built from (the bundle used to drop both, and runs claimed the commit).
func TestBundleKeepsAnUnverifiedSourceAndItsTree(t *testing.T) {
	tree := "sha256:" + strings.Repeat("c3", 32)
	p := artifacts.Provenance{PlanHash: strings.Repeat("ab", 32), Plan: []byte(`{"target":"cpu-v3"}`),
		Materials: artifacts.Materials{Source: artifacts.Source{URL: "https://github.com/ggml-org/llama.cpp", Commit: strings.Repeat("1", 40), Unverified: true, Tree: tree}}}
	b, err := buildOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Source.Unverified || b.Source.Tree != tree || b.Source.Commit != strings.Repeat("1", 40) {
		t.Errorf("build source %+v, want unverified with its tree", b.Source)
	}
}
