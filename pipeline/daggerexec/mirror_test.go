package daggerexec

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

// A mirror that lacks a blob no build reads (as every mirror of upstream reachable here lacks
// its vocabulary GGUFs) still builds through the engine: the commit's tree is archived without
// the file, and the build says which file it went without. The engine's own checkout of that
// commit fails.
func TestEngineBuildsFromAMirrorMissingABlob(t *testing.T) {
	opts, _ := engineOptions(t, nil)
	repo := filepath.Join(t.TempDir(), "llama.cpp")
	if err := os.CopyFS(repo, os.DirFS(fixture.Source())); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "models", "ggml-vocab-big.gguf"), bytes.Repeat([]byte("GGUF"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	gitfixture.Git(t, repo, 0, "init", "--quiet")
	gitfixture.Git(t, repo, 0, "add", "-A")
	gitfixture.Git(t, repo, fixture.Epoch, "commit", "--quiet", "-m", "the fixture with a vocabulary")
	commit := gitfixture.Git(t, repo, 0, "rev-parse", "HEAD")
	blob := gitfixture.Git(t, repo, 0, "rev-parse", "HEAD:models/ggml-vocab-big.gguf")
	if err := os.Remove(filepath.Join(repo, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	if missing, err := gitref.MissingBlobs(context.Background(), repo, commit); err != nil || strings.Join(missing, " ") != "models/ggml-vocab-big.gguf" {
		t.Fatalf("MissingBlobs = %v, %v; want the vocabulary", missing, err)
	}
	var logs bytes.Buffer
	opts.Source = repo
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	p := fixture.PlanFor(t, standInTarget(t, enginetest.RuntimeImage(t)), fixture.Recipe(t, commit), nil)
	dir, err := newEngineExecutor(t, opts).Build(context.Background(), p, t.TempDir())
	if err != nil {
		t.Fatalf("Build() = %v\n%s", err, logs.String())
	}
	a := openArtifacts(t, dir)
	if got := runBuilt(t, a); !strings.Contains(got, "fake llama-server") {
		t.Errorf("llama-server says %q", got)
	}
	if !strings.Contains(logs.String(), "lacks some files") || !strings.Contains(logs.String(), "models/ggml-vocab-big.gguf") {
		t.Errorf("the build did not say which file it went without:\n%s", logs.String())
	}
	if a.Provenance.Materials.Source.Commit != commit {
		t.Errorf("provenance commit %s, want %s", a.Provenance.Materials.Source.Commit, commit)
	}
}
