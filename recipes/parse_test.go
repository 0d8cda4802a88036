package recipes

import (
	"strings"
	"testing"
)

// An unknown key does not hide the other problems of the same file: all are reported at once.
func TestParseReportsUnknownKeysWithTheOtherProblems(t *testing.T) {
	data, err := builtin.ReadFile("server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Load("server")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "commit: "+r.Source.Commit, "commit: "+r.Source.Commit[:9]+"\n  branch: master", 1)
	s += "colour: blue\n"
	_, err = Parse("my.yaml", []byte(s))
	for _, want := range []string{"my.yaml: line", "field branch not found", "field colour not found", "short commit id"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse() = %v, want it to contain %q", err, want)
		}
	}
	_, err = ParseAptPins("bad.yaml", []byte("schemaVersion: 1\ndistro: ubuntu-24.04\nsnapshot: 2026-07-23\npackages: {cmake: \"1\"}\nextra: 1\n"))
	for _, want := range []string{"field extra not found", "YYYYMMDDTHHMMSSZ"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAptPins() = %v, want it to contain %q", err, want)
		}
	}
}
