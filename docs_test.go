package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/cliargs"
	"github.com/urfave/cli/v2"
)

// docFiles are the documents whose command lines must be ones llbuild accepts.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// TestDocsCommandLinesMatchTheCLI: every llbuild command line in a fenced code block of README
// and docs/ names a command llbuild has, with flags that command declares, and parses as llbuild
// itself parses it (run with --help, which checks the flags and their values and runs nothing).
func TestDocsCommandLinesMatchTheCLI(t *testing.T) {
	n := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range docCommands(string(text)) {
			n++
			if err := checkDocCommand(commands(), c.args); err != nil {
				t.Errorf("%s:%d: %s: %v", file, c.line, c.text, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no llbuild command lines found in README.md and docs/: the extraction is broken")
	}
}

// TestDocsCheckFindsMistakes: the check refuses what a document could get wrong, so that the
// test above cannot pass by checking nothing.
func TestDocsCheckFindsMistakes(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string // in the error; "" for none
	}{
		{"```sh\nllbuild build --target cpu-v3 --out out\n```\n", ""},
		{"```sh\n$ llbuild verify bundle.tar.zst --json   # flags after the argument\n```\n", ""},
		{"```sh\ngo run . build\n```\n", ""},
		{"```sh\nllbuild --quiet patches status --source ~/llama.cpp --range A..B\n```\n", ""},
		{"```sh\nllbuild plan diff --json a.json b.json\n```\n", ""},
		{"```sh\nllbuild build --target cpu-v3 \\\n  --no-such-flag\n```\n", "--no-such-flag"},
		{"```sh\nllbuild bench -x b\n```\n", "-x"},
		{"```sh\nllbuild patches stats --source s\n```\n", `"stats"`},
		{"```sh\nllbuild frobnicate\n```\n", `"frobnicate"`},
		{"```sh\nllbuild server --target cpu-v3\n```\n", "hidden"},
		{"```sh\nllbuild --loud build\n```\n", "loud"},
		{"```sh\nllbuild bench b --rows many\n```\n", "many"},
		{"```sh\nllbuild target\n```\n", "subcommand"},
	} {
		cs := docCommands(tc.doc)
		if len(cs) != 1 {
			t.Errorf("docCommands(%q) = %d commands, want 1", tc.doc, len(cs))
			continue
		}
		err := checkDocCommand(commands(), cs[0].args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("check(%q) = %v, want no error", cs[0].text, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("check(%q) = %v, want an error naming %s", cs[0].text, err, tc.want)
		}
	}
}

// TestDocsExtraction: what counts as a command line in a document.
func TestDocsExtraction(t *testing.T) {
	doc := "text llbuild build --bogus (prose is not checked)\n" +
		"```sh\n" +
		"# llbuild build --bogus (a comment)\n" +
		"$ llbuild plan -t h200 --json > old.json\n" +
		"llbuild bundle -t h200 \\\n  --model m.gguf \\\n  -o b   # tail comment\n" +
		"CI=true llbuild targets | head -1\n" +
		"pip install llama-cpp-python\n" +
		"./llbuild plan && llbuild recipes --json; echo done\n" +
		"```\n" +
		"    llbuild build --bogus (indented, not fenced)\n"
	var got []string
	for _, c := range docCommands(doc) {
		got = append(got, fmt.Sprintf("%d:%s", c.line, strings.Join(c.args, " ")))
	}
	want := []string{
		"4:plan -t h200 --json",
		"5:bundle -t h200 --model m.gguf -o b",
		"8:targets",
		"10:plan",
		"10:recipes --json",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docCommands() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// docCommand is one llbuild command line of a document: the line it starts on, its text, and
// its arguments after the program name.
type docCommand struct {
	line int
	text string
	args []string
}

// docCommands returns the llbuild command lines in the fenced code blocks of a Markdown
// document: lines continued with a trailing backslash are joined, a leading "$ " prompt is
// dropped, comment lines are skipped, and a shell line is cut at |, &&, ||, ; and & into
// commands, each checked if it runs llbuild (llbuild, ./llbuild or go run .).
func docCommands(doc string) []docCommand {
	var out []docCommand
	sc := bufio.NewScanner(strings.NewReader(doc))
	inFence, n := false, 0
	var pending string
	pendingLine := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence, pending = !inFence, ""
			continue
		}
		if !inFence {
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		full := strings.TrimSpace(pending + line)
		pending = ""
		full = strings.TrimPrefix(full, "$ ")
		if strings.HasPrefix(full, "#") {
			continue
		}
		for _, words := range shellCommands(full) {
			for len(words) > 0 && isAssignment(words[0]) {
				words = words[1:]
			}
			var args []string
			switch {
			case len(words) >= 1 && (words[0] == "llbuild" || words[0] == "./llbuild"):
				args = words[1:]
			case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == ".":
				args = words[3:]
			default:
				continue
			}
			out = append(out, docCommand{pendingLine, strings.Join(words, " "), args})
		}
	}
	return out
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" || strings.HasPrefix(name, "-") {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// shellCommands splits a shell line into its simple commands' words: quotes are honoured,
// an unquoted # starts a comment, the operators |, ||, &&, ; and & end a command, and a
// redirection (>, >>, 2>, <, with or without its file joined) is left out with its file.
func shellCommands(line string) [][]string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord:
			i = len(rs)
		case r == '|' || r == '&' || r == ';':
			flush()
			words = append(words, string(r))
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	var out [][]string
	var cmd []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "|" || w == "&" || w == ";":
			if len(cmd) > 0 {
				out = append(out, cmd)
			}
			cmd = nil
		case w == "<" || w == ">" || w == ">>" || w == "2>" || w == "2>>":
			i++ // and its file
		case strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>"):
			// joined to its file, or 2>&1 (whose & was split off: drop the 1 that follows)
			if strings.HasSuffix(w, ">") && i+2 < len(words) && words[i+1] == "&" {
				i += 2
			}
		default:
			cmd = append(cmd, w)
		}
	}
	if len(cmd) > 0 {
		out = append(out, cmd)
	}
	return out
}

// checkDocCommand checks one command line's arguments against llbuild's commands: it walks the
// command path as urfave dispatches it, refusing an unknown or hidden command and any flag the
// command on the path does not declare; then llbuild itself parses the line with --help
// appended and the positional arguments left out (the global flags, each flag's value, a flag
// given twice).
func checkDocCommand(cmds []*cli.Command, args []string) error {
	var cmd *cli.Command // nil: the app, before the first command
	path := "llbuild"
	// kept is the line without its positional arguments, for llbuild's own parse: with
	// --help, urfave would read an argument as the name of a help topic.
	var kept []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			kept = append(kept, a)
			if cmd == nil {
				continue // a global flag: left to llbuild's own parse below
			}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "help" || name == "h" {
				continue
			}
			f := cliargs.FlagOf(cmd.Flags, name)
			if f == nil {
				return fmt.Errorf("%s has no flag %s", path, strings.SplitN(a, "=", 2)[0])
			}
			if _, isBool := f.(*cli.BoolFlag); !isBool && !hasValue && i+1 < len(args) {
				i++ // its value
				kept = append(kept, args[i])
			}
			continue
		}
		subs := cmds
		if cmd != nil {
			subs = cmd.Subcommands
		}
		if cmd == nil && (a == "help" || a == "h") {
			return nil
		}
		if sub := cliargs.FindCommand(subs, a); sub != nil {
			if sub.Hidden {
				return fmt.Errorf("%s %s is a hidden command (an old name): %s", path, a, sub.Usage)
			}
			cmd, path = sub, path+" "+a
			kept = append(kept, a)
			continue
		}
		if cmd == nil || (len(cmd.Subcommands) > 0 && cmd.Action == nil) {
			return fmt.Errorf("%s has no command %q", path, a)
		}
		// a positional argument of cmd
	}
	if cmd == nil {
		if hasHelpOrVersion(args) {
			return nil
		}
		return fmt.Errorf("no command")
	}
	if len(cmd.Subcommands) > 0 && cmd.Action == nil && !hasHelpOrVersion(args) {
		return fmt.Errorf("%s needs a subcommand", path)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(append([]string{"llbuild"}, kept...), "--help"), strings.NewReader(""), &stdout, &stderr); code != exitOK {
		return fmt.Errorf("llbuild refuses it (exit %d): %s", code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func hasHelpOrVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--help", "-h", "--version", "-v":
			return true
		}
	}
	return false
}

// TestDocsOfflineCommandsRun runs, as written, every command line of README and docs/ that
// needs nothing this machine lacks (no build, no engine, no GPU, no registry, no llama.cpp
// source): the target and recipe listings, target show and detect, and plans of built-in and
// detected targets. Each document runs in a directory of its own, in order, so that a line
// reading a file an earlier line wrote (target detect -o, then plan --target-file) finds it.
// TestDocsWalk runs the lines that read a repository, a campaign's log or a lab's records; the
// others are checked by TestDocsCommandLinesMatchTheCLI and run, with stand-ins, by the tests of
// their commands.
func TestDocsOfflineCommandsRun(t *testing.T) {
	offline := func(args []string) bool {
		for _, a := range args {
			if strings.ContainsAny(a, "<>~$*") || a == "--source" || a == "--check-pins" || a == "--ref" || strings.HasPrefix(a, "--source=") {
				return false
			}
		}
		switch {
		case len(args) == 0:
			return false
		case args[0] == "targets" || args[0] == "recipes":
			return true
		case args[0] == "target" && len(args) > 1 && (args[1] == "show" || args[1] == "detect"):
			return true
		case args[0] == "plan" && (len(args) < 2 || args[1] != "diff"):
			return true
		}
		return false
	}
	ran := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, c := range docCommands(string(text)) {
			if !offline(c.args) {
				continue
			}
			args := append([]string(nil), c.args...)
			for i, a := range args { // files the line names go to the document's directory
				if i > 0 && (args[i-1] == "-o" || args[i-1] == "--target-file") {
					args[i] = filepath.Join(dir, a)
				}
			}
			code, _, stderr := runCLI(t, args...)
			t.Logf("%s:%d: %s", file, c.line, c.text)
			if code != exitOK {
				t.Errorf("%s:%d: %s: exit %d\n%s", file, c.line, c.text, code, stderr)
			}
			ran++
		}
	}
	t.Logf("ran %d command lines of README.md and docs/", ran)
	if ran < 10 {
		t.Errorf("ran %d command lines, want the documents' offline ones (10 or more): the selection is broken", ran)
	}
}
