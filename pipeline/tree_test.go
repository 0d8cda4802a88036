package pipeline

import (
	"strings"
	"testing"
)

// A build of a plain directory refuses a tree other than the one its plan was made for, and
// accepts the same tree, a plan without one, and a vendoring plan (whose tree is the package's).
func TestCheckSourceTree(t *testing.T) {
	p := &Plan{Source: Source{Commit: strings.Repeat("a", 40), Tree: "sha256:1111"}}
	if err := CheckSourceTree(p, "/src", "sha256:1111"); err != nil {
		t.Errorf("the plan's tree: %v", err)
	}
	if err := CheckSourceTree(p, "/src", "sha256:2222"); err == nil || !strings.Contains(err.Error(), "changed since the plan was made") {
		t.Errorf("another tree: %v, want a refusal", err)
	}
	if err := CheckSourceTree(&Plan{}, "/src", "sha256:2222"); err != nil {
		t.Errorf("a plan without a tree: %v", err)
	}
	if err := CheckSourceTree(&Plan{Source: p.Source, Vendor: &Source{}}, "/src", "sha256:2222"); err != nil {
		t.Errorf("a vendoring plan: %v", err)
	}
}

// A plan of a plain directory's build says in its text that the commit is unverified, and names
// the tree; a checkout's plan says nothing of a tree.
func TestPlanTextSaysAPlainTreeIsUnverified(t *testing.T) {
	commit := strings.Repeat("a", 40)
	for _, tc := range []struct {
		tree string
		want bool
	}{{"sha256:1111", true}, {"", false}} {
		var b strings.Builder
		p := &Plan{Hash: strings.Repeat("b", 64), Reproducible: true, Source: Source{URL: "https://github.com/ggml-org/llama.cpp", Commit: commit, Tree: tc.tree}}
		if err := p.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "source tree:   sha256:1111, a plain directory: UNVERIFIED"); got != tc.want {
			t.Errorf("tree %q: the text says unverified: %v, want %v\n%s", tc.tree, got, tc.want, b.String())
		}
	}
}
