package bisect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// readLister stands for the host executor's reads: the builds of the plans it lists read the
// files given, the others left no tree here.
type readLister struct {
	reads map[string][]string // by plan hash
}

func (readLister) Build(context.Context, *pipeline.Plan, string) (string, error) {
	return "", errors.New("not built here")
}

func (r readLister) Reads(_ context.Context, p *pipeline.Plan) ([]string, error) {
	if f, ok := r.reads[p.Hash]; ok {
		return f, nil
	}
	return nil, errors.New("no build tree")
}

// PlanBuilder.Inert's rule, each kind of change in a commit of its own: a commit is inert when
// it modifies, deletes or adds no file the builds read and adds none in a directory holding one.
func TestInertRule(t *testing.T) {
	r := gitfixture.New(t)
	dir := r.Dir
	step := func(when int64, subject string, change func()) {
		change()
		gitfixture.Git(t, dir, 0, "add", "-A")
		gitfixture.Git(t, dir, when, "commit", "--quiet", "--allow-empty", "-m", subject)
	}
	write := func(name, text string) func() {
		return func() {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("docs/notes.md", "notes\n")()
	write("ggml/src/ggml-cpu/README.md", "about the CPU backend\n")()
	step(1700100000, "docs and a readme beside the CPU backend", func() {}) // 1 inert: ggml-cpu/ holds no file read
	subjects := []struct{ subject, file, text string }{
		{"docs only", "docs/notes.md", "more notes\n"},                                 // 2 inert
		{"a file added beside sources a build reads", "ggml/src/new-op.c", "int x;\n"}, // 3 changes: a glob would take it
		{"a source the build reads", "ggml/src/ggml.c", "/* edited */\n"},              // 4 changes
		{"a file added in a new folder", "ui/app.ts", "export {}\n"},                   // 5 inert
		{"a readme beside sources, modified", "ggml/src/ggml-cpu/README.md", "x\n"},    // 6 inert: modified, not added, and not read
	}
	for i, s := range subjects {
		step(1700200000+int64(i)*1000, s.subject, write(s.file, s.text))
	}
	if err := os.Remove(filepath.Join(dir, "docs", "notes.md")); err != nil {
		t.Fatal(err)
	}
	step(1700300000, "a deleted file no build reads", func() {}) // 7 inert
	path, err := gitref.Path(context.Background(), dir, r.New, "master")
	if err != nil {
		t.Fatal(err)
	}
	if len(path) != 8 {
		t.Fatalf("path of %d commits, want 8", len(path))
	}
	tgt, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	recipe, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	rl := readLister{reads: map[string][]string{}}
	b := &PlanBuilder{Repo: dir, Target: tgt, Recipe: recipe, Series: []patches.Patch{}, Executor: rl, Out: t.TempDir()}
	p, err := b.Plan(context.Background(), path[0])
	if err != nil {
		t.Fatal(err)
	}
	rl.reads[p.Hash] = []string{"CMakeLists.txt", "ggml/src/ggml.c", "ggml/include/ggml.h", "tools/server/server.cpp"}
	// the first commit of the path has a build tree here, the last none: its reads are unknown
	got, err := b.Inert(context.Background(), path, []gitref.Commit{path[0], path[len(path)-1]})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || fmt.Sprint(got.Commits) != "[1 2 5 6 7]" || got.Reads != 4 || !slices.Equal(got.From, []string{path[0].Hash}) {
		t.Errorf("Inert = %+v, want commits [1 2 5 6 7] (docs and the ggml-cpu readme; docs; ui/; the readme edited; the deletion), 4 reads, from the first commit alone", got)
	}
	// no build tree at all: nothing to say
	if got, err := b.Inert(context.Background(), path, []gitref.Commit{path[len(path)-1]}); got != nil || err != nil {
		t.Errorf("Inert without build trees = %+v, %v; want nil", got, err)
	}
}
