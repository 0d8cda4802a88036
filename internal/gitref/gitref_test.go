package gitref

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
)

func git(t *testing.T, dir string, when int64, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if when > 0 {
		d := fmt.Sprintf("@%d +0000", when)
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_DATE="+d, "GIT_COMMITTER_DATE="+d)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// history is a repository of n commits on master, one a day, with a side branch merged at
// commit 3 and a tag on commit 2; it returns the first-parent commits, oldest first.
func history(t *testing.T, n int) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, 0, "init", "--quiet", "--initial-branch=master")
	var commits []string
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(strings.Repeat("x\n", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, dir, 0, "add", "-A")
		git(t, dir, int64(1700000000+i*86400), "commit", "--quiet", "-m", fmt.Sprintf("change %d (#%d)", i, 100+i))
		commits = append(commits, git(t, dir, 0, "rev-parse", "HEAD"))
		if i == 2 {
			git(t, dir, 0, "tag", "b3")
			git(t, dir, 0, "checkout", "--quiet", "-b", "side")
			if err := os.WriteFile(filepath.Join(dir, "side.txt"), []byte("side\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			git(t, dir, 0, "add", "-A")
			git(t, dir, 1700000000+int64(i)*86400+3600, "commit", "--quiet", "-m", "side work")
			git(t, dir, 0, "checkout", "--quiet", "master")
			git(t, dir, 1700000000+int64(i)*86400+7200, "merge", "--quiet", "--no-ff", "-m", "merge side (#999)", "side")
			commits = append(commits, git(t, dir, 0, "rev-parse", "HEAD"))
		}
	}
	return dir, commits
}

func TestPathFollowsTheFirstParent(t *testing.T) {
	dir, commits := history(t, 6)
	ctx := context.Background()
	p, err := Path(ctx, dir, "b3", "master")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p {
		got = append(got, c.Hash)
	}
	if want := commits[2:]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Path(b3, master) = %v, want %v (the merge, not the side commit)", got, want)
	}
	if p[1].Subject != "merge side (#999)" || p[1].PR != 999 || p[len(p)-1].PR != 105 || p[0].Time != 1700000000+2*86400 {
		t.Errorf("Path's commits: %+v", p)
	}
	for _, tc := range []struct{ good, bad, want string }{
		{"master", "b3", "is not an ancestor"},
		{"b3", "b3", "are the same"},
		{"side", "master", "not on the first-parent path"},
		{"b9", "master", `has no commit "b9"`},
	} {
		if _, err := Path(ctx, dir, tc.good, tc.bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Path(%s, %s) = %v, want %q", tc.good, tc.bad, err, tc.want)
		}
	}
	if _, err := Resolve(ctx, dir, "b9"); !errors.Is(err, ErrNoCommit) {
		t.Errorf("Resolve(b9) = %v, want ErrNoCommit", err)
	}
	if _, err := Resolve(ctx, dir, "--all"); !errors.Is(err, ErrNoCommit) {
		t.Errorf("Resolve(--all) = %v, want ErrNoCommit (never an option to git)", err)
	}
}

// Upstream's build numbers are rev-list counts; in a shallow clone they are counted from an
// anchor whose number is known, before or after it, and equal the full history's.
func TestBuildNumberInAShallowMirror(t *testing.T) {
	dir, commits := history(t, 8)
	ctx := context.Background()
	full := map[string]int{}
	for _, c := range commits {
		n, err := BuildNumber(ctx, dir, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		full[c] = n
	}
	shallow := filepath.Join(t.TempDir(), "shallow.git")
	git(t, t.TempDir(), 0, "clone", "--quiet", "--bare", "--depth", "4", "file://"+dir, shallow)
	anchor := &Anchor{Commit: commits[len(commits)-2], BuildNumber: full[commits[len(commits)-2]]}
	for _, c := range commits[len(commits)-4:] {
		n, err := BuildNumber(ctx, shallow, c, anchor)
		if err != nil || n != full[c] {
			t.Errorf("BuildNumber(shallow, %s) = %d, %v; the full history says %d", c[:9], n, err, full[c])
		}
	}
	if _, err := BuildNumber(ctx, shallow, commits[len(commits)-1], nil); err == nil || !strings.Contains(err.Error(), "shallow") {
		t.Errorf("BuildNumber without an anchor in a shallow mirror: %v, want the shallow history named", err)
	}
}

func TestMissingBlobsAndArchive(t *testing.T) {
	dir, commits := history(t, 4)
	ctx := context.Background()
	head := commits[len(commits)-1]
	if m, err := MissingBlobs(ctx, dir, head); err != nil || len(m) != 0 {
		t.Fatalf("MissingBlobs of a whole repository = %v, %v", m, err)
	}
	blob := git(t, dir, 0, "rev-parse", head+":f.txt")
	if err := os.Remove(filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	m, err := MissingBlobs(ctx, dir, head)
	if err != nil || strings.Join(m, " ") != "f.txt" {
		t.Fatalf("MissingBlobs = %v, %v; want f.txt", m, err)
	}
	out := filepath.Join(t.TempDir(), "tree")
	if err := Archive(ctx, dir, head, out, nil); err == nil {
		t.Errorf("Archive without leaving out the missing file succeeded")
	}
	out = filepath.Join(t.TempDir(), "tree")
	if err := Archive(ctx, dir, head, out, m); err != nil {
		t.Fatalf("Archive leaving out %v: %v", m, err)
	}
	if _, err := os.Stat(filepath.Join(out, "f.txt")); !os.IsNotExist(err) {
		t.Errorf("f.txt is in the archive: %v", err)
	}
}

func TestPROf(t *testing.T) {
	for s, want := range map[string]int{"ci : push release tag (#27261)": 27261, "no number": 0, "(#12) in the middle": 0, "two (#1) (#2)": 2} {
		if got := PROf(s); got != want {
			t.Errorf("PROf(%q) = %d, want %d", s, got, want)
		}
	}
}

// Changes lists what a commit adds, modifies and deletes against its parent (a rename is a
// deletion and an addition, a merge its difference from the first parent), from tree entries
// alone: a blob missing from the repository does not matter.
func TestChanges(t *testing.T) {
	dir, commits := history(t, 4)
	ctx := context.Background()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a dir/new file.txt", "new\n")
	write("f.txt", "changed\n")
	git(t, dir, 0, "add", "-A")
	git(t, dir, 0, "mv", "side.txt", "moved.txt")
	git(t, dir, 1800000000, "commit", "--quiet", "-m", "add, modify, rename")
	head := git(t, dir, 0, "rev-parse", "HEAD")
	// the new file's blob gone: Changes reads tree entries, not contents
	blob := git(t, dir, 0, "rev-parse", head+":a dir/new file.txt")
	if err := os.Remove(filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	got, err := Changes(ctx, dir, commits[len(commits)-1], head)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, c := range got {
		s = append(s, string(c.Status)+" "+c.Path)
	}
	if want := "A a dir/new file.txt|M f.txt|A moved.txt|D side.txt"; strings.Join(s, "|") != want {
		t.Errorf("Changes = %q, want %q", strings.Join(s, "|"), want)
	}
	// the merge (commit 3 on the first-parent line) against its first parent: side.txt added
	got, err = Changes(ctx, dir, commits[2], commits[3])
	if err != nil || len(got) != 1 || got[0] != (Change{'A', "side.txt"}) {
		t.Errorf("Changes of the merge = %v, %v; want side.txt added", got, err)
	}
	if _, err := Changes(ctx, dir, commits[0], "nonesuch"); err == nil {
		t.Error("Changes with a commit the repository lacks succeeded")
	}
}

// TestResolveHintFetchesWhatResolveFinds: the command a missing ref's error gives, run as it is
// written in a mirror that lacks the ref, fetches it to where Resolve then finds it: a pull
// request head, a tag, a branch and a full hash. A plain `git fetch origin pull/1/head`, the
// hint this replaced, only writes FETCH_HEAD, and Resolve fails as before.
func TestResolveHintFetchesWhatResolveFinds(t *testing.T) {
	up := gitfixture.New(t)
	mirror := filepath.Join(t.TempDir(), "mirror.git")
	gitfixture.Git(t, up.Dir, 0, "clone", "--quiet", "--bare", up.Dir, mirror)
	// after the mirror was made: a pull request head (a commit on no branch), a tag, a branch
	// and a commit known only by its hash, the tip of another pull request
	commitOn := func(msg string) string {
		gitfixture.Git(t, up.Dir, 0, "checkout", "--quiet", "--detach", up.New)
		if err := os.WriteFile(filepath.Join(up.Dir, msg+".txt"), []byte(msg), 0o644); err != nil {
			t.Fatal(err)
		}
		gitfixture.Git(t, up.Dir, 0, "add", "-A")
		gitfixture.Git(t, up.Dir, up.NewTime+60, "commit", "--quiet", "-m", msg)
		c := gitfixture.Git(t, up.Dir, 0, "rev-parse", "HEAD")
		gitfixture.Git(t, up.Dir, 0, "checkout", "--quiet", "master")
		return c
	}
	pr := commitOn("pr1")
	gitfixture.Git(t, up.Dir, 0, "update-ref", "refs/pull/1/head", pr)
	tagged := commitOn("tagged")
	gitfixture.Git(t, up.Dir, 0, "tag", "b2", tagged)
	branched := commitOn("branched")
	gitfixture.Git(t, up.Dir, 0, "branch", "feature", branched)
	byHash := commitOn("hash")
	gitfixture.Git(t, up.Dir, 0, "update-ref", "refs/pull/2/head", byHash)

	ctx := context.Background()
	gitfixture.Git(t, mirror, 0, "fetch", "--quiet", "origin", "pull/1/head")
	if _, err := Resolve(ctx, mirror, "pull/1/head"); err == nil {
		t.Fatal("Resolve() found pull/1/head after a plain fetch of it: the test does not show what the hint is for")
	}
	hinted := regexp.MustCompile(`git -C \S+ fetch origin \S+`)
	for _, tt := range []struct{ ref, want string }{
		{"pull/1/head", pr},
		{"b2", tagged},
		{"feature", branched},
		{byHash, byHash},
	} {
		t.Run(tt.ref, func(t *testing.T) {
			_, err := Resolve(ctx, mirror, tt.ref)
			if !errors.Is(err, ErrNoCommit) {
				t.Fatalf("Resolve() before fetching = %v, want ErrNoCommit", err)
			}
			cmds := hinted.FindAllString(err.Error(), -1)
			if len(cmds) == 0 {
				t.Fatalf("the error gives no fetch command: %v", err)
			}
			ran := 0
			for _, c := range cmds {
				// a tag's and a branch's commands are both given; the other one fails
				if out, err := exec.Command("sh", "-c", c).CombinedOutput(); err == nil {
					ran++
				} else {
					t.Logf("%s: %v\n%s", c, err, out)
				}
			}
			if ran == 0 {
				t.Fatalf("no command of the hint ran: %q", cmds)
			}
			got, err := Resolve(ctx, mirror, tt.ref)
			if err != nil || got.Hash != tt.want {
				t.Errorf("Resolve() after %q = %v, %v; want %s", cmds, got.Hash, err, tt.want)
			}
		})
	}
}

// TestRefspecs: each kind of name is fetched to the one place Resolve finds it by that name.
func TestRefspecs(t *testing.T) {
	h := strings.Repeat("a", 40)
	for _, tt := range []struct {
		ref  string
		want []string
	}{
		{h, []string{h}},
		{"pull/27261/head", []string{"+refs/pull/27261/head:refs/pull/27261/head"}},
		{"refs/pull/1/merge", []string{"+refs/pull/1/merge:refs/pull/1/merge"}},
		{"b8000", []string{"+refs/tags/b8000:refs/tags/b8000", "+refs/heads/b8000:refs/heads/b8000"}},
	} {
		if got := Refspecs(tt.ref); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("Refspecs(%q) = %q, want %q", tt.ref, got, tt.want)
		}
	}
	if h := FetchHint("/m", "34af94cd9"); !strings.Contains(h, "full hash") {
		t.Errorf("FetchHint() of an abbreviated hash = %q, want it to ask for the full hash", h)
	}
	// an expression is no tag or branch to fetch
	for _, ref := range []string{"HEAD~99999", "master^2", "@{u}"} {
		if h := FetchHint("/m", ref); strings.Contains(h, "fetch") || !strings.Contains(h, "expression") {
			t.Errorf("FetchHint(%q) = %q, want no fetch advice", ref, h)
		}
	}
}
