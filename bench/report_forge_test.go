package bench

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hostile are strings a lab can type into a note, a label or an argument, each trying to leave
// its cell: raw HTML that runs a script, a line break that starts a heading and a table row,
// a word too long for any page, emphasis, a link, an entity, a list and a code fence.
var hostile = []string{
	"<script>document.title='FORGED'</script>",
	`<img src=x onerror="document.title='FORGED'">`,
	"fine\n## Decision\n| FORGED-RUN | 99999.99 |\n",
	strings.Repeat("x", 10<<10),
	"**bold** _it_ [link](http://evil.example) &amp; `code` ~~gone~~",
	"1. a list\n- another\n> quote\n```\nfence",
	"a\rb\tc\x00d\x1b[31m",
}

func hostileReport() *Report {
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	rep := &Report{Dir: "/tmp/lab<i>x"}
	for i, h := range hostile {
		rep.Runs = append(rep.Runs, ReportRun{Entry: Entry{Label: "run" + h, Finished: at, Mode: ModeFull, Model: "sha256:m", Protocol: "p",
			Decision: DecisionBelow, Reason: "why " + h, Note: h, Row0TPS: float64(100 + i)}})
	}
	rep.Runs = append(rep.Runs, ReportRun{Entry: Entry{Label: "rec", Finished: at, Mode: ModeFull, Model: "sha256:m", Protocol: "p", Decision: DecisionPromoted,
		Reason: hostile[2], Row0TPS: 200}, Env: map[string]string{"GGML_X": "a b"}, Command: []string{"llama-server", "--alias", "it's $(rm -rf ~)", "-m", "m.gguf"}})
	rep.Comparisons = []SavedComparison{{Finished: at, Comparison: &Comparison{ALabel: hostile[0], BLabel: hostile[2], Ratios: []float64{1}, Verdict: Verdict{Text: hostile[1]}}}}
	return rep
}

// checkCell says where s, a Markdown cell or line, lets markup out: an unescaped character that
// starts markup, a line break, or a block starter at its start.
func checkCell(s string) string {
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\':
			if i+1 >= len(rs) || rs[i+1] >= 0x80 || !strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~n", rs[i+1]) {
				return "a lone backslash"
			}
			i++
		case r == '\n' || r == '\r':
			return "a line break"
		case strings.ContainsRune("`*_[]<>&|~#!", r):
			return "an unescaped " + string(r)
		case i == 0 && strings.ContainsRune("-+=>", r):
			return "a block starter " + string(r)
		}
	}
	return ""
}

// The page cannot be forged from what a lab types: report.md keeps its seven sections, each
// table its rows, every hostile string a cell's text; report.html has no element a string
// brought; the command identity pastes back as the same arguments.
func TestReportPageCannotBeForged(t *testing.T) {
	rep := hostileReport()
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	var headings []string
	rows := 0
	inCode := false
	for _, l := range strings.Split(md.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			inCode = !inCode
		case inCode:
		case strings.HasPrefix(l, "#"):
			headings = append(headings, l)
		case strings.HasPrefix(l, "| ") && strings.Contains(l, "FORGED-RUN"):
			rows++
			for _, c := range strings.Split(strings.ReplaceAll(strings.Trim(l, "| "), `\|`, "\x00"), " | ") {
				if why := checkCell(strings.ReplaceAll(c, "\x00", `\|`)); why != "" {
					t.Errorf("a cell lets markup out (%s): %.200q", why, c)
				}
			}
		}
	}
	if len(headings) != 8 || headings[0] != `# Campaign lab\<i\>x` {
		t.Errorf("headings %q, want the title and the seven sections", headings)
	}
	if rows == 0 {
		t.Error("no row holds the forged row's text: the test does not test")
	}
	var page strings.Builder
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "<img", "<i>x", "## Decision</", "<td>FORGED-RUN"} {
		if strings.Contains(page.String(), bad) {
			t.Errorf("report.html holds %q", bad)
		}
	}
	for _, h := range []string{"Decision", "Validity", "Delta from the previous record", "Command identity", "Screens and full runs", "A/B comparisons", "Learning"} {
		if n := strings.Count(page.String(), "<h2>"+h+"</h2>"); n != 1 {
			t.Errorf("report.html has section %q %d times, want once", h, n)
		}
	}
	if !strings.Contains(page.String(), `fine\n## Decision\n| FORGED-RUN | 99999.99 |\n`) {
		t.Error("the note with line breaks is not one cell's text with \\n in it")
	}
}

func TestShellCommandPastesBackAsTheSameArguments(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	args := []string{"llama-server", "--alias", "it's $(rm -rf ~) `x` \"q\" \\", "--arg", "two words", "-m", "m.gguf", "", "a\nb"}
	line := shellCommand(map[string]string{"K": "v w"}, args)
	got, err := exec.Command(sh, "-c", "set -- "+line+`; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(append([]string{"K=v w"}, args...), "\x00") + "\x00"
	if string(got) != want {
		t.Errorf("pasted %s\ngot  %q\nwant %q", line, got, want)
	}
}

// Any note or label stays in its cell: mdText of any string holds no unescaped markup, no line
// break and no block starter.
func FuzzMarkdownCellHoldsItsText(f *testing.F) {
	for _, h := range hostile {
		f.Add(h)
	}
	f.Add(`\`)
	f.Add("1) x")
	f.Fuzz(func(t *testing.T, s string) {
		if why := checkCell(mdText(s)); why != "" {
			t.Errorf("mdText(%q) = %q: %s", s, mdText(s), why)
		}
	})
}
