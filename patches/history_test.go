package patches

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
)

// history is a repository of the fixture tree with a main line of n commits after Old, each
// changing a file of its own, where change(i) may do more at commit i (1-based); commits of a
// side branch merged without fast-forward at merge are not on the first-parent path.
func history(t *testing.T, n, merge int, change func(dir string, i int)) (dir string, old string, line []string) {
	t.Helper()
	r := gitfixture.New(t)
	dir = r.Dir
	gitfixture.Git(t, dir, 0, "checkout", "--quiet", "-B", "master", r.Old)
	for i := 1; i <= n; i++ {
		when := r.OldTime + int64(i)*3600
		if i == merge {
			gitfixture.Git(t, dir, 0, "checkout", "--quiet", "-b", "side")
			for j := 0; j < 3; j++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("side-%d.txt", j)), []byte("side\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				gitfixture.Git(t, dir, 0, "add", "-A")
				gitfixture.Git(t, dir, when, "commit", "--quiet", "-m", fmt.Sprintf("side %d", j))
			}
			gitfixture.Git(t, dir, 0, "checkout", "--quiet", "master")
			gitfixture.Git(t, dir, when, "merge", "--quiet", "--no-ff", "-m", fmt.Sprintf("commit %d: merge side", i), "side")
		} else {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("history-%d.txt", i)), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			change(dir, i)
			gitfixture.Git(t, dir, 0, "add", "-A")
			gitfixture.Git(t, dir, when, "commit", "--quiet", "-m", fmt.Sprintf("commit %d (#%d)", i, 1000+i))
		}
		line = append(line, gitfixture.Git(t, dir, 0, "rev-parse", "HEAD"))
	}
	return dir, r.Old, line
}

func TestStatusRangeFindsWhereEachPatchChanged(t *testing.T) {
	const n, breaks, merged, merge = 64, 11, 40, 25
	dir, old, line := history(t, n, merge, func(dir string, i int) {
		switch i {
		case breaks: // upstream rewrites the line 0002 changes
			f := filepath.Join(dir, "ggml/src/ggml-cpu/ggml-cpu.c")
			b, _ := os.ReadFile(f)
			if err := os.WriteFile(f, []byte(strings.Replace(string(b), `"file: " __FILE__ "\n";`, `"source: " __FILE__ "\n";`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		case merged: // upstream merges the greeting
			gitfixture.Git(t, dir, 0, "apply", filepath.Join(gitfixture.PatchDir(), gitfixture.UpstreamPatch))
		}
	})
	p1, p2 := fixturePatch(t, gitfixture.UpstreamPatch), fixturePatch(t, "0002-ggml-cpu-build-info.patch")
	follow := onTopOf(t, dir, old, p2)
	rep, err := StatusRange(context.Background(), dir, old, "HEAD", []Patch{p1, p2, follow})
	if err != nil {
		t.Fatal(err)
	}
	if rep.From != old || rep.To != line[n-1] || rep.Commits != n {
		t.Fatalf("range = %s..%s, %d commits; want %s..%s, %d (the side branch's commits are not on the first-parent path)", rep.From, rep.To, rep.Commits, old, line[n-1], n)
	}
	want := []struct {
		from, to State
		at       int
		state    State
		dep      string
	}{
		{Applies, Upstream, merged, Upstream, ""},
		{Applies, Conflicts, breaks, Conflicts, ""},
		{Applies, Depends, breaks, Depends, p2.Name},
	}
	for i, w := range want {
		got := rep.Patches[i]
		if got.AtFrom != w.from || got.AtTo != w.to || got.Change == nil {
			t.Fatalf("%s: %s at the start, %s at the end, change %+v; want %s, %s and a change at commit %d", got.Name, got.AtFrom, got.AtTo, got.Change, w.from, w.to, w.at)
		}
		ch := got.Change
		if ch.Position != w.at || ch.Commit != line[w.at-1] || ch.Result.State != w.state || ch.Result.DependsOn != w.dep {
			t.Errorf("%s changed at commit %d (%s, %s, depends on %q); want commit %d (%s), %s, depends on %q", got.Name, ch.Position, ch.Commit, ch.Result.State, ch.Result.DependsOn, w.at, line[w.at-1], w.state, w.dep)
		}
		if wantSubject := fmt.Sprintf("commit %d (#%d)", w.at, 1000+w.at); ch.Subject != wantSubject {
			t.Errorf("%s: subject %q, want %q", got.Name, ch.Subject, wantSubject)
		}
	}
	if h := rep.Patches[1].Change.Result.Hunks; len(h) != 1 || !strings.HasPrefix(h[0], "ggml/src/ggml-cpu/ggml-cpu.c:") {
		t.Errorf("0002's hunks at the change = %v, want the one in ggml-cpu.c", h)
	}
	// bisection: the two ends, then at most log2(64) = 6 more commits per change, shared where
	// two patches changed at the same commit; checking every commit would take 65
	if rep.Probes > 2+6*2 {
		t.Errorf("checked %d commits; bisection of two changes over %d commits needs at most %d", rep.Probes, n, 2+6*2)
	}

	// a patch that applies throughout has no change
	rep, err = StatusRange(context.Background(), dir, old, line[breaks-2], []Patch{p1, p2})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Patches {
		if p.Change != nil || p.AtTo != Applies {
			t.Errorf("%s before the break: %s at the end, change %+v; want applies throughout", p.Name, p.AtTo, p.Change)
		}
	}
	if rep.Probes != 2 {
		t.Errorf("nothing changed but %d commits were checked, want the two ends", rep.Probes)
	}
}

// onTopOf is a patch made on top of p at commit: it cannot apply unless p does.
func onTopOf(t *testing.T, repo, commit string, p Patch) Patch {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	gitfixture.Git(t, filepath.Dir(dir), 0, "clone", "--quiet", repo, dir)
	gitfixture.Git(t, dir, 0, "checkout", "--quiet", commit)
	f := filepath.Join(t.TempDir(), p.Name)
	if err := os.WriteFile(f, p.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	gitfixture.Git(t, dir, 0, "apply", f)
	gitfixture.Git(t, dir, 0, "commit", "--quiet", "-am", "p")
	c := filepath.Join(dir, "ggml/src/ggml-cpu/ggml-cpu.c")
	b, _ := os.ReadFile(c)
	if err := os.WriteFile(c, []byte(strings.Replace(string(b), `"patched: 0002\n";`, `"patched: 0002\n"`+"\n"+`           "follow-up\n";`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "follow.patch")
	gitfixture.Git(t, dir, 0, "diff", "--output="+out)
	b, err := os.ReadFile(out)
	if err != nil || len(b) == 0 {
		t.Fatalf("making the follow-up patch: %v (%d bytes)", err, len(b))
	}
	return patchOf("0003-follow-up.patch", b)
}

func TestStatusRangeRefusesWhatIsNotARange(t *testing.T) {
	dir, old, line := history(t, 3, 0, func(string, int) {})
	plain := t.TempDir()
	series := []Patch{fixturePatch(t, gitfixture.UpstreamPatch)}
	tests := []struct {
		name, repo, from, to, want string
		noCommit                   bool
	}{
		{"reversed", dir, line[2], old, "is not an ancestor of", true},
		{"unknown commit", dir, old, "nosuchbranch", `has no commit "nosuchbranch"`, true},
		{"plain tree", plain, "a", "b", "plain tree", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := StatusRange(context.Background(), tt.repo, tt.from, tt.to, series)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
			if errors.Is(err, ErrNoCommit) != tt.noCommit {
				t.Errorf("errors.Is(err, ErrNoCommit) = %v, want %v", !tt.noCommit, tt.noCommit)
			}
		})
	}
}

// A range that starts at the commit after a shallow boundary whose tree is missing, as in the
// history ../shared carries (1425386fd's parent is there without its tree): git show -s needs the
// parent's tree and failed ("reading the time of 1425386fd: unable to read tree"); the commit's
// time and subject come from git log now, which reads the commit alone.
func TestStatusRangeFromTheCommitAfterAShallowBoundary(t *testing.T) {
	dir, old, line := history(t, 4, 0, func(string, int) {})
	tree := gitfixture.Git(t, dir, 0, "rev-parse", old+"^{tree}")
	loose := filepath.Join(dir, ".git", "objects", tree[:2], tree[2:])
	if err := os.Remove(loose); err != nil {
		t.Fatalf("removing the boundary's tree (the fixture's objects should be loose): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "shallow"), []byte(old+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := StatusRange(context.Background(), dir, line[0], "HEAD", []Patch{fixturePatch(t, gitfixture.UpstreamPatch)})
	if err != nil {
		t.Fatalf("status from the commit after the boundary: %v", err)
	}
	if rep.From != line[0] || rep.Commits != 3 || rep.Patches[0].AtFrom != Applies {
		t.Errorf("range %s.., %d commits, the patch %s at the start; want %s.., 3, applies", rep.From, rep.Commits, rep.Patches[0].AtFrom, line[0])
	}
}
