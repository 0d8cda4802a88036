package hostexec

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

// A plain directory's commit cannot be checked: provenance must not present the plan's
// commit as what was built, but name the tree that was.
func TestProvenanceOfPlainAndGitSources(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	series := fixture.Patches(t, "0001-server-greeting.patch")

	repo := filepath.Join(t.TempDir(), "fakellama")
	if err := copyTree(context.Background(), fixture.Source(), repo); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "fakellama")
	commit := git("rev-parse", "HEAD")

	tree, err := pipeline.TreeHash(fixture.Source())
	if err != nil {
		t.Fatal(err)
	}
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, commit), series)
	for _, tt := range []struct {
		name, source string
		want         artifacts.Source
	}{
		{"a plain directory is unverified, named by its tree", fixture.Source(), artifacts.Source{URL: p.Source.URL, Commit: commit, Unverified: true, Tree: tree}},
		{"a git repository's commit is checked out: verified", repo, artifacts.Source{URL: p.Source.URL, Commit: commit}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			dir, err := e.executor(t, tt.source, series).Build(context.Background(), p, e.out)
			if err != nil {
				t.Fatalf("Build() = %v", err)
			}
			a, err := artifacts.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Provenance.Materials.Source; got != tt.want {
				t.Errorf("provenance source = %+v, want %+v", got, tt.want)
			}
			// the fixture's one patch is neither named series
			if a.Manifest.Series != "custom" || a.Provenance.Series != "custom" {
				t.Errorf("series = %q in %s and %q in %s, want the plan's %q in both", a.Manifest.Series, artifacts.ManifestFile, a.Provenance.Series, artifacts.ProvenanceFile, p.Series)
			}
			// The host build ran in no devel image and ran no apt.
			if a.Provenance.Materials.Apt != nil {
				t.Errorf("provenance apt = %+v, want none for a host build", a.Provenance.Materials.Apt)
			}
		})
	}
}
