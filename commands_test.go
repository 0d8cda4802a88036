package main

import (
	"strings"
	"testing"
)

// `llbuild server`, build's name before, still builds, after a one-line note on stderr; help
// lists build only, and build prints no note.
func TestServerIsBuildsOldName(t *testing.T) {
	const note = `llbuild: "llbuild server" is deprecated: use "llbuild build" (the same flags)` + "\n"
	code, out, stderr := runCLI(t, "server", "-t", "cpu-v9")
	if code != exitUsage || out != "" || !strings.HasPrefix(stderr, note) || !strings.Contains(stderr, `unknown target "cpu-v9"`) || strings.Count(stderr, "\n") != 2 {
		t.Errorf("llbuild server -t cpu-v9 = exit %d, stdout %q, stderr %q; want exit 2, the note and build's own error", code, out, stderr)
	}
	code, _, stderr = runCLI(t, "build", "-t", "cpu-v9")
	if code != exitUsage || strings.Contains(stderr, "deprecated") {
		t.Errorf("llbuild build -t cpu-v9 = exit %d, stderr %q; want exit 2 without the note", code, stderr)
	}
	code, _, stderr = runCLI(t, "server", "x")
	if code != exitUsage || !strings.Contains(stderr, `server takes no arguments, got ["x"]`) {
		t.Errorf("llbuild server x = exit %d, stderr %q; want exit 2 naming the command as called", code, stderr)
	}
	_, help, _ := runCLI(t, "--help")
	if !strings.Contains(help, "   build ") || strings.Contains(help, "   server ") {
		t.Errorf("llbuild --help lists:\n%s\nwant build and not server", help)
	}
}
