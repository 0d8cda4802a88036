package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/shellquote"
)

// ComparisonsFile holds the campaign's A/B comparisons, one per pair and invocation.
const ComparisonsFile = "comparisons.json"

// SavedComparison is an A/B comparison as the campaign keeps it.
type SavedComparison struct {
	Finished time.Time `json:"finished"`
	// Invocation names the bench that measured it: its comparisons are kept as its rounds
	// finish, each save replacing the one before, so that a bench killed mid-campaign leaves
	// the rounds it finished.
	Invocation string `json:"invocation,omitempty"`
	*Comparison
}

// saveComparisons keeps an invocation's comparisons in the campaign's comparisons.json,
// replacing what the same invocation saved before.
func saveComparisons(dir, invocation string, cs []*Comparison, at time.Time) error {
	if len(cs) == 0 {
		return nil
	}
	unlock, err := lockCampaign(dir)
	if err != nil {
		return err
	}
	defer unlock()
	saved, err := readComparisons(dir)
	if err != nil {
		return err
	}
	saved = slices.DeleteFunc(saved, func(s SavedComparison) bool { return invocation != "" && s.Invocation == invocation })
	for _, c := range cs {
		saved = append(saved, SavedComparison{Finished: at.UTC(), Invocation: invocation, Comparison: c})
	}
	data, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ComparisonsFile), append(data, '\n'), 0o644)
}

func readComparisons(dir string) ([]SavedComparison, error) {
	data, err := os.ReadFile(filepath.Join(dir, ComparisonsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SavedComparison
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ComparisonsFile), err)
	}
	return out, nil
}

// Report is a campaign as its page shows it: every run with its record's figures, and the
// A/B comparisons.
type Report struct {
	Dir         string
	Runs        []ReportRun
	Comparisons []SavedComparison
}

// ReportRun is a campaign entry with what its record adds.
type ReportRun struct {
	Entry
	Acceptance *float64          `json:"acceptance,omitempty"`
	Command    []string          `json:"command,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	PlanHash   string            `json:"planHash,omitempty"`
	Manifest   string            `json:"manifestSha256,omitempty"`
	Commit     string            `json:"llamaCommit,omitempty"`
	// SourceTree and Unverified: a build from a plain directory (Identity.Unverified).
	SourceTree string `json:"sourceTree,omitempty"`
	Unverified bool   `json:"unverified,omitempty"`
	// Unbacked says why the run's own record.json does not back its entry in records.json
	// (missing, unreadable, or its figures differ); "" when it does. Such a run is no
	// standing record on the page and goes to no leaderboard.
	Unbacked string `json:"unbacked,omitempty"`
}

// source names what the run's server was built from: the commit, or for a plain directory's
// build its tree and that the commit is unverified.
func (r ReportRun) source() string {
	if r.Unverified || r.SourceTree != "" {
		return fmt.Sprintf("a plain tree %s, unverified (not checked to be llama.cpp %s)", short8(r.SourceTree), short8(r.Commit))
	}
	return "llama.cpp " + short8(r.Commit)
}

// ReadReport reads the campaign in dir: records.json, each run's record.json (a record that
// cannot be read leaves its run with the entry's figures) and comparisons.json.
func ReadReport(dir string) (*Report, error) {
	rs, err := ReadRecords(dir)
	if err != nil {
		return nil, err
	}
	if len(rs.Runs) == 0 {
		return nil, fmt.Errorf("%s holds no runs (no %s): bench something with --dir %s first", dir, RecordsFile, dir)
	}
	rep := &Report{Dir: dir}
	dirs := map[string]bool{}
	for _, e := range rs.Runs {
		rr := ReportRun{Entry: e}
		rr.Unbacked = rr.readRecord(dir)
		if d := filepath.Clean(e.Dir); dirs[d] {
			rr.Unbacked = strings.TrimPrefix(rr.Unbacked+"; ", "; ") + "a second entry of " + e.Dir
		} else {
			dirs[d] = true
		}
		rep.Runs = append(rep.Runs, rr)
	}
	if rep.Comparisons, err = readComparisons(dir); err != nil {
		return nil, err
	}
	return rep, nil
}

// readRecord fills rr from its run's record.json and says why that record does not back
// the entry (records.json is an index that anyone can edit; each run's record is what the
// bench wrote of it): "" when it does.
func (rr *ReportRun) readRecord(dir string) string {
	if !filepath.IsLocal(rr.Dir) {
		return fmt.Sprintf("its directory %q lies outside the campaign", rr.Dir)
	}
	name := filepath.Join(rr.Dir, "record.json")
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Sprintf("%s cannot be read (%v)", name, errors.Unwrap(err))
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Sprintf("%s: %v", name, err)
	}
	rr.Acceptance, rr.Command, rr.Env = r.Summary.Acceptance, r.Identity.Command, r.Identity.Env
	rr.PlanHash, rr.Manifest, rr.Commit = r.Identity.PlanHash, r.Identity.ManifestSHA256, r.Identity.LlamaCommit
	rr.SourceTree, rr.Unverified = r.Identity.SourceTree, r.Identity.Unverified || r.Identity.SourceTree != ""
	var differ []string
	differs := func(what string, index, record any) {
		differ = append(differ, fmt.Sprintf("%s %v in records.json, %v in %s", what, index, record, name))
	}
	if r.Identity.Label != rr.Label {
		differs("label", rr.Label, r.Identity.Label)
	}
	if r.Summary.Row0TPS != rr.Row0TPS {
		differs("row 0 tok/s", rr.Row0TPS, r.Summary.Row0TPS)
	}
	if r.Valid != rr.Valid {
		differs("valid", rr.Valid, r.Valid)
	}
	if r.Identity.Model.SHA256 != rr.Model {
		differs("model", rr.Model, r.Identity.Model.SHA256)
	}
	if rr.Entry.Manifest != "" && r.Identity.ManifestSHA256 != rr.Entry.Manifest { // older campaigns' entries name none
		differs("manifest", rr.Entry.Manifest, r.Identity.ManifestSHA256)
	}
	if !r.Finished.Equal(rr.Finished) {
		differs("finished", rr.Finished.UTC().Format(time.RFC3339Nano), r.Finished.UTC().Format(time.RFC3339Nano))
	}
	return strings.Join(differ, "; ")
}

// standing are the promoted runs, one per model and protocol, in order of finishing, that
// their own records back.
func (rep *Report) standing() []ReportRun {
	var out []ReportRun
	for _, r := range rep.Runs {
		if r.Decision == DecisionPromoted && r.Unbacked == "" {
			out = append(out, r)
		}
	}
	return out
}

// promotions are the promoted and superseded runs in order, each with the record it beat.
func (rep *Report) promotions() [][2]*ReportRun {
	var out [][2]*ReportRun
	last := map[string]*ReportRun{}
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Decision != DecisionPromoted && r.Decision != DecisionSuperseded {
			continue
		}
		key := r.Model + "\x00" + r.Protocol
		out = append(out, [2]*ReportRun{r, last[key]})
		last[key] = r
	}
	return out
}

func negativeRun(d string) bool {
	return negative(d) || strings.HasPrefix(d, DecisionBelow) || d == DecisionNoise
}

// WriteMarkdown writes the campaign's page as a lab publishes its week: Decision, Validity,
// Delta from the previous record, Command identity, Screens and full runs, A/B comparisons,
// Learning. Every string a lab typed or a record holds is text: escaped for CommonMark, HTML
// included, so that no note, label, argument or path can add markup, a heading or a row.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	_, err := io.WriteString(w, renderMarkdown("Campaign "+filepath.Base(filepath.Clean(rep.Dir)), rep.page()))
	return err
}

// block is one piece of the page: a heading, a paragraph, a table (its first row the header),
// a list or a code block. Every string in it is plain text; the renderers escape it.
type block struct {
	heading string
	para    string
	table   [][]string
	list    []listItem
	code    []string
}

// listItem is a list entry: a text, a part of it in bold, and the rest.
type listItem struct{ before, bold, after string }

// page is the campaign's page as blocks, the one source of report.md and report.html.
func (rep *Report) page() []block {
	var out []block
	add := func(b block) { out = append(out, b) }
	add(block{heading: "Decision"})
	if st := rep.standing(); len(st) == 0 {
		add(block{para: "No record yet: no valid full run has been promoted."})
	} else {
		t := [][]string{{"standing record", "row 0 tok/s", "model", "protocol", "since"}}
		for _, r := range st {
			t = append(t, []string{r.Label, fmt.Sprintf("%.2f", r.Row0TPS), short8(r.Model), r.Protocol, r.Finished.UTC().Format(time.RFC3339)})
		}
		add(block{table: t})
	}
	var unbacked []listItem
	for _, r := range rep.Runs {
		if r.Unbacked != "" {
			unbacked = append(unbacked, listItem{bold: r.Label, after: ": " + r.Unbacked})
		}
	}
	if len(unbacked) > 0 {
		add(block{para: fmt.Sprintf("%d run(s) of records.json not backed by their own record.json, so none of them stands as a record here:", len(unbacked))})
		add(block{list: unbacked})
	}
	valid, invalid, crashed, canary := 0, 0, 0, 0
	for _, r := range rep.Runs {
		switch {
		case r.Valid:
			valid++
		case r.Decision == DecisionCrashed:
			crashed++
		case strings.HasPrefix(r.Decision, "rejected: canary"):
			canary++
		default:
			invalid++
		}
	}
	add(block{heading: "Validity"})
	add(block{para: fmt.Sprintf("%d runs: %d valid, %d rejected by their canaries, %d crashed, %d invalid or incomplete.", len(rep.Runs), valid, canary, crashed, invalid)})
	add(block{heading: "Delta from the previous record"})
	if prom := rep.promotions(); len(prom) == 0 {
		add(block{para: "No promotion yet."})
	} else {
		t := [][]string{{"promoted", "over", "ratio", "reason"}}
		for _, pr := range prom {
			over, ratio := "(first record)", "-"
			if pr[1] != nil {
				over, ratio = pr[1].Label, fmt.Sprintf("%.3f×", pr[0].Row0TPS/pr[1].Row0TPS)
			}
			t = append(t, []string{pr[0].Label, over, ratio, pr[0].Reason})
		}
		add(block{table: t})
	}
	add(block{heading: "Command identity"})
	for _, r := range rep.standing() {
		add(block{para: fmt.Sprintf("%s (plan %s, %s, manifest %s):", r.Label, short8(r.PlanHash), r.source(), short8(r.Manifest))})
		add(block{code: []string{shellCommand(r.Env, r.Command)}})
	}
	add(block{heading: "Screens and full runs"})
	t := [][]string{{"finished", "run", "mode", "canary", "row 0 tok/s", "acceptance", "decision", "note"}}
	for _, r := range rep.Runs {
		t = append(t, []string{r.Finished.UTC().Format("2006-01-02 15:04"), r.Label, r.Mode, r.Canary, fmt.Sprintf("%.2f", r.Row0TPS),
			acceptanceCell(r.Acceptance), r.Decision, r.Note})
	}
	add(block{table: t})
	add(block{heading: "A/B comparisons"})
	if len(rep.Comparisons) == 0 {
		add(block{para: "None."})
	} else {
		t := [][]string{{"B / A", "rounds", "min", "median", "max", "verdict"}}
		for _, c := range rep.Comparisons {
			t = append(t, []string{c.BLabel + " / " + c.ALabel, fmt.Sprint(len(c.Ratios)), fmt.Sprintf("%.3f", c.Min), fmt.Sprintf("%.3f", c.Median),
				fmt.Sprintf("%.3f", c.Max), c.Verdict.Text})
		}
		add(block{table: t})
	}
	add(block{heading: "Learning"})
	add(block{para: "Negative results, kept so that nobody tries them again:"})
	var items []listItem
	for _, r := range rep.Runs {
		if negativeRun(r.Decision) {
			it := listItem{before: r.Label + ": ", bold: r.Decision, after: ": " + r.Reason}
			if r.Note != "" {
				it.after += " (note: " + r.Note + ")"
			}
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		items = []listItem{{before: "none"}}
	}
	add(block{list: items})
	rs := &Records{}
	for _, r := range rep.Runs {
		rs.Runs = append(rs.Runs, r.Entry)
	}
	if fates := rs.PatchFates(); len(fates) > 0 {
		add(block{para: "Patches tried beyond the records' own, by their bytes (sha256), and what came of each:"})
		t := [][]string{{"patch", "sha256", "fate", "runs"}}
		for _, f := range fates {
			fate, last := "not judged yet", f.Runs[len(f.Runs)-1]
			if f.Negative() {
				fate = "not kept"
				for _, e := range f.Runs {
					if negativeRun(e.Decision) {
						last = e // the run that said so
					}
				}
			}
			fate += ": " + last.Label + " " + last.Decision
			if last.Reason != "" {
				fate += " (" + last.Reason + ")"
			}
			t = append(t, []string{f.Name, short8(f.SHA256), fate, fmt.Sprint(len(f.Runs))})
		}
		add(block{table: t})
	}
	return out
}

// shellCommand is the command identity as one shell line: each environment assignment and
// argument quoted where the shell would read it otherwise, so that pasting it runs the same
// command.
func shellCommand(env map[string]string, args []string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, shellquote.Quote(k+"="+env[k]))
	}
	for _, a := range args {
		parts = append(parts, shellquote.Quote(a))
	}
	return strings.Join(parts, " ")
}

// longWord is where text is broken for a reader: a run of this many characters without a space
// gets a zero-width space, so that a 10 KB word wraps instead of running off a Markdown page
// (report.html wraps with CSS instead). Labels, which a reader copies, are shorter.
const longWord = 256

// mdText escapes plain text for CommonMark and GFM: every character that can start markup
// inline (\\ ` * _ [ ] < > & | ~ # !) backslash-escaped, and at the start of the text what would
// start a block there (- + = > and a number's . or )), so that no emphasis, link, raw HTML,
// entity, table pipe, heading or list can start in it; a line break kept as the visible text
// \\n, so that it can end neither a cell nor a list item; long words made breakable.
func mdText(s string) string {
	var b strings.Builder
	run, digits := 0, true
	for i, r := range []rune(readable(s)) {
		switch {
		case r == '\n':
			b.WriteString(`\\n`)
			run, digits = 0, false
			continue
		case strings.ContainsRune("\\`*_[]<>&|~#!", r),
			i == 0 && strings.ContainsRune("-+=>", r),
			digits && i > 0 && (r == '.' || r == ')'):
			b.WriteByte('\\')
		}
		digits = digits && r >= '0' && r <= '9'
		b.WriteRune(r)
		if run = run + 1; r == ' ' {
			run = 0
		} else if run >= longWord {
			b.WriteRune('\u200b')
			run = 0
		}
	}
	return b.String()
}

// readable is s with its line breaks as "\n", a tab as a space and other control characters
// dropped: what a cell can show.
func readable(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f:
			return -1
		}
		return r
	}, s)
}

// fence is a code fence longer than any run of backticks in lines (CommonMark closes a block
// only at a fence at least as long as its opening).
func fence(lines []string) string {
	longest := 0
	for _, l := range lines {
		n := 0
		for _, r := range l {
			if r == '`' {
				n++
				longest = max(longest, n)
			} else {
				n = 0
			}
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func renderMarkdown(title string, blocks []block) string {
	var b strings.Builder
	b.WriteString("# " + mdText(title) + "\n\n")
	for _, bl := range blocks {
		switch {
		case bl.heading != "":
			b.WriteString("## " + mdText(bl.heading) + "\n\n")
		case bl.para != "":
			b.WriteString(mdText(bl.para) + "\n\n")
		case bl.table != nil:
			for i, row := range bl.table {
				cells := make([]string, len(row))
				for k, c := range row {
					cells[k] = mdText(c)
				}
				b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
				if i == 0 {
					b.WriteString(strings.Repeat("|---", len(row)) + "|\n")
				}
			}
			b.WriteString("\n")
		case bl.list != nil:
			for _, it := range bl.list {
				b.WriteString("- " + mdText(it.before))
				if it.bold != "" {
					b.WriteString("**" + mdText(it.bold) + "**")
				}
				b.WriteString(mdText(it.after) + "\n")
			}
			b.WriteString("\n")
		case bl.code != nil:
			f := fence(bl.code)
			b.WriteString(f + "sh\n")
			for _, l := range bl.code {
				b.WriteString(strings.Map(func(r rune) rune {
					if r == '\r' {
						return -1
					}
					return r
				}, l) + "\n")
			}
			b.WriteString(f + "\n\n")
		}
	}
	return b.String()
}

// htmlText escapes plain text for HTML, line breaks shown as \n as the Markdown page shows them.
func htmlText(s string) string {
	return html.EscapeString(strings.ReplaceAll(readable(s), "\n", `\n`))
}

func renderHTML(blocks []block) string {
	var b strings.Builder
	for _, bl := range blocks {
		switch {
		case bl.heading != "":
			b.WriteString("<h2>" + htmlText(bl.heading) + "</h2>\n")
		case bl.para != "":
			b.WriteString("<p>" + htmlText(bl.para) + "</p>\n")
		case bl.table != nil:
			b.WriteString("<table>\n")
			for i, row := range bl.table {
				tag := "td"
				if i == 0 {
					tag = "th"
				}
				b.WriteString("<tr>")
				for _, c := range row {
					b.WriteString("<" + tag + ">" + htmlText(c) + "</" + tag + ">")
				}
				b.WriteString("</tr>\n")
			}
			b.WriteString("</table>\n")
		case bl.list != nil:
			b.WriteString("<ul>\n")
			for _, it := range bl.list {
				b.WriteString("<li>" + htmlText(it.before))
				if it.bold != "" {
					b.WriteString("<b>" + htmlText(it.bold) + "</b>")
				}
				b.WriteString(htmlText(it.after) + "</li>\n")
			}
			b.WriteString("</ul>\n")
		case bl.code != nil:
			b.WriteString("<pre>")
			for _, l := range bl.code {
				b.WriteString(html.EscapeString(l) + "\n")
			}
			b.WriteString("</pre>\n")
		}
	}
	return b.String()
}

func short8(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 8 {
		return s[:8]
	}
	if s == "" {
		return "-"
	}
	return s
}

func acceptanceCell(a *float64) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100**a)
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

// WriteHTML writes the page as one static HTML file: no script, no request beyond the file,
// the charts inline SVG (row 0 of every run over time with the standing record, A/B ratios with
// their spread, draft acceptance), then the Markdown page's tables.
func (rep *Report) WriteHTML(w io.Writer) error {
	ew := &errWriter{w: w}
	p := func(format string, a ...any) { fmt.Fprintf(ew, format, a...) }
	title := html.EscapeString("Campaign " + filepath.Base(filepath.Clean(rep.Dir)))
	p("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n", title)
	p("<style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;overflow-wrap:anywhere;max-width:40em}p,li{overflow-wrap:anywhere}pre{white-space:pre-wrap;overflow-wrap:anywhere}" +
		"svg{background:#fafafa;border:1px solid #ddd}.run{fill:#1f77b4}.run.rejected{fill:#d62728}.run.screen{fill:#9ecae1}.record{fill:none;stroke:#2ca02c;stroke-width:2}" +
		".ratio{stroke:#555;stroke-width:2}.median{fill:#ff7f0e}.acc{fill:#9467bd}.axis{stroke:#999}text{font-size:11px;fill:#444}</style></head><body>\n")
	p("<h1>%s</h1>\n", title)
	rep.row0Chart(p)
	rep.ratioChart(p)
	rep.acceptanceChart(p)
	p("%s", renderHTML(rep.page()))
	p("</body></html>\n")
	return ew.err
}

const chartW, chartH, pad = 900.0, 260.0, 40.0

func (rep *Report) row0Chart(p func(string, ...any)) {
	var lo, hi float64
	var t0, t1 time.Time
	for _, r := range rep.Runs {
		if r.Row0TPS <= 0 {
			continue
		}
		if lo == 0 || r.Row0TPS < lo {
			lo = r.Row0TPS
		}
		hi = max(hi, r.Row0TPS)
		if t0.IsZero() || r.Finished.Before(t0) {
			t0 = r.Finished
		}
		if r.Finished.After(t1) {
			t1 = r.Finished
		}
	}
	p("<h2>Row 0 of every run, in time</h2>\n<svg id=\"row0\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"row 0 tok/s of every run\">\n", chartW, chartH, chartW, chartH)
	p("<line class=\"axis\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>\n", pad, chartH-pad, chartW-pad, chartH-pad)
	if hi == 0 {
		p("<text x=\"%.0f\" y=\"%.0f\">no run has a row 0</text></svg>\n", pad, chartH/2)
		return
	}
	if hi == lo {
		lo, hi = lo*0.95, hi*1.05
	}
	span := t1.Sub(t0).Seconds()
	x := func(t time.Time) float64 {
		if span == 0 {
			return chartW / 2
		}
		return pad + (chartW-2*pad)*t.Sub(t0).Seconds()/span
	}
	y := func(v float64) float64 { return chartH - pad - (chartH-2*pad)*(v-lo)/(hi-lo) }
	p("<text x=\"4\" y=\"%.0f\">%.0f</text><text x=\"4\" y=\"%.0f\">%.0f</text>\n", y(hi)+4, hi, y(lo)+4, lo)
	// the standing record: a step line through every promotion
	var pts []string
	best := 0.0
	for _, r := range rep.Runs {
		if (r.Decision == DecisionPromoted || r.Decision == DecisionSuperseded) && r.Row0TPS > best {
			if best > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Finished), y(best)))
			}
			best = r.Row0TPS
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Finished), y(best)))
		}
	}
	if len(pts) > 0 {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", chartW-pad, y(best)))
		p("<polyline class=\"record\" points=\"%s\"><title>the standing record</title></polyline>\n", strings.Join(pts, " "))
	}
	for _, r := range rep.Runs {
		if r.Row0TPS <= 0 {
			continue
		}
		class := "run"
		if r.Mode == ModeScreen {
			class += " screen"
		}
		if negativeRun(r.Decision) {
			class += " rejected"
		}
		p("<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>%s: %.2f tok/s, %s</title></circle>\n", class, x(r.Finished), y(r.Row0TPS), html.EscapeString(r.Label), r.Row0TPS, html.EscapeString(r.Decision))
	}
	p("</svg>\n")
}

func (rep *Report) ratioChart(p func(string, ...any)) {
	p("<h2>A/B ratios (B / A, row 0), min to max with the median</h2>\n")
	if len(rep.Comparisons) == 0 {
		p("<p>No A/B comparison in this campaign.</p>\n")
		return
	}
	h := 30*float64(len(rep.Comparisons)) + 2*pad
	lo, hi := 1.0, 1.0
	for _, c := range rep.Comparisons {
		if len(c.Ratios) > 0 {
			lo, hi = min(lo, c.Min), max(hi, c.Max)
		}
	}
	lo, hi = lo-0.02, hi+0.02
	x := func(v float64) float64 { return 300 + (chartW-300-pad)*(v-lo)/(hi-lo) }
	p("<svg id=\"ratios\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", chartW, h, chartW, h)
	p("<line class=\"axis\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\"/><text x=\"%.1f\" y=\"%.0f\">1.000</text>\n", x(1), pad/2, x(1), h-pad/2, x(1)-12, h-4)
	for i, c := range rep.Comparisons {
		yy := pad + 30*float64(i)
		p("<text x=\"4\" y=\"%.0f\">%s</text>\n", yy+4, html.EscapeString(trimLabel(c.BLabel)+" / "+trimLabel(c.ALabel)))
		if len(c.Ratios) == 0 {
			continue
		}
		p("<line class=\"ratio\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\"><title>%.3f to %.3f over %d rounds: %s</title></line>\n", x(c.Min), yy, x(c.Max), yy, c.Min, c.Max, len(c.Ratios), html.EscapeString(c.Verdict.Text))
		p("<circle class=\"median\" cx=\"%.1f\" cy=\"%.0f\" r=\"5\"><title>median %.3f</title></circle>\n", x(c.Median), yy, c.Median)
	}
	p("</svg>\n")
}

func (rep *Report) acceptanceChart(p func(string, ...any)) {
	var runs []ReportRun
	for _, r := range rep.Runs {
		if r.Acceptance != nil {
			runs = append(runs, r)
		}
	}
	p("<h2>Draft acceptance</h2>\n")
	if len(runs) == 0 {
		p("<p>No run drafted.</p>\n")
		return
	}
	p("<svg id=\"acceptance\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", chartW, chartH, chartW, chartH)
	p("<line class=\"axis\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/><text x=\"4\" y=\"%.0f\">100%%</text><text x=\"4\" y=\"%.0f\">0%%</text>\n", pad, chartH-pad, chartW-pad, chartH-pad, pad+4, chartH-pad+4)
	for i, r := range runs {
		xx := pad + (chartW-2*pad)*(float64(i)+0.5)/float64(len(runs))
		yy := chartH - pad - (chartH-2*pad)**r.Acceptance
		p("<circle class=\"acc\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>%s: %.1f%%</title></circle>\n", xx, yy, html.EscapeString(r.Label), 100**r.Acceptance)
	}
	p("</svg>\n")
}

func trimLabel(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// ErrUnbacked is a run whose entry in records.json its own record.json does not back.
var ErrUnbacked = errors.New("its record does not back its entry in records.json")

// LeaderboardEntry is a promoted run as a public leaderboard takes it.
type LeaderboardEntry struct {
	Label          string `json:"label"`
	Model          string `json:"model"`
	Protocol       string `json:"protocol"`
	PlanHash       string `json:"planHash"`
	ManifestSHA256 string `json:"manifestSha256"`
	LlamaCommit    string `json:"llamaCommit"`
	// SourceTree is the plain directory's tree a build came from; Unverified says its commit was
	// not checked (always present, so that a site can filter on it).
	SourceTree string            `json:"sourceTree,omitempty"`
	Unverified bool              `json:"unverified"`
	Command    []string          `json:"command"`
	Env        map[string]string `json:"env,omitempty"`
	Row0TPS    float64           `json:"row0TokPerSec"`
	Canary     string            `json:"canary"`
	Valid      bool              `json:"valid"`
	Decision   string            `json:"decision"`
	Finished   time.Time         `json:"finished"`
}

// WriteFiles writes the campaign's page into dir (made if missing): report.md (WriteMarkdown)
// and report.html (WriteHTML), each whole or not at all. It returns the paths written, in that
// order, the ones written before an error included.
func (rep *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.md", rep.WriteMarkdown}, {"report.html", rep.WriteHTML}} {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return paths, err
		}
		path := filepath.Join(dir, f.name)
		if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// Leaderboard is the export of the promoted run label (a standing record) for a public
// leaderboard: its identity, plan hash, manifest sha256, row 0 and validity.
func (rep *Report) Leaderboard(label string) (*LeaderboardEntry, error) {
	for _, r := range rep.Runs {
		if r.Label != label {
			continue
		}
		if r.Decision != DecisionPromoted {
			return nil, fmt.Errorf("run %s is %s, not a standing record: only a promoted run goes to a leaderboard", label, r.Decision)
		}
		if r.Unbacked != "" {
			return nil, fmt.Errorf("run %s: %w (%s); nothing goes to a leaderboard that the run's own record.json does not say", label, ErrUnbacked, r.Unbacked)
		}
		return &LeaderboardEntry{Label: r.Label, Model: r.Model, Protocol: r.Protocol, PlanHash: r.PlanHash, ManifestSHA256: r.Manifest,
			LlamaCommit: r.Commit, SourceTree: r.SourceTree, Unverified: r.Unverified, Command: r.Command, Env: r.Env, Row0TPS: r.Row0TPS, Canary: r.Canary, Valid: r.Valid, Decision: r.Decision, Finished: r.Finished}, nil
	}
	var promoted []string
	for _, r := range rep.standing() {
		promoted = append(promoted, r.Label)
	}
	return nil, fmt.Errorf("no run %q in %s; the standing records are: %s", label, rep.Dir, strings.Join(promoted, ", "))
}
