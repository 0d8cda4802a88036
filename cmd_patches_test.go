package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/pipeline"
)

// fixtureSeries writes a series of fixture patches into a directory of its own.
func fixtureSeries(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for _, n := range names {
		body, err := os.ReadFile(filepath.Join(gitfixture.PatchDir(), n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), body, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&b, "%s sha256:%s\n", n, hex.EncodeToString(sum[:]))
	}
	f := filepath.Join(dir, "series")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPatchesStatusExitsByWhetherTheSeriesGoesIn(t *testing.T) {
	r := gitfixture.New(t)
	ok := fixtureSeries(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	stale := fixtureSeries(t, "0001-server-greeting.patch", "broken-stale-context.patch")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{"applies at the old commit", []string{"--commit", r.Old, "--series", ok}, 0, []string{"0001-server-greeting.patch  applies", "0002-ggml-cpu-build-info.patch  applies"}, ""},
		{"upstream at HEAD", []string{"--series", ok}, 0, []string{"0001-server-greeting.patch  already upstream", "0002-ggml-cpu-build-info.patch  applies"}, ""},
		{"a conflict names the hunk and exits 1", []string{"--series", stale}, 1, []string{"broken-stale-context.patch  conflicts: hunk at tools/server/server.cpp:2"}, "refresh it"},
		{"an unknown commit is a usage error", []string{"--series", ok, "--commit", "nosuchbranch"}, 2, nil, "fetch it"},
		{"a range says where a patch went upstream", []string{"--series", ok, "--range", r.Old + ".." + r.New}, 0,
			[]string{"(1 first-parent commits, 2 checked)", "0001-server-greeting.patch already upstream from " + r.New[:12] + " (2023-11-15, commit 1 of the range) \"upstream merges the greeting\"", "0002-ggml-cpu-build-info.patch applies throughout"}, ""},
		{"a range where a patch broke exits 1", []string{"--series", stale, "--range", r.Old + "..HEAD"}, 1, []string{"broken-stale-context.patch conflicts throughout"}, "move the pin with llbuild recipe bump"},
		{"a range and a commit", []string{"--series", ok, "--range", r.Old + "..HEAD", "--commit", "HEAD"}, 2, nil, "not both"},
		{"a range that is not A..B", []string{"--series", ok, "--range", r.Old}, 2, nil, "--range wants A..B"},
		{"a range backwards", []string{"--series", ok, "--range", "HEAD.." + r.Old}, 2, nil, "oldest first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"patches", "status", "--source", r.Dir}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, stderr)
			}
			// Columns are aligned with spaces: compare words.
			words := strings.Join(strings.Fields(out), " ")
			for _, w := range tt.stdout {
				if !strings.Contains(words, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("stdout = \n%s\nwant it to contain %q", out, w)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tt.stderr)
			}
		})
	}
	code, out, _ := runCLI(t, "patches", "status", "--source", r.Dir, "--series", ok, "--json")
	var rep struct {
		Commit  string
		Patches []struct{ Name, State string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if rep.Commit != r.New || len(rep.Patches) != 2 || rep.Patches[0].State != "already upstream" {
		t.Errorf("--json = %+v, want commit %s with 0001 already upstream", rep, r.New)
	}
}

// TestPatchesStatusChecksAPlainTree: a source tree without git (a release tarball) is checked
// as it is, where it used to be refused.
func TestPatchesStatusChecksAPlainTree(t *testing.T) {
	r := gitfixture.New(t)
	dir := filepath.Join(t.TempDir(), "llama.cpp-src")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "src.tar")
	gitfixture.Git(t, r.Dir, 0, "archive", "--output="+archive, r.New)
	if out, err := exec.Command("tar", "-xf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	ok := fixtureSeries(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	stale := fixtureSeries(t, "0001-server-greeting.patch", "broken-stale-context.patch")

	// a directory that is not llama.cpp is refused before any of it is read
	if code, _, stderr := runCLI(t, "patches", "status", "--source", t.TempDir(), "--series", ok); code != 2 || !strings.Contains(stderr, "is not a llama.cpp tree") {
		t.Errorf("patches status of an empty directory: exit %d %q, want 2", code, stderr)
	}
	// a series file that does not read is exit 2 (1 says a patch does not apply)
	badSeries := filepath.Join(t.TempDir(), "series")
	os.WriteFile(badSeries, []byte("bogus line\n"), 0o644)
	if code, _, stderr := runCLI(t, "patches", "status", "--source", dir, "--series", badSeries); code != 2 || !strings.Contains(stderr, "bogus line") {
		t.Errorf("patches status with a malformed series: exit %d %q, want 2 naming the line", code, stderr)
	}

	code, out, stderr := runCLI(t, "patches", "status", "--source", dir, "--series", ok)
	words := strings.Join(strings.Fields(out), " ")
	if code != 0 || !strings.Contains(words, "not a git repository") || !strings.Contains(words, "0001-server-greeting.patch already upstream") ||
		!strings.Contains(words, "0002-ggml-cpu-build-info.patch applies") {
		t.Errorf("a plain tree: exit %d\n%s%s\nwant 0, the tree named, 0001 upstream and 0002 applying", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, "patches", "status", "--source", dir, "--series", stale); code != 1 || !strings.Contains(stderr, "does not apply at "+dir) || !strings.Contains(stderr, "against that tree") {
		t.Errorf("a stale patch on a plain tree: exit %d, stderr %q; want 1 naming the tree", code, stderr)
	}
	if code, _, stderr := runCLI(t, "patches", "status", "--source", dir, "--series", ok, "--commit", r.New); code != 2 || !strings.Contains(stderr, "plain tree") {
		t.Errorf("--commit on a plain tree: exit %d, stderr %q; want 2 saying it has no commits", code, stderr)
	}
	_, out, _ = runCLI(t, "patches", "status", "--source", dir, "--series", ok, "--json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if want, err := pipeline.TreeHash(dir); err != nil || rep["tree"] != want || rep["commit"] != "" || rep["commitTime"] != nil {
		t.Errorf("--json = %v, want tree %s, an empty commit and no commit time", rep, want)
	}
}

func TestRecipeBumpWritesFilesOrNothing(t *testing.T) {
	r := gitfixture.New(t)
	series := fixtureSeries(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	data, err := os.ReadFile(filepath.Join("recipes", "server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(t.TempDir(), "server.yaml")
	os.WriteFile(recipe, data, 0o644)
	args := []string{"recipe", "bump", "--source", r.Dir, "--commit", "master", "--recipe-file", recipe, "--series", series}

	code, out, stderr := runCLI(t, args...)
	if code != 1 || out != "" || !strings.Contains(stderr, "--drop-upstream") {
		t.Errorf("without --drop-upstream: exit %d, stdout %q, stderr %q; want 1, nothing, a hint to pass --drop-upstream", code, out, stderr)
	}
	if b, _ := os.ReadFile(recipe); string(b) != string(data) {
		t.Error("a refused bump changed the recipe")
	}

	code, out, stderr = runCLI(t, append(args, "--drop-upstream")...)
	if code != 0 || out != series+"\n"+recipe+"\n" {
		t.Fatalf("--drop-upstream: exit %d, stdout %q, want 0 and the two files\nstderr: %s", code, out, stderr)
	}
	if b, _ := os.ReadFile(recipe); !strings.Contains(string(b), "commit: "+r.New) {
		t.Errorf("recipe after bump:\n%s\nwant commit %s", b, r.New)
	}
	if b, _ := os.ReadFile(series); strings.Contains(string(b), gitfixture.UpstreamPatch) {
		t.Errorf("series after bump still lists %s:\n%s", gitfixture.UpstreamPatch, b)
	}
	if !strings.Contains(stderr, gitfixture.UpstreamPatch) {
		t.Errorf("stderr = %q, want it to name the dropped patch", stderr)
	}
}
