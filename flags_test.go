package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bisect"
	"github.com/llbuild/llbuild/internal/gitref"
)

// Every command that takes arguments reads its flags after them too: a bool flag, a value flag
// (whose value is not taken for an argument) and `--`, after which what starts with - is an
// argument. Each case shows its flag took effect in what the command did with it.
func TestFlagsMayFollowArguments(t *testing.T) {
	dir := t.TempDir() // not a bundle: verify finds a problem, serve and bench stop at their flags
	camp := smallCampaign(t)
	lab := t.TempDir() // a bench campaign of one promoted run, its records alone
	if err := os.WriteFile(filepath.Join(lab, "records.json"), []byte(`{"schemaVersion": 1, "runs": [{"label": "b0-full", "dir": "runs/b0-full", "bundle": "b0", "finished": "2026-12-03T00:00:00Z", "mode": "full", "model": "sha256:m", "protocol": "p", "canary": "4/4", "row0TokPerSec": 100, "valid": true, "decision": "promoted"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// its own record, which backs the entry (bench report checks)
	if err := os.MkdirAll(filepath.Join(lab, "runs", "b0-full"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lab, "runs", "b0-full", "record.json"), []byte(`{"schemaVersion": 1, "identity": {"label": "b0-full", "model": {"name": "m.gguf", "sha256": "sha256:m"}}, "valid": true, "finished": "2026-12-03T00:00:00Z", "summary": {"row0TokPerSec": 100}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		command  string // as help names it
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"verify", "bool flag", []string{"verify", dir, "--json"}, 1, `"ok": false`, "1 problem(s)"},
		{"verify", "value flag", []string{"verify", dir, "--extract", filepath.Join(dir, "x")}, 2, "", "--extract unpacks an archive"},
		{"verify", "-- ends the flags", []string{"verify", dir, "--", "--json"}, 2, "", `got also ["--json"]`},
		{"verify", "-- before an argument that starts with -", []string{"verify", "--", "-x"}, 2, "", "-x: no such file"},
		{"serve", "value flag", []string{"serve", dir, "--addr", "nonsense"}, 2, "", `--addr "nonsense"`},
		{"serve", "-- before an argument that starts with -", []string{"serve", "--", "-x"}, 2, "", "bundle -x"},
		{"bench", "value flags", []string{"bench", dir, "--canaries", "3", "--mode", "fast"}, 2, "", `mode "fast": use screen or full`},
		{"bench", "-- before an argument that starts with -", []string{"bench", "--", "-x"}, 2, "", "bundle -x"},
		{"index", "value flag", []string{"index", "/nonexistent-artifacts", "-o", filepath.Join(dir, "index")}, 2, "", "reading artifacts /nonexistent-artifacts"},
		{"index", "-- before an argument that starts with -", []string{"index", "-o", filepath.Join(dir, "index"), "--", "-x"}, 2, "", "reading artifacts -x"},
		{"plan diff", "bool flag", []string{"plan", "diff", "cpu-v3", "h200", "--json"}, 0, `"target": "cpu-v3"`, ""},
		{"plan diff", "value flag between the arguments", []string{"plan", "diff", "cpu-v3", "--recipe", "nope", "h200"}, 2, "", `unknown recipe "nope"`},
		{"plan diff", "-- before an argument that starts with -", []string{"plan", "diff", "--", "-a", "cpu-v3"}, 2, "", "-a is neither a file"},
		{"target show", "value flag", []string{"target", "show", "cpu-v3", "--target-file", "/nonexistent.yaml"}, 2, "", "not both"},
		{"target show", "-- before an argument that starts with -", []string{"target", "show", "--", "-x"}, 2, "", `"-x"`},
		{"bisect log", "bool flag", []string{"bisect", "log", camp, "--json"}, 0, `"phase": "ends"`, ""},
		{"bench report", "value flag", []string{"bench", "report", lab, "--leaderboard", "b0-full"}, 0, `"label": "b0-full"`, ""},
		{"bench report", "-- before an argument that starts with -", []string{"bench", "report", "--", "-x"}, 2, "", "-x holds no runs"},
		{"bisect log", "-- before an argument that starts with -", []string{"bisect", "log", "--", "-x"}, 2, "", "-x has no bisect.log"},
		{"bisect replay", "value flag", []string{"bisect", "replay", filepath.Join(camp, "bisect.log"), "--dir", filepath.Join(dir, "replayed"), "--json"}, 0, `"phase": "ends"`, ""},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.command] = true
		t.Run(tt.command+"/"+tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("llbuild %v = exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", tt.args, code, out, stderr, tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			if strings.TrimSpace(c.ArgsUsage) != "" && !covered[name] {
				t.Errorf("llbuild %s takes arguments (%s) and no case here shows its flags may follow them", name, c.ArgsUsage)
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", commands())
}

// Mistakes in the flags are usage errors, named as help names the flags, wherever the flags are.
func TestFlagMistakesAreUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"a value the flag refuses", []string{"build", "--jobs", "many"}, `invalid value "many" for flag --jobs`},
		{"a value the flag refuses, after the arguments", []string{"bench", dir, "--canaries", "y"}, `invalid value "y" for flag --canaries`},
		{"a bool flag given a value it refuses", []string{"verify", dir, "--json=maybe"}, `invalid boolean value "maybe" for --json`},
		{"a flag without its value after the arguments", []string{"serve", dir, "--addr"}, "flag needs an argument: --addr"},
		{"an unknown global flag", []string{"--nope", "targets"}, "flag provided but not defined: --nope"},
		{"a missing required flag", []string{"patches", "status"}, `Required flag "source" not set`},
		{"a one-value flag after the arguments repeating one before them", []string{"serve", "--addr", "127.0.0.1:1", dir, "--addr", "127.0.0.1:2"}, "--addr is given twice"},
		{"a one-value flag given twice with two values", []string{"build", "--target-file", "a.yaml", "--target-file", "b.yaml"}, `--target-file is given twice ("a.yaml", then "b.yaml")`},
		{"a one-letter flag given twice", []string{"plan", "-t", "cpu-v3", "-t", "h200"}, "-t is given twice"},
		// a script's unset variable: taken as the flag left out, recipe bump rewrote llbuild's
		// own recipe and preflight checked this machine instead of the target named
		{"an empty value", []string{"recipe", "bump", "--source", dir, "--commit", "x", "--out", ""}, "--out is empty: give it a value, or leave the flag out"},
		{"an empty value with =", []string{"preflight", "--binary", "/bin/true", "--target="}, "--target is empty"},
		{"an empty value of a list flag", []string{"bundle", "--server-arg", ""}, "--server-arg is empty"},
		// urfave said "No help topic" with exit 3, and a misspelt subcommand's flags were
		// reported as unknown
		{"an unknown command", []string{"targt"}, `llbuild has no command "targt" (did you mean "target"?)`},
		{"a misspelt subcommand with its flags", []string{"patches", "statsu", "--source", dir}, `llbuild patches has no command "statsu" (did you mean "status"?): its commands are status`},
		{"help of a word that names no command", []string{"help", "nope"}, "No help topic for 'nope'"},
		// a flag that only works with another, given alone, did nothing
		{"verify --force without --extract", []string{"verify", dir, "--force"}, "give --extract DIR with it"},
		{"recipe bump --record without --new-series", []string{"recipe", "bump", "--source", dir, "--commit", "x", "--record", dir}, "give --new-series FILE with it"},
		{"target detect --force without -o", []string{"target", "detect", "--force"}, "give -o FILE with it"},
		{"target detect with an argument", []string{"target", "detect", "mybox"}, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tt.args...)
			if code != exitUsage || out != "" || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("llbuild %v = exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr with %q", tt.args, code, out, stderr, tt.wantErr)
			}
		})
	}
}

// smallCampaign writes a bisect campaign that has only started: its log's first event.
func smallCampaign(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := []gitref.Commit{{Hash: strings.Repeat("a", 40), Subject: "good (#1)", PR: 1}, {Hash: strings.Repeat("b", 40), Subject: "bad (#2)", PR: 2}}
	l := &bisect.Log{Dir: dir}
	if err := l.Append(bisect.Event{Kind: bisect.EventStart, Path: path, Settings: &bisect.Settings{Good: path[0], Bad: path[1], Target: "cpu-v3", Series: "plain",
		Mode: "screen", Rounds: 3, MaxRounds: 9, Metric: "row0", MinStep: 0.02}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every command that writes somewhere a user names takes the place as -o, --out and, where
// its flag was called so first, --output: which one a command happens to use is not a thing
// to remember.
func TestEveryOutputFlagTakesOAndOut(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	seen := 0
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := path + " " + c.Name
			for _, f := range c.Flags {
				names := f.Names()
				if names[0] != "out" && names[0] != "output" {
					continue
				}
				seen++
				if !slices.Contains(names, "o") || !slices.Contains(names, "out") {
					t.Errorf("%s: its output flag is %v, want -o and --out among its names", name, names)
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("llbuild", commands())
	if seen < 8 {
		t.Errorf("found %d output flags, want at least 8 (build, server, wheel, publish, bisect, bundle, bench report, recipe bump, target detect, wheel index)", seen)
	}
}
