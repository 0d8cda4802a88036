package patches

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/srctree"
)

func fixturePatch(t *testing.T, name string) Patch {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gitfixture.PatchDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return patchOf(name, b)
}

func patchOf(name string, b []byte) Patch {
	sum := sha256.Sum256(b)
	return Patch{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: b}
}

// followUp is a patch written on top of broken-stale-context.patch: it cannot apply unless
// that one does.
func followUp(t *testing.T, r *gitfixture.Repo) Patch {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	gitfixture.Git(t, filepath.Dir(dir), 0, "clone", "--quiet", r.Dir, dir)
	gitfixture.Git(t, dir, 0, "checkout", "--quiet", r.Old)
	gitfixture.Git(t, dir, 0, "apply", filepath.Join(gitfixture.PatchDir(), "broken-stale-context.patch"))
	gitfixture.Git(t, dir, 0, "commit", "--quiet", "-am", "stale")
	f := filepath.Join(dir, "tools/server/server.cpp")
	b, _ := os.ReadFile(f)
	_ = os.WriteFile(f, []byte(strings.Replace(string(b), "#include <cstdlib>\n", "#include <cstdlib>\n#include <cstdint>\n", 1)), 0o644)
	out := filepath.Join(t.TempDir(), "follow-up.patch")
	gitfixture.Git(t, dir, 0, "diff", "--output="+out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return patchOf("0009-follow-up.patch", b)
}

type row struct {
	state State
	hunks []string
	dep   string
}

func rowsOf(rep *Report) []row {
	var got []row
	for _, p := range rep.Patches {
		got = append(got, row{p.State, p.Hunks, p.DependsOn})
	}
	return got
}

func TestStatusTellsEachPatchsStateAtACommit(t *testing.T) {
	r := gitfixture.New(t)
	p1, p2, stale := fixturePatch(t, "0001-server-greeting.patch"), fixturePatch(t, "0002-ggml-cpu-build-info.patch"), fixturePatch(t, "broken-stale-context.patch")
	follow := followUp(t, r)
	mirror := filepath.Join(t.TempDir(), "mirror.git")
	gitfixture.Git(t, filepath.Dir(mirror), 0, "clone", "--quiet", "--mirror", r.Dir, mirror)
	tests := []struct {
		name, repo, commit string
		series             []Patch
		want               []row
		ok                 bool
	}{
		{"every patch applies at the old commit", r.Dir, r.Old, []Patch{p1, p2}, []row{{Applies, nil, ""}, {Applies, nil, ""}}, true},
		{"a patch upstream merged is already upstream (HEAD by default)", r.Dir, "", []Patch{p1, p2}, []row{{Upstream, nil, ""}, {Applies, nil, ""}}, true},
		{"a bare mirror at a short commit", mirror, r.New[:9], []Patch{p1, p2}, []row{{Upstream, nil, ""}, {Applies, nil, ""}}, true},
		{"a stale patch conflicts and names its hunk; the one built on it depends on it", r.Dir, r.Old,
			[]Patch{p1, stale, follow, p2},
			[]row{{Applies, nil, ""}, {Conflicts, []string{"tools/server/server.cpp:2"}, ""}, {Depends, []string{"tools/server/server.cpp:3"}, stale.Name}, {Applies, nil, ""}}, false},
		{"a stale patch conflicts at the new commit too", r.Dir, r.New, []Patch{p1, stale}, []row{{Upstream, nil, ""}, {Conflicts, []string{"tools/server/server.cpp:2"}, ""}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := gitfixture.Git(t, tt.repo, 0, "count-objects")
			rep, err := Status(context.Background(), tt.repo, tt.commit, tt.series)
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(rep); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Status() = %+v, want %+v", got, tt.want)
			}
			if rep.OK() != tt.ok {
				t.Errorf("Report.OK() = %v, want %v", rep.OK(), tt.ok)
			}
			if after := gitfixture.Git(t, tt.repo, 0, "count-objects"); after != before {
				t.Errorf("Status() wrote objects into the repository: %s, then %s", before, after)
			}
		})
	}
	if s := gitfixture.Git(t, r.Dir, 0, "status", "--porcelain"); s != "" {
		t.Errorf("Status() changed the work tree or index:\n%s", s)
	}
}

// plainTree writes the files of commit of r to a new directory that is not a git repository.
func plainTree(t *testing.T, r *gitfixture.Repo, commit string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "tree.tar")
	gitfixture.Git(t, r.Dir, 0, "archive", "--output="+archive, commit)
	if out, err := exec.Command("tar", "-xf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	return dir
}

// snapshot is every path under dir with its mode and contents, to tell whether it changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b, _ := os.ReadFile(p)
		m[p] = fi.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStatusOnAPlainTree: a source tree without git (a release tarball, a vendored copy)
// gets the same answers as the commit it was taken from, and is not written.
func TestStatusOnAPlainTree(t *testing.T) {
	r := gitfixture.New(t)
	p1, p2, stale := fixturePatch(t, "0001-server-greeting.patch"), fixturePatch(t, "0002-ggml-cpu-build-info.patch"), fixturePatch(t, "broken-stale-context.patch")
	follow := followUp(t, r)
	for _, tt := range []struct {
		name, commit string
		series       []Patch
		want         []row
	}{
		{"every patch applies to the old tree", r.Old, []Patch{p1, p2}, []row{{Applies, nil, ""}, {Applies, nil, ""}}},
		{"a patch the new tree holds is already upstream", r.New, []Patch{p1, p2}, []row{{Upstream, nil, ""}, {Applies, nil, ""}}},
		{"a stale patch conflicts; the one built on it depends on it", r.Old, []Patch{p1, stale, follow, p2},
			[]row{{Applies, nil, ""}, {Conflicts, []string{"tools/server/server.cpp:2"}, ""}, {Depends, []string{"tools/server/server.cpp:3"}, stale.Name}, {Applies, nil, ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := plainTree(t, r, tt.commit)
			before := snapshot(t, dir)
			rep, err := Status(context.Background(), dir, "", tt.series)
			if err != nil {
				t.Fatalf("Status(plain tree) = %v", err)
			}
			if got := rowsOf(rep); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Status(plain tree) = %+v, want %+v", got, tt.want)
			}
			// the tree is named as a build's provenance names it
			if want, err := srctree.Hash(dir); err != nil || rep.Tree != want || rep.Commit != "" {
				t.Errorf("Report tree %q commit %q, want tree %s (%v, its content hash, as provenance has it) and no commit", rep.Tree, rep.Commit, want, err)
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(after, before) {
				t.Errorf("Status() changed the plain tree")
			}
		})
	}
}

func TestStatusExplainsABadSource(t *testing.T) {
	r := gitfixture.New(t)
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, ".git"), []byte("gitdir: /nonexistent\n"), 0o644)
	for _, tt := range []struct{ name, repo, commit, want string }{
		{"a plain tree has no commits", plainTree(t, r, r.Old), "HEAD", "plain tree, not a git repository, so it has no commit \"HEAD\""},
		{"a broken repository is not taken for a plain tree", broken, "", "looks like a git repository, but git cannot read it"},
		{"not a directory", filepath.Join(broken, ".git"), "", "not a directory"},
		{"an unknown commit", r.Dir, strings.Repeat("ab", 20), "fetch it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Status(context.Background(), tt.repo, tt.commit, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Status() = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestStatusAtPinnedCommit runs Status over the recipe's pinned llama.cpp (the files the
// series touches, committed to a repository of their own): every patch must apply.
func TestStatusAtPinnedCommit(t *testing.T) {
	src := enginetest.LlamaSource(t)
	series, err := Series()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "llama.cpp")
	// the files the series touches, and the two that say the tree is llama.cpp's
	files := []string{"CMakeLists.txt", "include/llama.h"}
	for _, p := range series {
		files = append(files, Files(p.Data)...)
	}
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if os.IsNotExist(err) {
			continue // a file the patch creates
		}
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal(err)
	}
	gitfixture.Git(t, dir, 0, "init", "--quiet")
	gitfixture.Git(t, dir, 0, "add", "-A")
	gitfixture.Git(t, dir, 1784810751, "commit", "--quiet", "-m", "pinned")
	rep, err := Status(context.Background(), dir, "", series)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Patches {
		if p.State != Applies {
			t.Errorf("%s at the pinned commit: %s %v %s, want %s", p.Name, p.State, p.Hunks, p.Detail, Applies)
		}
	}
	if len(rep.Patches) != len(series) {
		t.Errorf("Status() reported %d patches, want %d", len(rep.Patches), len(series))
	}
}

// A git repository that is not llama.cpp's is said to be so, as a plain tree is, and not
// reported as the series' first patch conflicting.
func TestStatusOfAnotherProjectsRepository(t *testing.T) {
	dir := t.TempDir()
	gitfixture.Git(t, dir, 0, "init", "--quiet", "--initial-branch=main")
	os.WriteFile(filepath.Join(dir, "README"), []byte("my dotfiles\n"), 0o644)
	gitfixture.Git(t, dir, 0, "add", "-A")
	gitfixture.Git(t, dir, 1700000000, "commit", "--quiet", "-m", "dotfiles")
	_, err := Status(context.Background(), dir, "", []Patch{fixturePatch(t, "0001-server-greeting.patch")})
	if !inputerr.Is(err) || !strings.Contains(err.Error(), "is not a llama.cpp tree") {
		t.Errorf("Status(a repository of another project) = %v, want an inputerr.Error saying it is not llama.cpp", err)
	}
}

// A file in the series that holds no diff (notes, an HTML page saved by mistake) is said to be
// no patch, not reported as conflicting with git apply's advice of a flag llbuild has not.
func TestStatusRefusesAPatchWithoutADiff(t *testing.T) {
	r := gitfixture.New(t)
	notes := Patch{Name: "0002-notes.patch", Data: []byte("remember to refresh 0001\n")}
	_, err := Status(context.Background(), r.Dir, r.Old, []Patch{fixturePatch(t, "0001-server-greeting.patch"), notes})
	if !inputerr.Is(err) || !strings.Contains(err.Error(), "0002-notes.patch is not a patch") || strings.Contains(err.Error(), "allow-empty") {
		t.Errorf("Status(a series with a file of no diff) = %v, want an inputerr.Error naming it", err)
	}
}
