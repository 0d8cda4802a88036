package main

import (
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/enginetest"
)

// chromium is Debian's chromium, which the page is checked in; scripts/test.sh installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	enginetest.SkipUnlessCI(t, "Debian's chromium is not installed (apt-get install chromium; scripts/test.sh does)")
	return ""
}

// bench report makes the campaign's page from its records: a campaign of real runs (sid's
// llama-server: an A/B of two bundles over two full rounds, and a screen), the Markdown page's
// sections, one static HTML file whose charts a real headless Chromium renders (the DOM read
// back: a point per run, the record's line, a ratio bar per comparison; a screenshot that is
// not blank), and a promoted run's leaderboard JSON.
func TestBenchReportIsThePageOfTheCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	browser := chromium(t)
	bs := benchBundles(t, sidArtifacts(t, "cpu-v3"), nil, []string{"--threads", "1"})
	dir := t.TempDir()
	common := []string{"--dir", dir, "--canaries", "2", "--prompt-tokens", "32", "--generate", "16"}
	if code, _, stderr := benchRun(t, append([]string{bs[0], bs[1], "--mode", "full", "--rows", "2", "--rounds", "2"}, common...)...); code != 0 {
		t.Fatalf("bench A/B: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := benchRun(t, append([]string{bs[1], "--note", "one thread, screened again"}, common...)...); code != 0 {
		t.Fatalf("bench screen: exit %d\n%s", code, stderr)
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "bench", "report", dir, "--out", out)
	if code != 0 || !strings.Contains(stdout, filepath.Join(out, "report.html")) {
		t.Fatalf("bench report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	for _, want := range []string{"## Decision", "## Validity", "## Delta from the previous record", "## Command identity", "## Screens and full runs", "## A/B comparisons", "## Learning", "one thread, screened again", "5 runs: 5 valid"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	page := filepath.Join(out, "report.html")
	raw, _ := os.ReadFile(page)
	if strings.Contains(string(raw), "<script") || strings.Contains(string(raw), "http://") || strings.Contains(string(raw), "https://") {
		t.Errorf("report.html has a script or a link out: it must stand alone")
	}
	dom, err := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://"+page).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	d := string(dom)
	if n := strings.Count(d, `<circle class="run`); n != 5 {
		t.Errorf("the rendered row-0 chart has %d points, want one per run (5)", n)
	}
	if !strings.Contains(d, `<polyline class="record"`) || strings.Count(d, `<line class="ratio"`) != 1 || !strings.Contains(d, "<table>") {
		t.Errorf("the rendered page lacks the record's line, the A/B's ratio bar or the tables:\n%.2000s", d)
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	if keep := os.Getenv("LLBUILD_KEEP_REPORT_SHOT"); keep != "" {
		shot = keep
	}
	if b, err := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,900", "--screenshot="+shot, "file://"+page).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, b)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	colors := map[uint32]bool{}
	bnd := img.Bounds()
	for y := bnd.Min.Y; y < bnd.Max.Y; y += 7 {
		for x := bnd.Min.X; x < bnd.Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[(r>>8)<<16|(g>>8)<<8|b>>8] = true
		}
	}
	if bnd.Dx() != 1000 || len(colors) < 8 {
		t.Errorf("screenshot %v with %d colours: want a 1000-wide page with its charts drawn", bnd, len(colors))
	}
	rep, err := bench.ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	var promoted string
	for _, r := range rep.Runs {
		if r.Decision == bench.DecisionPromoted {
			promoted = r.Label
		}
	}
	code, js, stderr := runCLI(t, "bench", "report", dir, "--leaderboard", promoted)
	var e bench.LeaderboardEntry
	if code != 0 || json.Unmarshal([]byte(js), &e) != nil || e.Label != promoted || !e.Valid || e.Row0TPS <= 0 || len(e.ManifestSHA256) == 0 || len(e.PlanHash) == 0 || len(e.Command) == 0 {
		t.Errorf("leaderboard %q: exit %d %+v\n%s", promoted, code, e, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", "report", dir, "--leaderboard", "nope"); code != 2 || !strings.Contains(stderr, "standing records are") {
		t.Errorf("leaderboard of an unknown run: exit %d %s", code, stderr)
	}

	// records.json is an index anyone can edit; each run's record.json is what bench wrote. An
	// entry its record does not back (a figure edited, the record gone, unreadable, or a label
	// entered twice) stands as no record on the page and goes to no leaderboard (exit 1).
	index := filepath.Join(dir, "records.json")
	orig, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var rs bench.Records
	if err := json.Unmarshal(orig, &rs); err != nil {
		t.Fatal(err)
	}
	var at int
	for i := len(rs.Runs) - 1; i >= 0; i-- {
		if rs.Runs[i].Label == promoted {
			at = i // the first run of that label (the record; a later round's run has the same label)
		}
	}
	record := filepath.Join(dir, rs.Runs[at].Dir, "record.json")
	kept, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		forge      func()
	}{
		{"row 0 edited", "row 0 tok/s 1e+308 in records.json", func() {
			f := rs
			f.Runs = slices.Clone(rs.Runs)
			f.Runs[at].Row0TPS = 1e308
			b, _ := json.Marshal(f)
			os.WriteFile(index, b, 0o644)
		}},
		{"record gone", "record.json cannot be read", func() { os.Remove(record) }},
		{"record unreadable", "record.json: unexpected end of JSON input", func() { os.WriteFile(record, []byte("{"), 0o644) }},
		{"entered twice", "a second entry of " + rs.Runs[at].Dir, func() {
			f := rs
			f.Runs = append(slices.Clone(rs.Runs), rs.Runs[at])
			b, _ := json.Marshal(f)
			os.WriteFile(index, b, 0o644)
		}},
	} {
		c.forge()
		if c.name == "entered twice" {
			// the first entry is the record's own; the page still lists the second as unbacked
			if code, _, _ := runCLI(t, "bench", "report", dir, "--leaderboard", promoted); code != 0 {
				t.Errorf("%s: the first entry's leaderboard: exit %d", c.name, code)
			}
		} else if code, _, stderr := runCLI(t, "bench", "report", dir, "--leaderboard", promoted); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: leaderboard exit %d %q, want 1 and %q", c.name, code, stderr, c.want)
		}
		if code, _, stderr := runCLI(t, "bench", "report", dir, "--out", out); code != 0 {
			t.Errorf("%s: report exit %d %s", c.name, code, stderr)
		}
		md, _ := os.ReadFile(filepath.Join(out, "report.md"))
		if !strings.Contains(string(md), "not backed by their own record.json") || !strings.Contains(string(md), c.want) {
			t.Errorf("%s: report.md does not say the run is unbacked (%q):\n%s", c.name, c.want, md)
		}
		if c.name != "entered twice" && !strings.Contains(string(md), "No record yet") {
			t.Errorf("%s: report.md still shows a standing record:\n%s", c.name, md)
		}
		os.WriteFile(index, orig, 0o644)
		os.WriteFile(record, kept, 0o644)
	}
}

// markdownIt is markdown-it (a CommonMark renderer with GFM tables) from npm, installed once into
// the test cache; scripts/test.sh installs node and npm.
func markdownIt(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		enginetest.SkipUnlessCI(t, "node is not installed (apt-get install nodejs npm; scripts/test.sh does)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "llbuild-test", "npm", "markdown-it-14.1.0")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "markdown-it", "package.json")); err != nil {
		if out, err := exec.Command("npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", "markdown-it@14.1.0").CombinedOutput(); err != nil {
			enginetest.SkipUnlessCI(t, "npm install markdown-it: "+err.Error()+"\n"+string(out))
		}
	}
	script := filepath.Join(dir, "render.js")
	js := `const md = require(process.argv[2] + "/node_modules/markdown-it")({html: true});
const fs = require("fs");
process.stdout.write("<!DOCTYPE html><html><head><title>rendered</title></head><body>" + md.render(fs.readFileSync(process.argv[3], "utf8")) + "</body></html>");
`
	if err := os.WriteFile(script, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return node + "\x00" + script + "\x00" + dir
}

// A campaign whose notes, labels, reasons and arguments are hostile (raw HTML that runs a script,
// a note whose line breaks start a heading and a table row, a 10 KB word) makes a page nobody can
// forge: report.md rendered by a real CommonMark renderer with raw HTML on, and both pages in
// headless Chromium (scripts run there), keep their sections, their rows and their title; each
// hostile string is one cell's text.
func TestBenchReportCannotBeForgedInARealRenderer(t *testing.T) {
	browser := chromium(t)
	renderer := strings.Split(markdownIt(t), "\x00")
	dir := t.TempDir()
	hostile := []string{
		"<script>document.title='FORGED'</script>",
		`<img src=x onerror="document.title='FORGED'">`,
		"fine\n## Decision\n| FORGED-RUN | 99999.99 |",
		strings.Repeat("w", 10<<10),
	}
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	rs := bench.Records{SchemaVersion: bench.RecordSchema}
	for i, h := range hostile {
		rs.Runs = append(rs.Runs, bench.Entry{Label: fmt.Sprintf("run%d", i), Dir: fmt.Sprintf("runs/run%d", i), Finished: at, Mode: bench.ModeFull,
			Model: "sha256:m", Protocol: "p", Decision: bench.DecisionBelow, Reason: h, Note: h, Row0TPS: 100, Valid: true})
	}
	rs.Runs = append(rs.Runs, bench.Entry{Label: "rec", Dir: "runs/rec", Finished: at, Mode: bench.ModeFull, Model: "sha256:m", Protocol: "p",
		Decision: bench.DecisionPromoted, Reason: hostile[2], Row0TPS: 200, Valid: true})
	// each run's own record, as bench writes it, backs its entry (bench report checks)
	files := []struct {
		path string
		v    any
	}{{"records.json", rs}}
	for _, e := range rs.Runs {
		rec := bench.Record{Identity: bench.Identity{Label: e.Label, Model: bench.File{SHA256: e.Model}}, Valid: e.Valid, Finished: e.Finished,
			Summary: bench.Summary{Row0TPS: e.Row0TPS}}
		if e.Label == "rec" {
			rec.Identity.Command, rec.Identity.Env = []string{"llama-server", "--alias", "it's <b>$(x)</b>"}, map[string]string{"K": "a b"}
		}
		files = append(files, struct {
			path string
			v    any
		}{e.Dir + "/record.json", rec})
	}
	for _, f := range files {
		b, err := json.Marshal(f.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f.path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.path), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, stderr := runCLI(t, "bench", "report", dir); code != 0 {
		t.Fatalf("bench report: exit %d\n%s", code, stderr)
	}
	rendered := filepath.Join(t.TempDir(), "md.html")
	out, err := exec.Command(renderer[0], renderer[1], renderer[2], filepath.Join(dir, "report.md")).Output()
	if err != nil {
		t.Fatalf("markdown-it: %v", err)
	}
	if err := os.WriteFile(rendered, out, 0o644); err != nil {
		t.Fatal(err)
	}
	for page, title := range map[string]string{rendered: "rendered", filepath.Join(dir, "report.html"): "Campaign " + filepath.Base(dir)} {
		dom, err := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://"+page).Output()
		if err != nil {
			t.Fatalf("chromium --dump-dom %s: %v", page, err)
		}
		d := string(dom)
		if !strings.Contains(d, "<title>"+title+"</title>") || strings.Contains(d, "<img") || strings.Contains(d, "<script") {
			t.Errorf("%s in Chromium: the title changed or an element came in:\n%.3000s", filepath.Base(page), d)
		}
		for _, h := range []string{"Decision", "Validity", "Delta from the previous record", "Command identity", "Screens and full runs", "A/B comparisons", "Learning"} {
			if n := strings.Count(d, "<h2>"+h+"</h2>"); n != 1 {
				t.Errorf("%s: section %q %d times, want once", filepath.Base(page), h, n)
			}
		}
		// the Screens table: a header and one row per run, the forged row's text inside a note
		if strings.Contains(d, "<td>FORGED-RUN") || strings.Count(d, "<tr>") < len(rs.Runs)+1 {
			t.Errorf("%s: a forged table row, or rows lost:\n%.3000s", filepath.Base(page), d)
		}
		if !strings.Contains(d, `'K=a b' llama-server --alias 'it'\''s &lt;b&gt;$(x)&lt;/b&gt;'`) {
			t.Errorf("%s: the command identity is not shell-quoted text:\n%.3000s", filepath.Base(page), d)
		}
	}
}
