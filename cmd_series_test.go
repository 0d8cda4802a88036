package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanWithOwnSeries(t *testing.T) {
	plan := func(t *testing.T, args ...string) (int, struct {
		Hash    string
		Patches []struct{ Name, SHA256 string }
	}, string) {
		t.Helper()
		code, out, stderr := runCLI(t, append([]string{"plan", "-t", "cpu-v3", "--json"}, args...)...)
		var p struct {
			Hash    string
			Patches []struct{ Name, SHA256 string }
		}
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, out)
			}
		}
		return code, p, stderr
	}
	_, builtin, _ := plan(t)
	if len(builtin.Patches) < 2 {
		t.Fatalf("built-in plan has %d patches", len(builtin.Patches))
	}

	dir := t.TempDir()
	first, err := os.ReadFile(filepath.Join("patches", builtin.Patches[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, builtin.Patches[0].Name), first, 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one", builtin.Patches[0].Name+" sha256:"+builtin.Patches[0].SHA256+"\n")
	code, p, stderr := plan(t, "--series", one)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(p.Patches) != 1 || p.Patches[0] != builtin.Patches[0] {
		t.Errorf("patches %+v, want only %+v", p.Patches, builtin.Patches[0])
	}
	if p.Hash == builtin.Hash {
		t.Error("a different series gives the same plan hash")
	}

	code, none, stderr := plan(t, "--series", write("none", "# upstream as it is\n"))
	if code != 0 || len(none.Patches) != 0 || none.Hash == p.Hash || none.Hash == builtin.Hash {
		t.Errorf("empty series: exit %d, patches %+v, hash %s: %s", code, none.Patches, none.Hash, stderr)
	}

	bad := write("bad", builtin.Patches[0].Name+" sha256:"+strings.Repeat("0", 64)+"\n")
	if code, _, stderr := plan(t, "--series", bad); code == 0 || !strings.Contains(stderr, builtin.Patches[0].Name) || !strings.Contains(stderr, builtin.Patches[0].SHA256) {
		t.Errorf("a wrong digest: exit %d, stderr %q; want a failure naming the patch and its real digest", code, stderr)
	}
	if code, _, stderr := plan(t, "--series", filepath.Join(dir, "missing")); code != 2 || !strings.Contains(stderr, "missing") {
		t.Errorf("a missing series file: exit %d, stderr %q; want usage error 2 naming it", code, stderr)
	}
}
