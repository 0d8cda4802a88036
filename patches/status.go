package patches

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/srctree"
)

// State is where one patch of the series stands at a commit.
type State string

// The states Status reports.
const (
	// Applies: the patch applies, after the patches before it.
	Applies State = "applies"
	// Upstream: the commit already has the patch's changes (it applies in reverse).
	Upstream State = "already upstream"
	// Conflicts: hunks of the patch do not apply.
	Conflicts State = "conflicts"
	// Depends: the patch does not apply, and it touches a file an earlier patch that no
	// longer applies changes; it is unknowable until that patch is refreshed.
	Depends State = "depends on an earlier patch"
)

// Result is one patch's State at a commit.
type Result struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Hunks are the places git apply could not apply, "FILE:LINE", or "FILE (missing)".
	Hunks []string `json:"hunks,omitempty"`
	// DependsOn names the earlier patch that no longer applies (State Depends).
	DependsOn string `json:"dependsOn,omitempty"`
	// Detail is git apply's own words when it gave no hunk (a corrupt patch).
	Detail string `json:"detail,omitempty"`
}

// OK reports whether the patch needs nothing done: it applies or is upstream.
func (r Result) OK() bool { return r.State == Applies || r.State == Upstream }

// Report is the whole series at one commit of a repository, or on a plain source tree.
type Report struct {
	Source string `json:"source"`
	// Commit is the commit the series was applied to; empty for a plain tree.
	Commit string `json:"commit"`
	// Tree is a plain source tree's content hash, as a build's provenance names it
	// (srctree.Hash: every file but .git's, "sha256:…"); empty for a repository. The series is
	// applied to the files as git add -A indexes them, honouring .gitignore files in the tree.
	Tree string `json:"tree,omitempty"`
	// CommitTime is the commit's committer time in Unix seconds; 0 for a plain tree.
	CommitTime int64 `json:"commitTime,omitempty"`
	// Count is git rev-list --count of the commit (upstream's build number), 0 in a shallow
	// repository, which cannot count it.
	Count   int      `json:"count,omitempty"`
	Patches []Result `json:"patches"`
}

// OK reports whether every patch applies or is upstream.
func (r *Report) OK() bool {
	for _, p := range r.Patches {
		if !p.OK() {
			return false
		}
	}
	return true
}

// Remaining are the patches of the series that are not upstream, in order.
func (r *Report) Remaining() []string {
	var names []string
	for _, p := range r.Patches {
		if p.State != Upstream {
			names = append(names, p.Name)
		}
	}
	return names
}

// Status applies series in order to commit (any revision; "" is HEAD) of the git repository
// repo (a checkout or a bare mirror) and says for each patch whether it applies, is already
// upstream, conflicts, or depends on an earlier patch that does not apply. It works on a
// temporary index and object directory: the repository, its index and its work tree are
// never written. repo may also be a plain source tree (no git repository; commit must be ""):
// its files are indexed into a temporary repository and the series applied there, so the tree
// is never written either.
func Status(ctx context.Context, repo, commit string, series []Patch) (*Report, error) {
	g, tmp, cleanup, err := openIndexGit(ctx, repo)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var rep *Report
	if g.plain {
		if commit != "" {
			return nil, fmt.Errorf("source %s is a plain tree, not a git repository, so it has no commit %q: give a checkout or mirror that has it, or (patches status) leave out --commit to check the tree as it is%w", repo, commit, ErrNoCommit)
		}
		if err := looksLikeLlama(repo); err != nil {
			return nil, err
		}
		if rep, err = g.indexTree(ctx, repo); err != nil {
			return nil, err
		}
	} else if rep, err = g.readCommit(ctx, repo, commit); err != nil {
		return nil, err
	}
	return applySeries(ctx, g, tmp, rep, series)
}

// looksLikeLlama refuses a plain tree that is not llama.cpp's before every file under it is
// read and hashed (a home directory, /usr): its top holds CMakeLists.txt and llama.h (under
// include/ since 2024).
func looksLikeLlama(dir string) error {
	if !isLlamaTree(func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }) {
		return inputerr.Errorf("source %s is not a llama.cpp tree (no CMakeLists.txt and include/llama.h at its top): give --source a llama.cpp checkout, mirror or unpacked source", dir)
	}
	return nil
}

// isLlamaTree says whether a tree, whose top has says which files it holds, is llama.cpp's:
// CMakeLists.txt and llama.h (under include/ since 2024).
func isLlamaTree(has func(name string) bool) bool {
	return has("CMakeLists.txt") && (has("include/llama.h") || has("llama.h"))
}

// ErrNoCommit is wrapped by the error of a commit the source does not have (it adds nothing to
// the message).
var ErrNoCommit = noCommit{}

type noCommit struct{}

func (noCommit) Error() string { return "" }

// readCommit loads commit's tree into the private index and describes the commit.
func (g *indexGit) readCommit(ctx context.Context, repo, commit string) (*Report, error) {
	if commit == "" {
		commit = "HEAD"
	}
	full, err := g.run(ctx, "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("%s has no commit %q: give another with --commit, or %s%w", repo, commit, gitref.FetchHint(repo, commit), ErrNoCommit)
	}
	full = strings.TrimSpace(full)
	// a repository that is not llama.cpp's: said as such, not as patch 0001 conflicting
	if !isLlamaTree(func(name string) bool { _, err := g.run(ctx, "cat-file", "-e", full+":"+name); return err == nil }) {
		return nil, inputerr.Errorf("source %s at %s is not a llama.cpp tree (no CMakeLists.txt and include/llama.h at its top): give --source a llama.cpp checkout or mirror", repo, short(full))
	}
	rep, err := g.loadCommit(ctx, repo, full)
	if err != nil {
		return nil, err
	}
	if out, _ := g.run(ctx, "rev-parse", "--is-shallow-repository"); strings.TrimSpace(out) == "false" {
		if out, err := g.run(ctx, "rev-list", "--count", rep.Commit); err == nil {
			rep.Count, _ = strconv.Atoi(strings.TrimSpace(out))
		}
	}
	return rep, nil
}

// loadCommit reads the full commit's time and loads its tree into the private index.
func (g *indexGit) loadCommit(ctx context.Context, repo, commit string) (*Report, error) {
	rep := &Report{Source: repo, Commit: commit}
	if out, err := g.run(ctx, "log", "-1", "--no-walk", "--format=%ct", commit); err != nil {
		return nil, fmt.Errorf("reading the time of %s: %s", commit, oneLine(out))
	} else if rep.CommitTime, err = strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil {
		return nil, fmt.Errorf("reading the time of %s: %w", commit, err)
	}
	if out, err := g.run(ctx, "read-tree", commit); err != nil {
		return nil, fmt.Errorf("reading the tree of %s: %s", commit, strings.TrimSpace(out))
	}
	return rep, nil
}

// openIndexGit is newIndexGit in a temporary directory that cleanup removes.
func openIndexGit(ctx context.Context, repo string) (g *indexGit, tmp string, cleanup func(), err error) {
	if tmp, err = os.MkdirTemp("", "llbuild-status-"); err != nil {
		return nil, "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if g, err = newIndexGit(ctx, repo, tmp); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return g, tmp, cleanup, nil
}

// indexTree adds a plain tree's files to the private index, as git add -A would in a
// repository of the tree: .gitignore files in it are honoured.
func (g *indexGit) indexTree(ctx context.Context, repo string) (*Report, error) {
	if out, err := g.run(ctx, "add", "--all", "--", "."); err != nil {
		return nil, fmt.Errorf("indexing the files of %s: %s", repo, oneLine(out))
	}
	tree, err := srctree.Hash(repo)
	if err != nil {
		return nil, err
	}
	return &Report{Source: repo, Tree: tree}, nil
}

// applySeries applies series in order to the private index and fills in rep's results.
func applySeries(ctx context.Context, g *indexGit, tmp string, rep *Report, series []Patch) (*Report, error) {
	// failedFiles maps a file to the earliest patch changing it that did not go in.
	failedFiles := map[string]string{}
	for _, p := range series {
		if len(Files(p.Data)) == 0 {
			// git apply would say "No valid patches in input", and the report would call it
			// a conflict to refresh
			return nil, inputerr.Errorf("%s is not a patch: it holds no diff (give the series git format-patch or git diff output)", p.Name)
		}
		f := filepath.Join(tmp, "p", p.Name)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, p.Data, 0o644); err != nil {
			return nil, err
		}
		res := Result{Name: p.Name}
		out, ferr := g.apply(ctx, "--check", f)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case ferr == nil:
			if out, err := g.apply(ctx, f); err != nil {
				return nil, fmt.Errorf("applying %s after it checked clean: %s", p.Name, strings.TrimSpace(out))
			}
			res.State = Applies
		case g.reverseApplies(ctx, f):
			// The commit holds the changes: the index stays as it is, as if the patch went in.
			res.State = Upstream
		default:
			res.State = Conflicts
			res.Hunks = FailedHunks(out)
			if len(res.Hunks) == 0 {
				res.Detail = strings.TrimSpace(out)
			}
			for _, file := range Files(p.Data) {
				if dep, ok := failedFiles[file]; ok && res.DependsOn == "" {
					res.State, res.DependsOn = Depends, dep
				}
			}
			for _, file := range Files(p.Data) {
				if _, ok := failedFiles[file]; !ok {
					failedFiles[file] = p.Name
				}
			}
		}
		rep.Patches = append(rep.Patches, res)
	}
	return rep, nil
}

// indexGit runs git on repo with a private index and a private object directory that
// borrows repo's objects, so that reading trees and applying patches to the index leave repo
// as it was. For a plain tree (plain), a temporary repository holds the index and objects and
// repo is its work tree, which git only reads.
type indexGit struct {
	repo  string
	env   []string
	plain bool
}

func newIndexGit(ctx context.Context, repo, tmp string) (*indexGit, error) {
	abs, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, inputerr.Errorf("source %s is not a directory: give a llama.cpp checkout, mirror or source tree", repo)
	}
	base := &indexGit{repo: abs, env: append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C", "GIT_CEILING_DIRECTORIES="+filepath.Dir(abs))}
	objects, err := base.run(ctx, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		if looksLikeRepository(abs) {
			return nil, fmt.Errorf("source %s looks like a git repository, but git cannot read it (git says: %s)", repo, oneLine(objects))
		}
		return plainTreeGit(ctx, base, tmp)
	}
	obj := filepath.Join(tmp, "objects")
	if err := os.MkdirAll(obj, 0o755); err != nil {
		return nil, err
	}
	alternates := strings.TrimSpace(objects)
	if prev := os.Getenv("GIT_ALTERNATE_OBJECT_DIRECTORIES"); prev != "" {
		alternates += string(filepath.ListSeparator) + prev
	}
	base.env = append(base.env,
		"GIT_INDEX_FILE="+filepath.Join(tmp, "index"),
		"GIT_OBJECT_DIRECTORY="+obj,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES="+alternates,
	)
	return base, nil
}

// looksLikeRepository says whether dir is meant to be a git repository (a checkout's .git, or
// a bare repository's HEAD and objects), so that a broken one is reported, not taken for a
// plain tree.
func looksLikeRepository(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return true
	}
	_, errHead := os.Stat(filepath.Join(dir, "HEAD"))
	fi, errObj := os.Stat(filepath.Join(dir, "objects"))
	return errHead == nil && errObj == nil && fi.IsDir()
}

// plainTreeGit makes a temporary repository in tmp whose work tree is base's plain tree.
func plainTreeGit(ctx context.Context, base *indexGit, tmp string) (*indexGit, error) {
	gitDir := filepath.Join(tmp, "git")
	cmd := exec.CommandContext(ctx, "git", "init", "--quiet", "--bare", gitDir)
	cmd.Env = base.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("making a temporary repository for the plain tree %s: %s", base.repo, oneLine(string(out)))
	}
	base.plain = true
	base.env = append(base.env,
		"GIT_DIR="+gitDir,
		"GIT_WORK_TREE="+base.repo,
		"GIT_INDEX_FILE="+filepath.Join(tmp, "index"),
	)
	return base, nil
}

func (g *indexGit) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", g.repo}, args...)...)
	cmd.Env = g.env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

func (g *indexGit) apply(ctx context.Context, args ...string) (string, error) {
	return g.run(ctx, append([]string{"apply", "--cached", "--whitespace=nowarn"}, args...)...)
}

// reverseApplies reports whether the patch's changes are present: it applies in reverse,
// exactly or, when upstream changed the lines around it, with one line of context.
func (g *indexGit) reverseApplies(ctx context.Context, f string) bool {
	if _, err := g.apply(ctx, "--check", "-R", f); err == nil {
		return true
	}
	_, err := g.apply(ctx, "--check", "-R", "-C1", f)
	return err == nil
}

var (
	hunkFailed  = regexp.MustCompile(`(?m)^error: patch failed: (.+):(\d+)$`)
	fileMissing = regexp.MustCompile(`(?m)^error: (.+): (No such file or directory|does not exist in index)$`)
	diffPath    = regexp.MustCompile(`(?m)^(?:---|\+\+\+) [ab]/(\S+)`)
)

// FailedHunks reads git apply's complaints into the places that failed: "FILE:LINE" for a
// hunk, "FILE (missing)" for a file it could not find. A corrupt patch gives none.
func FailedHunks(out string) []string {
	var hunks []string
	for _, m := range hunkFailed.FindAllStringSubmatch(out, -1) {
		hunks = append(hunks, m[1]+":"+m[2])
	}
	for _, m := range fileMissing.FindAllStringSubmatch(out, -1) {
		hunks = append(hunks, m[1]+" (missing)")
	}
	return hunks
}

// Files are the paths a patch reads or writes, in the order it names them, once each.
func Files(data []byte) []string {
	var files []string
	seen := map[string]bool{}
	for _, m := range diffPath.FindAllSubmatch(data, -1) {
		if f := string(m[1]); !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	return files
}

func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
