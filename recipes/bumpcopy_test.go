package recipes

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/gitfixture"
	"github.com/llbuild/llbuild/patches"
)

// A bump of the copy that fails (the built-in series does not apply to the fixture history)
// leaves nothing behind, not even the directory.
func TestBumpCopyRemovesTheCopyWhenTheBumpFails(t *testing.T) {
	r := gitfixture.New(t)
	dir := filepath.Join(t.TempDir(), "a", "pin")
	_, err := BumpCopy(context.Background(), dir, BumpOptions{Source: r.Dir, Commit: r.New})
	if err == nil || !strings.Contains(err.Error(), "does not apply") {
		t.Fatalf("BumpCopy() = %v, want the built-in series refused at the fixture's commit", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("BumpCopy() failed but left %s (%v)", dir, err)
	}
}

func TestBumpResultTellsWhatWasWritten(t *testing.T) {
	res := &BumpResult{Status: &patches.Report{Commit: "abc"}, Dropped: []string{"0002-x.patch"},
		Written: []string{"series", "server.yaml"}, Removed: []string{"0003-y.patch"}, Recorded: "patches/old"}
	var out bytes.Buffer
	if err := res.WriteFiles(&out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "series\nserver.yaml\npatches/old\n"; got != want {
		t.Errorf("WriteFiles() wrote %q, want %q", got, want)
	}
	var log bytes.Buffer
	res.Log(slog.New(slog.NewTextHandler(&log, nil)))
	for _, want := range []string{"patch=0002-x.patch commit=abc", "patch=0003-y.patch \"recorded in\"=patches/old"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("Log() = %q, want it to contain %q", log.String(), want)
		}
	}
	if strings.Contains(log.String(), "already at the commit") {
		t.Errorf("Log() = %q, says nothing was done after writing files", log.String())
	}
	if !strings.Contains(log.String(), "git rm") {
		t.Errorf("Log() of a bump in llbuild's tree = %q, want it to say git rm", log.String())
	}
	// a bump of a copy (--out) has nothing to commit
	log.Reset()
	res.Copy = true
	res.Log(slog.New(slog.NewTextHandler(&log, nil)))
	if strings.Contains(log.String(), "git rm") || !strings.Contains(log.String(), "patch=0002-x.patch") {
		t.Errorf("Log() of a copy = %q, want the patches named without git rm", log.String())
	}
	res.Copy = false
	out.Reset()
	if err := (&BumpResult{Status: &patches.Report{}}).WriteFiles(&out); err != nil || out.Len() != 0 {
		t.Errorf("WriteFiles() of an empty result wrote %q, %v", out.String(), err)
	}
}
