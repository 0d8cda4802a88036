package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
	"github.com/llbuild/llbuild/internal/testwriter"
	"github.com/llbuild/llbuild/manifest"
)

// testBundle is a bundle value (not on disk) whose manifest asks for no reuse.
func testBundle(mutate ...func(*manifest.Manifest)) *Bundle {
	m := &manifest.Manifest{
		SchemaVersion: manifest.SchemaVersion,
		Target:        manifest.Target{Name: "cpu-v3", Backend: "cpu"},
		Build: manifest.Build{PlanHash: "sha256:" + strings.Repeat("ab", 32), Source: manifest.Source{Commit: "1425386fd" + strings.Repeat("0", 31)},
			Patches: []manifest.Patch{{Name: "0001-x.patch", SHA256: "sha256:" + strings.Repeat("11", 32)}}},
		Models: manifest.Models{Model: manifest.Model{Path: "models/tiny.gguf"}, Draft: &manifest.Model{Path: "models/draft.gguf"}},
		Server: manifest.Server{Executable: "bin/llama-server", Args: []string{"--model", "models/tiny.gguf", "--model-draft", "models/draft.gguf",
			"--spec-type", "draft-mtp", "--spec-draft-n-max", "7", "-b", "1024", "-ub", "1024", "-t", "8", "--cache-ram", "0", "--ctx-checkpoints", "0"},
			Env: map[string]string{}},
		Files: []manifest.File{{Path: "models/draft.gguf", SHA256: "sha256:" + strings.Repeat("cd", 32)}, {Path: "models/tiny.gguf", SHA256: "sha256:" + strings.Repeat("ef", 32)}},
	}
	for _, f := range mutate {
		f(m)
	}
	raw, _ := json.Marshal(m)
	return &Bundle{Name: "b", Manifest: m, ManifestSHA256: "sha256:" + shortHash(raw) + strings.Repeat("0", 52)}
}

func fastProtocol(mode string) Protocol {
	p, _ := DefaultProtocol(mode)
	p.Canaries, p.CanaryTokens, p.PromptTokens, p.Generate = 4, 12, 16, 24
	return p
}

// A drafted output that differs from the no-draft reference fails the canaries: the run is
// rejected, names the check, the position and both tokens, and measures no rows.
func TestCanaryMismatchRejectsTheRun(t *testing.T) {
	fake := &fakeLlama{flipAt: 5}
	dir := t.TempDir()
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: dir, start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	m := r.Canary.Mismatch
	if m == nil {
		t.Fatalf("canary = %+v, want a mismatch", r.Canary)
	}
	if m == nil || m.Check != 0 || m.Position != 5 || m.Got != m.Want+1 || r.Canary.Reference != "no-draft" {
		t.Fatalf("canary = %+v (mismatch %+v), want the first check to differ at token 5 against the no-draft reference", r.Canary, m)
	}
	// the fake's flipped token was a near-tie (5e-4 nats): its own decision, still not valid
	if r.Valid || r.Decision != DecisionNearTie || len(r.Rows) != 0 {
		t.Errorf("run valid %v decision %q rows %d, want invalid, %q, no rows", r.Valid, r.Decision, len(r.Rows), DecisionNearTie)
	}
	if m.Margin == nil || *m.Margin < 4e-4 || *m.Margin > 6e-4 || !strings.Contains(m.explain(), "near-tie") {
		t.Errorf("margin %v (%s), want 5e-4 nats explained as a near-tie", m.Margin, m.explain())
	}
	// the checks went on after the first: all four differed, each a near-tie
	if c := r.Canary; c.Checks != 4 || c.Mismatched != 4 || c.NearTies != 4 || c.Passed != 0 {
		t.Errorf("canary = %+v, want 4 checks, 4 mismatched, 4 near-ties", c)
	}
	rs, _ := ReadRecords(dir)
	if e := rs.Runs[0]; !strings.Contains(e.Reason, "differs at token 5") || !strings.Contains(e.Reason, "4 of 4 checks differ, every one a near-tie") {
		t.Errorf("records.json reason %q, want the position and every check a near-tie", e.Reason)
	}
	// one far mismatch among near-ties makes the run a broken speculation path, and the
	// reason names that check, not the first
	far := &fakeLlama{flipAt: 5, farFor: canaryPrompts[1]}
	res, err = Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: t.TempDir(), start: far.starter()})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Runs[0]; r.Decision != DecisionCanary || r.Canary.Mismatched != 4 || r.Canary.NearTies != 3 ||
		r.Canary.Worst == nil || r.Canary.Worst.Check != 1 || r.Canary.Mismatch.Check != 0 {
		t.Errorf("decision %q canary %+v, want %q with 4 mismatched, 3 near-ties, worst check 1", r.Decision, r.Canary, DecisionCanary)
	}
	rs, _ = ReadRecords(res.Dir)
	if e := rs.Runs[0]; !strings.Contains(e.Reason, "check 1") || !strings.Contains(e.Reason, "not a near-tie") || !strings.Contains(e.Reason, "3 near-ties") {
		t.Errorf("records.json reason %q, want check 1, not a near-tie, 3 near-ties", e.Reason)
	}
	// the same fake without the flipped token passes: the check is what failed it
	ok := &fakeLlama{flipAt: -1}
	res, err = Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: t.TempDir(), start: ok.starter()})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Runs[0]; r.Canary.Passed != 4 || !r.Valid || len(r.Rows) != 8 || r.Decision != DecisionPromoted {
		t.Errorf("lossless fake: canary %+v valid %v %v rows %d decision %q, want 4 passed, valid, 8 rows, promoted", r.Canary, r.Valid, r.Invalid, len(r.Rows), r.Decision)
	}
}

// A "no-draft" reference that was drafted after all is no reference: the run fails, saying so.
func TestDraftedReferenceFailsTheRun(t *testing.T) {
	fake := &fakeLlama{flipAt: -1, draftsAlways: true}
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: t.TempDir(), start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Complete || r.Valid || !strings.Contains(r.Error, "drafted") || !strings.Contains(r.Error, "patch 0004") || len(r.Rows) != 0 {
		t.Errorf("run complete %v valid %v error %q rows %d, want a failed run naming patch 0004", r.Complete, r.Valid, r.Error, len(r.Rows))
	}
}

// A protocol that does not fit the bundle's context is refused before any row, saying what
// to change.
func TestRowsMustFitTheContext(t *testing.T) {
	fake := &fakeLlama{flipAt: -1, nctx: 32}
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Complete || len(r.Rows) != 0 || !strings.Contains(r.Error, "a row needs 40 tokens of context (16 prompt + 24 generated) and the bundle's slot has 32: bundle with --ctx-size 40 or more") {
		t.Errorf("run complete %v rows %d error %q, want the context named", r.Complete, len(r.Rows), r.Error)
	}
	// checked before the canaries spend time (issue 31): no completion was asked for
	if n := fake.requests.Load(); n != 0 {
		t.Errorf("%d completions (canaries) before the context was found too small; want none", n)
	}
}

// A row that reports cached prompt tokens makes the run invalid for a headline, and says so.
func TestCachedTokensMakeTheRunInvalid(t *testing.T) {
	fake := &fakeLlama{flipAt: -1, cacheN: 12}
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: t.TempDir(), start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Valid || !strings.HasPrefix(r.Decision, "invalid: cached tokens: row 0 (fresh) reused 12") {
		t.Errorf("decision %q valid %v, want invalid naming row 0's 12 cached tokens", r.Decision, r.Valid)
	}
}

// Arguments that allow reuse (or leave llama-server's reuse defaults on) make a run invalid,
// each named with what to do.
func TestReuseProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"none", []string{"--cache-ram", "0", "--ctx-checkpoints", "0"}, nil, nil},
		{"defaults", nil, nil, []string{"--cache-ram is not set", "--ctx-checkpoints is not set"}},
		{"short names and env", []string{"-cram", "512"}, map[string]string{"LLAMA_ARG_CTX_CHECKPOINTS": "0"}, []string{"--cache-ram 512 keeps"}},
		{"env overridden by an argument", []string{"--cache-ram=0", "-ctxcp", "0"}, map[string]string{"LLAMA_ARG_CACHE_RAM": "64"}, nil},
		{"cache reuse", []string{"--cache-ram", "0", "--ctx-checkpoints", "0", "--cache-reuse", "256"}, nil, []string{"--cache-reuse 256"}},
		{"ngram speculation", []string{"--cache-ram", "0", "--ctx-checkpoints", "0", "--spec-type", "ngram-simple"}, nil, []string{"--spec-type ngram-simple drafts from earlier text"}},
		{"lookup cache", []string{"--cache-ram", "0", "--ctx-checkpoints", "0", "-lcd", "x.bin"}, nil, []string{"--lookup-cache-dynamic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &manifest.Manifest{Server: manifest.Server{Args: tc.args, Env: tc.env}}
			got := reuseProblems(m.Settings())
			if len(got) != len(tc.want) {
				t.Fatalf("reuseProblems(%v, %v) = %q, want %d problems like %q", tc.args, tc.env, got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %d = %q, want it to start %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// The label changes when any argument, environment knob, patch, model or draft byte, plan or
// device changes, and says the lab's fields in order.
func TestIdentityLabel(t *testing.T) {
	at := time.Date(2026, 6, 24, 13, 57, 1, 0, time.UTC)
	p := fastProtocol(ModeFull)
	base := newIdentity(testBundle(), p, "", at)
	want := "tiny-efefefef-draft-cdcdcdcd-draft_mtp-n7-b1024u1024-th8-planabababab-1425386fd-m"
	if !strings.HasPrefix(base.Label, want) || !strings.HasSuffix(base.Label, "-full-20260624T135701Z") {
		t.Errorf("label = %s, want %s…-full-20260624T135701Z", base.Label, want)
	}
	for name, mutate := range map[string]func(*manifest.Manifest){
		"argument":   func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--flash-attn", "on") },
		"env knob":   func(m *manifest.Manifest) { m.Server.Env["GGML_CUDA_GRAPH_OPT"] = "1" },
		"patch":      func(m *manifest.Manifest) { m.Build.Patches[0].SHA256 = "sha256:" + strings.Repeat("22", 32) },
		"model byte": func(m *manifest.Manifest) { m.Files[1].SHA256 = "sha256:" + strings.Repeat("99", 32) },
		"draft byte": func(m *manifest.Manifest) { m.Files[0].SHA256 = "sha256:" + strings.Repeat("98", 32) },
		"plan":       func(m *manifest.Manifest) { m.Build.PlanHash = "sha256:" + strings.Repeat("cc", 32) },
	} {
		if got := newIdentity(testBundle(mutate), p, "", at); got.Label == base.Label || got.ManifestSHA256 == base.ManifestSHA256 {
			t.Errorf("%s changed: label %s and manifest digest unchanged", name, got.Label)
		}
	}
	if got := newIdentity(testBundle(), p, "3", at); !strings.Contains(got.Label, "-gpu3-") {
		t.Errorf("label on GPU 3 = %s, want -gpu3-", got.Label)
	}
	if got := newIdentity(testBundle(func(m *manifest.Manifest) { m.Server.Env["GGML_SYCL_ENABLE_VMM"] = "0" }), p, "", at); !strings.Contains(got.Label, "-ggml_sycl_enable_vmm0-") {
		t.Errorf("label with an env knob = %s, want it named", got.Label)
	}
}

// The campaign's decisions of one run as it is committed: the first full run of a model and
// protocol is its first record; another build waits for the judge (judgeRecords) at the end of
// the rounds; the record's own bundle is no candidate; everything else is kept with why.
func TestDecide(t *testing.T) {
	rec := func(mode string, row0 float64, mut ...func(*Record)) *Record {
		r := &Record{Protocol: Protocol{Mode: mode}, Complete: true, Valid: true, Summary: Summary{Row0TPS: row0},
			Identity: Identity{Label: mode, Model: File{SHA256: "sha256:m"}, Protocol: "filled-long-p588-g512", ManifestSHA256: "sha256:build"}}
		for _, f := range mut {
			f(r)
		}
		return r
	}
	rs := &Records{}
	add := func(r *Record) string {
		d, _ := rs.Decide(r)
		rs.Runs = append(rs.Runs, Entry{Label: r.Identity.Label, Model: r.Identity.Model.SHA256, Protocol: r.Identity.Protocol, Row0TPS: r.Summary.Row0TPS, Decision: d, Manifest: r.Identity.ManifestSHA256})
		return d
	}
	other := func(r *Record) { r.Identity.ManifestSHA256 = "sha256:other-build" }
	steps := []struct {
		r    *Record
		want string
	}{
		{rec(ModeScreen, 200), DecisionScreenWin},     // no record yet: send it to a full run
		{rec(ModeFull, 100), DecisionPromoted},        // the first record, said so
		{rec(ModeFull, 99), DecisionRecordAgain},      // the record's own bundle: no candidate
		{rec(ModeFull, 150, other), DecisionPending},  // another build: judged after the rounds
		{rec(ModeScreen, 50, other), DecisionPending}, // a single row 0 decides nothing
		{rec(ModeFull, 150, func(r *Record) {
			r.Valid, r.Invalid = false, []string{"cached tokens: row 0 (fresh) reused 5 prompt tokens"}
		}), "invalid: cached tokens: row 0 (fresh) reused 5 prompt tokens"},
		{rec(ModeFull, 150, func(r *Record) { r.Complete, r.Error = false, "interrupted" }), DecisionIncomplete},
		{rec(ModeFull, 150, func(r *Record) { r.Canary.Mismatch = &Mismatch{} }), DecisionCanary},
		{rec(ModeFull, 150, func(r *Record) { m := 0.004; r.Canary.Mismatch = &Mismatch{Margin: &m} }), DecisionNearTie},
		{rec(ModeFull, 150, func(r *Record) { m := 0.5; r.Canary.Mismatch = &Mismatch{Margin: &m} }), DecisionCanary},
		{rec(ModeFull, 50, func(r *Record) { r.Identity.Model.SHA256 = "sha256:other" }), DecisionPromoted}, // its own record
		{rec(ModeFull, 50, func(r *Record) { r.Identity.Protocol = "short-g128" }), DecisionPromoted},
	}
	for i, s := range steps {
		if got := add(s.r); got != s.want {
			t.Errorf("step %d (%s, row 0 %.1f): decision %q, want %q", i, s.r.Protocol.Mode, s.r.Summary.Row0TPS, got, s.want)
		}
	}
	if s := rs.Standing("sha256:m", "filled-long-p588-g512"); s == nil || s.Row0TPS != 100 {
		t.Errorf("standing record = %+v, want row 0 100", s)
	}
}

// records.json and each run's record.json are written whole, and a second invocation adds to
// the campaign rather than replacing it; the standing record carries across invocations.
func TestCampaignAccumulates(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeLlama{flipAt: -1}
	for i := 0; i < 2; i++ {
		if _, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: dir, start: fake.starter()}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Runs) != 2 || rs.Runs[0].Decision != DecisionPromoted || rs.Runs[1].Decision != DecisionRecordAgain {
		t.Fatalf("runs = %+v, want promoted, then the record's bundle measured again", rs.Runs)
	}
	if rs.Runs[0].Dir == rs.Runs[1].Dir {
		t.Errorf("both runs in %s", rs.Runs[0].Dir)
	}
	for _, e := range rs.Runs {
		if _, err := os.Stat(filepath.Join(dir, e.Dir, "record.json")); err != nil {
			t.Error(err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "runs", ".tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary run directories left: %v", left)
	}
}

// Several bundles interleave, the order turning every round (A B, B A, ...), one run at a time,
// and B/A is reported per round.
func TestABInterleavesAndReportsRatios(t *testing.T) {
	fake := &fakeLlama{flipAt: -1}
	a, b := testBundle(), testBundle(func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "-t", "4") })
	b.Name = "b2"
	res, err := Run(context.Background(), []*Bundle{a, b}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 12 {
		t.Fatalf("%d runs, want 6 rounds of 2 (the judge's fewest at 0.05)", len(res.Runs))
	}
	for i, r := range res.Runs {
		wantB := i%2 == 1
		if (r.Bundle == "b2") != wantB || r.Round != i/2 {
			t.Errorf("result %d is %s round %d, want each round's runs in the bundles' order", i, r.Bundle, r.Round)
		}
	}
	// in time: A B, then B A
	for round := 0; round < 6; round++ {
		a, b := res.Runs[2*round], res.Runs[2*round+1]
		first, second := a, b
		if round%2 == 1 {
			first, second = b, a
		}
		if second.Started.Before(first.Finished) {
			t.Errorf("round %d: %s started before %s finished, want %s first and one at a time", round, second.Bundle, first.Bundle, first.Bundle)
		}
		if round > 0 && first.Started.Before(res.Runs[2*round-1].Finished) && first.Started.Before(res.Runs[2*round-2].Finished) {
			t.Errorf("round %d started before round %d finished", round, round-1)
		}
	}
	c := res.Comparisons[0]
	if len(c.Ratios) != 6 || c.Min <= 0 || c.Min > c.Median || c.Median > c.Max || c.Verdict.Kind == "" || c.Verdict.Rounds != 6 {
		t.Errorf("comparison = %+v, want 6 ordered ratios and a verdict", c)
	}
	var b2 strings.Builder
	res.WriteTable(&b2)
	if !strings.Contains(b2.String(), "A/B b2 / b, row 0 decode, 6 rounds") || !strings.Contains(b2.String(), "differs: --threads 8 → 4\n") {
		t.Errorf("table:\n%s\nwant the A/B line", b2.String())
	}
}

// The comparison's verdict is the judge's: three rounds all on one side (the old rule's "B faster
// in every round") are not enough to decide at 0.05; six are.
func TestComparisonVerdictIsTheJudges(t *testing.T) {
	rec := func(tps float64) *Record {
		return &Record{Complete: true, Rows: []Row{{}}, Summary: Summary{Row0TPS: tps}}
	}
	for _, tc := range []struct {
		a, b []float64
		want string
	}{
		{[]float64{100, 110, 105}, []float64{120, 125, 118}, NotEnoughRounds},
		{[]float64{100}, []float64{150}, NotEnoughRounds},
		{[]float64{100, 110, 105, 100, 110, 105}, []float64{120, 125, 118, 121, 126, 119}, Faster},
		{[]float64{100, 110, 105, 100, 110, 105}, []float64{99, 108, 101, 98, 107, 100}, Slower},
		{[]float64{100, 110, 105, 100, 110, 105}, []float64{101, 108, 106, 99, 111, 104}, NoDifference},
	} {
		var as, bs []*Record
		for i := range tc.a {
			as, bs = append(as, rec(tc.a[i])), append(bs, rec(tc.b[i]))
		}
		if got := compare(DefaultJudge(), "a", "b", as, bs).Verdict; got.Kind != tc.want {
			t.Errorf("A %v B %v: verdict %q (%s), want %q", tc.a, tc.b, got.Kind, got.Text, tc.want)
		}
	}
}

func TestDifferences(t *testing.T) {
	at := time.Now()
	a := newIdentity(testBundle(), fastProtocol(ModeFull), "0", at)
	b := newIdentity(testBundle(func(m *manifest.Manifest) {
		m.Server.Args = append(m.Server.Args, "--flash-attn", "on")
		m.Server.Env["GGML_CUDA_GRAPH_OPT"] = "1"
		m.Build.Source.Commit = "abcdef0" + strings.Repeat("1", 33)
		m.Models.Draft = nil
	}), fastProtocol(ModeScreen), "1", at.Add(time.Hour))
	got := strings.Join(Differences(a, b), "; ")
	want := "draft draft@cdcdcdcdcdcd → (none); llama.cpp 1425386fd" + strings.Repeat("0", 31) + " → abcdef0" + strings.Repeat("1", 33) +
		"; --flash-attn (unset) → on; GGML_CUDA_GRAPH_OPT (unset) → 1; device 0 → 1"
	if got != want {
		t.Errorf("Differences() =\n%s\nwant\n%s", got, want)
	}
	if d := Differences(a, a); len(d) != 0 {
		t.Errorf("Differences(a, a) = %v, want none", d)
	}
}

func TestDeviceEnv(t *testing.T) {
	for _, tc := range []struct{ backend, gpu, want string }{
		{"cuda", "2", "CUDA_VISIBLE_DEVICES=2"},
		{"sycl", "1", "ONEAPI_DEVICE_SELECTOR=level_zero:1"},
		{"cpu", "0", ""},
		{"cuda", "", ""},
	} {
		if got := strings.Join(deviceEnv(tc.backend, tc.gpu), " "); got != tc.want {
			t.Errorf("deviceEnv(%s, %q) = %q, want %q", tc.backend, tc.gpu, got, tc.want)
		}
	}
}

// On a terminal each run shows where it is on the status line (the canaries, then the rows
// with the last row's figure), while the progress lines land above it, each a line of its
// own, and the line is gone when the run ends.
func TestRunShowsItsStepOnTheStatusLine(t *testing.T) {
	var out bytes.Buffer
	term := progress.NewTerm(&out, 200)
	fake := &fakeLlama{flipAt: -1}
	if _, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeFull), Dir: t.TempDir(),
		start: fake.starter(), Progress: term, Status: term}); err != nil {
		t.Fatal(err)
	}
	raw := out.String()
	for _, want := range []string{"bench b: starting llama-server", "bench b: canaries 1/4", "bench b: canaries 4/4", "bench b: rows 0/8", "bench b: rows 7/8 (row 6: 1000.00 tok/s)"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the status line never said %q", want)
		}
	}
	screen := progresstest.Screen(raw)
	if last := screen[len(screen)-1]; last != "" {
		t.Errorf("the status line stayed after the run: %q", last)
	}
	rows := 0
	for _, l := range screen[:len(screen)-1] {
		if !strings.HasPrefix(l, "bench: ") {
			t.Errorf("screen line %q: want every line a progress line of its own", l)
		}
		if strings.Contains(l, ": row ") {
			rows++
		}
	}
	if rows != 8 {
		t.Errorf("%d row lines on the screen, want 8:\n%s", rows, strings.Join(screen, "\n"))
	}
}

// With --gpus each record names the GPU its llama-server holds, as nvidia-smi's compute
// processes say (the PCI bus id, whatever CUDA_VISIBLE_DEVICES numbered it), and the table
// shows it; lanes whose servers all landed on one GPU are said to share it (issue 32: "each
// lane ran on its own GPU" is read from the machine, not assumed from --gpus).
func TestRunsNameTheirDeviceAndSayWhenLanesShareOne(t *testing.T) {
	// the fake servers' pids by the device the bench gave them
	pids := map[string]int{"CUDA_VISIBLE_DEVICES=0": 4100, "CUDA_VISIBLE_DEVICES=1": 4101}
	cuda := func(m *manifest.Manifest) { m.Target = manifest.Target{Name: "h200", Backend: "cuda"} }
	for _, tc := range []struct {
		name    string
		smi     string // nvidia-smi --query-compute-apps=pid,gpu_bus_id,gpu_name,gpu_uuid --format=csv,noheader
		shared  bool
		wantIDs []string
	}{
		{"each lane on its own GPU", "4100, 00000000:18:00.0, NVIDIA H200, GPU-aaaa\n4101, 00000000:2A:00.0, NVIDIA H200, GPU-bbbb\n999, 00000000:2A:00.0, NVIDIA H200, GPU-bbbb\n",
			false, []string{"00000000:18:00.0", "00000000:2A:00.0"}},
		{"lanes that landed on one GPU", "4100, 00000000:18:00.0, NVIDIA H200, GPU-aaaa\n4101, 00000000:18:00.0, NVIDIA H200, GPU-aaaa\n",
			true, []string{"00000000:18:00.0", "00000000:18:00.0"}},
	} {
		fake := &fakeLlama{flipAt: -1}
		start := func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
			return &fakeServer{ts: httptest.NewServer(fake.handler()), fakePID: pids[env[0]]}, nil
		}
		smi := func(context.Context) ([]computeApp, error) { return parseComputeApps(tc.smi) }
		a, b := testBundle(cuda), testBundle(cuda, func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "-t", "4") })
		b.Name = "b2"
		progress := &testwriter.Buffer{}
		res, err := Run(context.Background(), []*Bundle{a, b}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), Rounds: 1, GPUs: []string{"0", "1"},
			start: start, computeApps: smi, Progress: progress})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range res.Runs {
			if len(r.Server.Devices) != 1 || r.Server.Devices[0].Description != "NVIDIA H200" || r.Server.Devices[0].UUID == "" {
				t.Fatalf("%s: run %s on --gpus %s: devices %+v, want the one nvidia-smi names for its pid", tc.name, r.Bundle, r.Identity.GPU, r.Server.Devices)
			}
			ids = append(ids, r.Server.Devices[0].ID)
			saved, err := os.ReadFile(filepath.Join(r.Dir, "record.json"))
			if err != nil || !strings.Contains(string(saved), `"id": "`+r.Server.Devices[0].ID+`"`) {
				t.Errorf("%s: %s/record.json does not name the device (%v):\n%s", tc.name, r.Dir, err, saved)
			}
		}
		if strings.Join(ids, " ") != strings.Join(tc.wantIDs, " ") {
			t.Errorf("%s: device ids %q, want %q", tc.name, ids, tc.wantIDs)
		}
		var table strings.Builder
		res.WriteTable(&table)
		if !strings.Contains(table.String(), "Device") || !strings.Contains(table.String(), "NVIDIA H200 "+tc.wantIDs[1]) {
			t.Errorf("%s: table:\n%s\nwant a Device column naming the device", tc.name, table.String())
		}
		warned := strings.Contains(progress.String(), "--gpus 0, 1 were all loaded on one device, 00000000:18:00.0") && strings.Contains(table.String(), "warning:")
		if warned != tc.shared || (len(res.SharedDevices) > 0) != tc.shared {
			t.Errorf("%s: shared %v (%v), want %v; progress:\n%s\ntable:\n%s", tc.name, warned, res.SharedDevices, tc.shared, progress.String(), table.String())
		}
	}
}

// A server's GPUs are the compute processes of its pid or of its process group (a wrapper
// that forked); nvidia-smi's output that is not its CSV is an error.
func TestDevicesOfAServer(t *testing.T) {
	// this test's own process group stands for a server's: a child of it holds the GPU
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	group := processGroup(os.Getpid())
	if group == 0 || processGroup(child.Process.Pid) != group {
		t.Fatalf("process groups: this %d, child %d", group, processGroup(child.Process.Pid))
	}
	apps, err := parseComputeApps(fmt.Sprintf("%d, 00000000:18:00.0, NVIDIA H200, GPU-aaaa\n1, 00000000:2A:00.0, NVIDIA H200, GPU-bbbb\n", child.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := devicesOf(apps, group); len(got) != 1 || got[0] != (Device{Description: "NVIDIA H200", ID: "00000000:18:00.0", UUID: "GPU-aaaa"}) {
		t.Errorf("devicesOf(the child's group) = %+v, want the child's GPU", got)
	}
	if got := devicesOf(apps, 999999); len(got) != 0 {
		t.Errorf("devicesOf(another pid) = %+v, want none", got)
	}
	if _, err := parseComputeApps("No devices were found\n"); err == nil {
		t.Errorf("parseComputeApps accepted nvidia-smi's message that is not CSV")
	}
}
