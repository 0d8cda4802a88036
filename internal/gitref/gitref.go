// Package gitref reads what a build needs to know about a llama.cpp commit from a git
// repository or mirror (bare, shallow, or with blobs missing): the full hash a name resolves to,
// its committer time and subject, upstream's build number, and the first-parent path between
// two commits.
package gitref

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Commit is one commit of the history.
type Commit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
	// Time is the committer time in Unix seconds: a build's SOURCE_DATE_EPOCH.
	Time int64 `json:"time"`
	// PR is the pull request number the subject ends with ("... (#27261)"), 0 if none.
	PR int `json:"pr,omitempty"`
}

// Short is the commit's hash cut to 9 characters, as llama.cpp names its commits.
func (c Commit) Short() string {
	if len(c.Hash) > 9 {
		return c.Hash[:9]
	}
	return c.Hash
}

// String is "SHORT subject".
func (c Commit) String() string { return c.Short() + " " + c.Subject }

var prSuffix = regexp.MustCompile(`\(#(\d+)\)\s*$`)

// PROf is the pull request number at the end of a subject, 0 if none.
func PROf(subject string) int {
	if m := prSuffix.FindStringSubmatch(subject); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// ErrNoCommit is wrapped by the error of a name the repository does not resolve.
var ErrNoCommit = errors.New("no such commit")

// Git runs git in repo with no user or system configuration and returns its standard output.
func Git(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(filepath.Clean(repo)))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		// the reason comes last, after any warnings
		return out.String(), fmt.Errorf("git %s: %s", strings.Join(args, " "), lastLine(msg))
	}
	return out.String(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// IsRepository says whether dir is the top of a git repository or a bare one (not merely
// inside one).
func IsRepository(ctx context.Context, dir string) bool {
	out, err := Git(ctx, dir, "rev-parse", "--git-dir")
	if err != nil {
		return false
	}
	gd := strings.TrimSpace(out)
	return gd == "." || gd == ".git"
}

// Resolve reads the commit that rev (a hash, a prefix of one, a tag, a branch, a ref such as
// pull/23398/head) names in repo.
func Resolve(ctx context.Context, repo, rev string) (Commit, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return Commit{}, fmt.Errorf("%q is not a commit name%w", rev, errNoCommitSuffix)
	}
	out, err := Git(ctx, repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return Commit{}, fmt.Errorf("%s has no commit %q: name another, or %s%w", repo, rev, FetchHint(repo, rev), errNoCommitSuffix)
	}
	return show(ctx, repo, strings.TrimSpace(out))
}

// errNoCommitSuffix wraps ErrNoCommit without adding to the message.
var errNoCommitSuffix = noCommit{}

type noCommit struct{}

func (noCommit) Error() string        { return "" }
func (noCommit) Is(target error) bool { return target == ErrNoCommit }

func show(ctx context.Context, repo, hash string) (Commit, error) {
	out, err := Git(ctx, repo, "log", "-1", "--no-walk", "--format=%H%x00%ct%x00%s", hash)
	if err != nil {
		return Commit{}, err
	}
	f := strings.SplitN(strings.TrimRight(out, "\n"), "\x00", 3)
	if len(f) != 3 {
		return Commit{}, fmt.Errorf("reading commit %s: unexpected git output %q", hash, out)
	}
	t, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Commit{}, fmt.Errorf("reading commit %s's time: %w", hash, err)
	}
	return Commit{Hash: f[0], Time: t, Subject: f[2], PR: PROf(f[2])}, nil
}

// Path is the first-parent path from good to bad, both included, oldest first. good must be
// an ancestor of bad on bad's first-parent line.
func Path(ctx context.Context, repo, good, bad string) ([]Commit, error) {
	ends := [2]Commit{}
	for i, rev := range []string{good, bad} {
		c, err := Resolve(ctx, repo, rev)
		if err != nil {
			return nil, err
		}
		ends[i] = c
	}
	if ends[0].Hash == ends[1].Hash {
		return nil, fmt.Errorf("the good and the bad commit are the same, %s: give two commits", ends[0].Short())
	}
	if _, err := Git(ctx, repo, "merge-base", "--is-ancestor", ends[0].Hash, ends[1].Hash); err != nil {
		return nil, fmt.Errorf("%s is not an ancestor of %s: give the older commit as good and the newer as bad (to find where a change was undone, swap what good and bad stand for)", ends[0].Short(), ends[1].Short())
	}
	out, err := Git(ctx, repo, "log", "--first-parent", "--reverse", "--format=%H%x00%ct%x00%s", ends[0].Hash+".."+ends[1].Hash)
	if err != nil {
		return nil, err
	}
	path := []Commit{ends[0]}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.SplitN(line, "\x00", 3)
		if len(f) != 3 {
			continue
		}
		t, _ := strconv.ParseInt(f[1], 10, 64)
		path = append(path, Commit{Hash: f[0], Time: t, Subject: f[2], PR: PROf(f[2])})
	}
	parent := ""
	if len(path) > 1 {
		out, _ := Git(ctx, repo, "rev-parse", "--verify", "--quiet", path[1].Hash+"^1")
		parent = strings.TrimSpace(out)
	}
	if path[len(path)-1].Hash != ends[1].Hash || parent != ends[0].Hash {
		return nil, fmt.Errorf("%s is not on the first-parent path to %s (it was merged from a side branch): give a commit of the main line", ends[0].Short(), ends[1].Short())
	}
	return path, nil
}

// Anchor is a commit whose upstream build number is known (a recipe's pin): in a shallow
// repository, where git cannot count a commit's ancestors, build numbers are counted from it.
type Anchor struct {
	Commit      string
	BuildNumber int
}

// BuildNumber is upstream's build number at commit (git rev-list --count, which names
// llama.cpp's releases: b10470). In a shallow repository it is counted from anchor along the
// history between them; without an anchor there it is an error.
func BuildNumber(ctx context.Context, repo, commit string, anchor *Anchor) (int, error) {
	shallow, _ := Git(ctx, repo, "rev-parse", "--is-shallow-repository")
	if strings.TrimSpace(shallow) != "true" {
		return count(ctx, repo, commit)
	}
	if anchor == nil || anchor.BuildNumber <= 0 {
		return 0, fmt.Errorf("%s is a shallow repository, so git cannot count %s's build number: git fetch --unshallow it, or give a commit whose build number is known", repo, shortHash(commit))
	}
	if _, err := Git(ctx, repo, "merge-base", "--is-ancestor", anchor.Commit, commit); err == nil {
		n, err := count(ctx, repo, anchor.Commit+".."+commit)
		return anchor.BuildNumber + n, err
	}
	if _, err := Git(ctx, repo, "merge-base", "--is-ancestor", commit, anchor.Commit); err == nil {
		n, err := count(ctx, repo, commit+".."+anchor.Commit)
		return anchor.BuildNumber - n, err
	}
	return 0, fmt.Errorf("%s is shallow and %s is neither an ancestor nor a descendant of %s, whose build number is known: git fetch --unshallow it", repo, shortHash(commit), shortHash(anchor.Commit))
}

func count(ctx context.Context, repo, rng string) (int, error) {
	out, err := Git(ctx, repo, "rev-list", "--count", rng)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

func shortHash(h string) string {
	if len(h) > 9 {
		return h[:9]
	}
	return h
}

// MissingBlobs lists the files of commit's tree whose contents the repository does not hold
// (a mirror made without them: large vocabulary files, say), sorted by path.
func MissingBlobs(ctx context.Context, repo, commit string) ([]string, error) {
	out, err := Git(ctx, repo, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return nil, err
	}
	var objs []string
	byObj := map[string][]string{}
	for _, ent := range strings.Split(out, "\x00") {
		meta, path, ok := strings.Cut(ent, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) != 3 || f[1] != "blob" {
			continue
		}
		if _, seen := byObj[f[2]]; !seen {
			objs = append(objs, f[2])
		}
		byObj[f[2]] = append(byObj[f[2]], path)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "--batch-check=%(objectname)")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C", "GIT_NO_LAZY_FETCH=1")
	cmd.Stdin = strings.NewReader(strings.Join(objs, "\n") + "\n")
	res, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git cat-file --batch-check in %s: %w", repo, err)
	}
	var missing []string
	for _, line := range strings.Split(strings.TrimSpace(string(res)), "\n") {
		if obj, ok := strings.CutSuffix(line, " missing"); ok {
			missing = append(missing, byObj[obj]...)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// Archive writes commit's tree into dir (created, or empty), leaving out the paths listed in
// skip (files whose blobs are missing). It runs git archive piped into tar.
func Archive(ctx context.Context, repo, commit, dir string, skip []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"-C", repo, "archive", "--format=tar", commit, "--", "."}
	for _, p := range skip {
		args = append(args, ":(exclude,literal)"+p)
	}
	ga := exec.CommandContext(ctx, "git", args...)
	ga.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := ga.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	var gerr, terr bytes.Buffer
	ga.Stderr, tar.Stderr = &gerr, &terr
	if err := tar.Start(); err != nil {
		return err
	}
	if err := ga.Run(); err != nil {
		_ = tar.Wait()
		return fmt.Errorf("git archive %s: %s", shortHash(commit), firstLine(strings.TrimSpace(gerr.String())+" "+err.Error()))
	}
	if err := tar.Wait(); err != nil {
		return fmt.Errorf("unpacking %s's tree: %s", shortHash(commit), firstLine(strings.TrimSpace(terr.String())+" "+err.Error()))
	}
	return nil
}

// Change is one file a commit adds, deletes or modifies against its parent.
type Change struct {
	// Status is git's letter: A (added), D (deleted), M (modified), T (type changed).
	Status byte
	Path   string
}

// Changes lists the files that differ between parent and child, by their tree entries (no
// blob is read, so a mirror missing blobs answers too; renames are a deletion and an addition).
func Changes(ctx context.Context, repo, parent, child string) ([]Change, error) {
	out, err := Git(ctx, repo, "diff-tree", "-r", "-z", "--no-renames", "--name-status", "--end-of-options", parent, child)
	if err != nil {
		return nil, err
	}
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	var cs []Change
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == "" {
			return nil, fmt.Errorf("git diff-tree %s %s: unexpected output %q", shortHash(parent), shortHash(child), out)
		}
		cs = append(cs, Change{Status: f[i][0], Path: f[i+1]})
	}
	return cs, nil
}
