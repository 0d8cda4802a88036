package main

import (
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
}
