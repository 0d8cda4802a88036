package recorded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

func TestOpenOrResolveTakesTargetsFilesAndRecords(t *testing.T) {
	ctx := context.Background()
	byName, err := OpenOrResolve(ctx, "h200", "server", pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if byName.Plan.Target != "h200" || byName.Host == nil || byName.Host.Name != "h200" || byName.Partial {
		t.Errorf("OpenOrResolve(h200) = %+v, want h200's plan resolved now with its host", byName)
	}
	dir := t.TempDir()
	tg, err := targets.Load("h200")
	if err != nil {
		t.Fatal(err)
	}
	data, err := tg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	byFile, err := OpenOrResolve(ctx, file, "server", pipeline.Options{})
	if err != nil || byFile.Plan.Hash != byName.Plan.Hash {
		t.Errorf("OpenOrResolve(a file of h200) = %+v, %v; want the plan %s", byFile, err, byName.Plan.Hash)
	}
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, byName.Plan.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	recorded, err := OpenOrResolve(ctx, planFile, "server", pipeline.Options{})
	if err != nil || recorded.Plan.Hash != byName.Plan.Hash || recorded.Host == nil {
		t.Errorf("OpenOrResolve(plan.json) = %+v, %v; want the recorded plan with the built-in host", recorded, err)
	}
	if _, err := OpenOrResolve(ctx, "h201", "server", pipeline.Options{}); !inputerr.Is(err) || !strings.Contains(err.Error(), "neither a file, a built-in target") {
		t.Errorf("OpenOrResolve(h201) = %v, want an inputerr.Error saying what it takes", err)
	}
	if _, err := OpenOrResolve(ctx, "h200", "nope", pipeline.Options{}); !inputerr.Is(err) {
		t.Errorf("OpenOrResolve(h200, recipe nope) = %v, want an inputerr.Error", err)
	}
}

func TestDiffNamesTheSidesAsGiven(t *testing.T) {
	r, err := Diff(context.Background(), [2]string{"cpu-v3", "h200"}, "server", pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.A.Arg != "cpu-v3" || r.B.Arg != "h200" || r.B.Target != "h200" || len(r.Groups) == 0 {
		t.Errorf("Diff(cpu-v3, h200) = %+v, want both sides named and their differences", r)
	}
	same, err := Diff(context.Background(), [2]string{"h200", "h200"}, "server", pipeline.Options{})
	if err != nil || len(same.Groups) != 0 || same.StartError() != nil {
		t.Errorf("Diff(h200, h200) = %+v, %v; want no differences and nothing failed", same, err)
	}
}

// build --out . leaves a directory per target where it runs: a target's bare name still names
// the target there, and ./NAME the directory.
func TestOpenOrResolveTakesATargetsNameOverADirectoryOfThatName(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join(dir, "h200", "0123456789ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := OpenOrResolve(context.Background(), "h200", "server", pipeline.Options{})
	if err != nil || r.Plan.Target != "h200" || r.Host == nil {
		t.Errorf("OpenOrResolve(h200) beside a directory h200 = %+v, %v; want the built-in target", r, err)
	}
	if _, err := OpenOrResolve(context.Background(), "./h200", "server", pipeline.Options{}); !inputerr.Is(err) || !strings.Contains(err.Error(), "./h200 has neither") {
		t.Errorf("OpenOrResolve(./h200) = %v, want the directory read (and refused: it is no record)", err)
	}
}
