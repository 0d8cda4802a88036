package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
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
