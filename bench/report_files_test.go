package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The page's files are written where asked (the directory made if missing) with what
// WriteMarkdown and WriteHTML render, and their paths come back in that order; a directory that
// cannot be made writes nothing.
func TestReportWriteFilesWritesBothPages(t *testing.T) {
	rep := hostileReport()
	out := filepath.Join(t.TempDir(), "a", "page")
	paths, err := rep.WriteFiles(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(out, "report.md"), filepath.Join(out, "report.html")}
	if len(paths) != 2 || paths[0] != want[0] || paths[1] != want[1] {
		t.Fatalf("WriteFiles() = %v, want %v", paths, want)
	}
	for i, write := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return rep.WriteMarkdown(b) },
		func(b *bytes.Buffer) error { return rep.WriteHTML(b) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(paths[i])
		if err != nil || !bytes.Equal(got, b.Bytes()) {
			t.Errorf("%s: %d bytes (%v), want the %d bytes rendered", paths[i], len(got), err, b.Len())
		}
	}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if paths, err := rep.WriteFiles(filepath.Join(blocked, "page")); err == nil || len(paths) != 0 {
		t.Errorf("WriteFiles(under a file) = %v, %v; want an error and no paths", paths, err)
	}
}
