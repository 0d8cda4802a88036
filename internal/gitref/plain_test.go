package gitref

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestIsPlainDirectory(t *testing.T) {
	ctx := context.Background()
	plain := t.TempDir()
	repo := t.TempDir()
	git(t, repo, 0, "init", "-q")
	file := filepath.Join(plain, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir  string
		want bool
	}{{plain, true}, {repo, false}, {file, false}, {filepath.Join(plain, "missing"), false}} {
		if got := IsPlainDirectory(ctx, tc.dir); got != tc.want {
			t.Errorf("IsPlainDirectory(%s) = %v, want %v", tc.dir, got, tc.want)
		}
	}
}
