package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/recipes"
)

// planOf runs llbuild plan --json with args and decodes what --ref changes.
func planOf(t *testing.T, args ...string) (source struct {
	URL, Commit, Ref string
	Epoch            int64
}, configure []string, patches []struct{ Name string }) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"plan", "-t", "cpu-v3", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("plan %v: exit %d\n%s", args, code, stderr)
	}
	var p struct {
		Source struct {
			URL, Commit, Ref string
			Epoch            int64
		}
		Configure []string
		Patches   []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	return p.Source, p.Configure, p.Patches
}

func buildNumberArg(configure []string) string {
	for _, a := range configure {
		if v, ok := strings.CutPrefix(a, "-DLLAMA_BUILD_NUMBER="); ok {
			return v
		}
	}
	return ""
}

// --ref names what to build as upstream names it: a tag, a branch, a PR head or a commit,
// resolved in a mirror (--source) or fetched from the recipe's URL, with the commit's time
// and build number read from the history; the plan records the ref, and its hash does not
// depend on which name was used.
func TestRefNamesWhatToBuild(t *testing.T) {
	repo, commits := upstreamHistory(t)
	gitfixture.Git(t, repo, 0, "update-ref", "refs/pull/8008/head", commits[8])
	gitfixture.Git(t, repo, 0, "branch", "release", commits[5])
	for _, tc := range []struct {
		ref  string
		want int
	}{{"b100", 0}, {"pull/8008/head", 8}, {"release", 5}, {"master", 12}, {commits[3], 3}, {commits[7][:10], 7}} {
		t.Run(tc.ref, func(t *testing.T) {
			src, configure, _ := planOf(t, "--source", repo, "--ref", tc.ref)
			if src.Commit != commits[tc.want] || src.Ref != tc.ref || src.Epoch != 1700000000+int64(tc.want)*86400 {
				t.Errorf("source %+v, want commit %d (%s) at %d with ref %s", src, tc.want, commits[tc.want], 1700000000+int64(tc.want)*86400, tc.ref)
			}
			if got := buildNumberArg(configure); got != strconv.Itoa(tc.want+1) {
				t.Errorf("LLAMA_BUILD_NUMBER %s, want %d (git rev-list --count)", got, tc.want+1)
			}
		})
	}
	// two names of one commit: one plan hash
	hash := func(ref string) string {
		_, stdout, _ := runCLI(t, "plan", "-t", "cpu-v3", "--json", "--source", repo, "--ref", ref)
		var p struct{ Hash string }
		_ = json.Unmarshal([]byte(stdout), &p)
		return p.Hash
	}
	if a, b := hash("pull/8008/head"), hash(commits[8]); a == "" || a != b {
		t.Errorf("plan hashes of two names of one commit: %s and %s", a, b)
	}

	// Without --source, from the recipe's URL (a file:// URL here; https:// upstream): only the
	// commits are fetched, into the user's cache. The repository serves partial fetches as
	// GitHub does; it lacks a blob, so a full fetch would fail.
	gitfixture.Git(t, repo, 0, "config", "uploadpack.allowFilter", "true")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	r, err := os.ReadFile(filepath.Join(gitfixture.Root(), "recipes", "server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(recipe, []byte(strings.Replace(string(r), "url: https://github.com/ggml-org/llama.cpp", "url: file://"+repo, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := recipes.Load(recipe); err != nil {
		t.Fatalf("the test's recipe: %v", err)
	}
	src, configure, _ := planOf(t, "--recipe", recipe, "--ref", "pull/8008/head")
	if src.Commit != commits[8] || buildNumberArg(configure) != "9" {
		t.Errorf("fetched from the URL: %+v build %s, want commit 8, build 9", src, buildNumberArg(configure))
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown ref", []string{"plan", "-t", "cpu-v3", "--source", repo, "--ref", "b99"}, `has no commit "b99"`},
		{"a plain directory", []string{"plan", "-t", "cpu-v3", "--source", t.TempDir(), "--ref", "b100"}, "is not a git repository"},
		{"an unknown series", []string{"plan", "-t", "cpu-v3", "--series", "fast"}, "neither a named series"},
		{"--ref with the wheel", []string{"plan", "-t", "cpu-v3", "--recipe", "wheel", "--ref", "b100"}, "apply to the server recipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d stdout %q stderr %q; want exit 2 saying %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// build --ref --series builds the named commit with the named series, and the artifacts'
// provenance says which; plan says the plain series is patch 0001 alone.
func TestBuildARefWithASeries(t *testing.T) {
	needDemoTools(t)
	repo, commits := upstreamHistory(t)
	gitfixture.Git(t, repo, 0, "update-ref", "refs/pull/8008/head", commits[8])
	empty := filepath.Join(t.TempDir(), "none.series")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "build", "-t", "cpu-v3", "--executor", "host", "--source", repo, "--ref", "pull/8008/head",
		"--series", empty, "--out", out, "--work-dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("build --ref: exit %d\n%s", code, stderr)
	}
	dir := strings.TrimSpace(stdout)
	cmd := exec.Command(filepath.Join(dir, "llama-server"))
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "slow path") {
		t.Errorf("the server built from pull/8008/head says %q (%v), want PR 8008's slow path", b, err)
	}
	prov, err := os.ReadFile(filepath.Join(dir, "provenance.json"))
	if err != nil || !strings.Contains(string(prov), `"ref":"pull/8008/head"`) && !strings.Contains(string(prov), `"ref": "pull/8008/head"`) {
		t.Errorf("provenance.json does not record the ref (%v)", err)
	}
	_, _, ps := planOf(t, "--series", "plain")
	if len(ps) != 1 || ps[0].Name != "0001-ggml-cuda-link-driver-interface.patch" {
		t.Errorf("plan --series plain: patches %v, want 0001 alone", ps)
	}
}

// A plain directory's tree is part of the plan: two trees at the recipe's commit give two plan
// hashes (two artifact directories), the same tree the same one, and a repository none.
func TestPlainSourceTreeIsPartOfThePlan(t *testing.T) {
	tree := func(greeting string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "server.cpp"), []byte(greeting), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	plan := func(src string) (hash, srcTree string) {
		code, stdout, stderr := runCLI(t, "plan", "-t", "cpu-v3", "--source", src, "--json")
		if code != exitOK {
			t.Fatalf("plan --source %s: exit %d\n%s", src, code, stderr)
		}
		var p struct {
			Hash   string
			Source struct{ Tree string }
		}
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatal(err)
		}
		return p.Hash, p.Source.Tree
	}
	a, b, a2 := tree("hello"), tree("hello, slower"), tree("hello")
	ha, ta := plan(a)
	hb, tb := plan(b)
	ha2, _ := plan(a2)
	hn, _ := planHashWithout(t)
	if ta == "" || tb == "" || ta == tb || ha == hb || ha != ha2 || ha == hn {
		t.Errorf("plans: tree a %s (%s), tree b %s (%s), a again %s, no source %s: want different trees and hashes for a and b, the same for a twice, and another without a source",
			ta, ha, tb, hb, ha2, hn)
	}
	repo, _ := upstreamHistory(t)
	if h, tr := plan(repo); tr != "" || h != hn {
		t.Errorf("plan --source REPO: hash %s tree %q, want no tree and the plan without a source (%s)", h, tr, hn)
	}
}

func planHashWithout(t *testing.T) (string, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "plan", "-t", "cpu-v3", "--json")
	if code != exitOK {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	var p struct{ Hash string }
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	return p.Hash, ""
}
