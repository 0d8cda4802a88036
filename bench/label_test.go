package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llbuild/llbuild/manifest"
)

// The lab's four p_split screens differed only in a manifest hash: p-split, draft threads and
// poll are label fields now, and a run can carry a human name (first in the label) and a note
// (in its record and in records.json, never in the label).
func TestLabelsNameTheLabsSettingsAndTheRunsName(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	p := fastProtocol(ModeScreen)
	base := newIdentity(testBundle(), p, "", at)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--spec-draft-p-split", "0.25"}, "-psplit0.25-"},
		{[]string{"--spec-draft-threads", "4"}, "-dth4-"},
		{[]string{"--poll", "0"}, "-poll0-"},
	} {
		id := newIdentity(testBundle(func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, tc.args...) }), p, "", at)
		if !strings.Contains(id.Label, tc.want) || strings.Contains(base.Label, tc.want) {
			t.Errorf("%v: label %s, want %q in it (and not in %s)", tc.args, id.Label, tc.want, base.Label)
		}
	}

	fake := &fakeLlama{flipAt: -1}
	start := func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
		return &fakeServer{ts: httptest.NewServer(fake.handler())}, nil
	}
	dir := t.TempDir()
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: p, Dir: dir, Rounds: 1, start: start,
		Name: "psplit_screen", Note: "p_split 0.25 after the 0.1 screen lost 2%"})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if !strings.HasPrefix(r.Identity.Label, "psplit_screen-") || r.Identity.Name != "psplit_screen" || strings.Contains(r.Identity.Label, "lost") {
		t.Errorf("label %q name %q, want the name first and no note", r.Identity.Label, r.Identity.Name)
	}
	saved, err := os.ReadFile(filepath.Join(r.Dir, "record.json"))
	if err != nil || !strings.Contains(string(saved), `"note": "p_split 0.25 after the 0.1 screen lost 2%"`) {
		t.Errorf("record.json lacks the note (%v)", err)
	}
	rs, err := ReadRecords(dir)
	if err != nil || len(rs.Runs) != 1 || rs.Runs[0].Note != r.Identity.Note {
		t.Errorf("records.json: %+v %v, want the note", rs, err)
	}
}

// Benching again a bundle whose build, flags and environment (its manifest) the campaign
// already rejected says so, with that run's decision and figure: nobody retries a negative
// result by accident. Another bundle, or a kept result, says nothing.
func TestBenchingARejectedBundleAgainWarns(t *testing.T) {
	dir := t.TempDir()
	p := fastProtocol(ModeScreen)
	run := func(b *Bundle, flipAt int) (*Result, string) {
		t.Helper()
		fake := &fakeLlama{flipAt: flipAt}
		start := func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
			return &fakeServer{ts: httptest.NewServer(fake.handler())}, nil
		}
		var progress strings.Builder
		res, err := Run(context.Background(), []*Bundle{b}, Options{Protocol: p, Dir: dir, Rounds: 1, start: start, Progress: &progress})
		if err != nil {
			t.Fatal(err)
		}
		return res, progress.String()
	}
	rejected := testBundle(func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--spec-draft-p-split", "0.1") })
	res, _ := run(rejected, 3) // the canaries catch a wrong token: rejected
	if d := res.Runs[0].Decision; !strings.HasPrefix(d, "rejected") {
		t.Fatalf("first run: %s, want rejected", d)
	}
	res, progress := run(rejected, -1)
	if len(res.Previous) != 1 || !strings.Contains(progress, "warning: b was measured before in this campaign") || !strings.Contains(progress, "rejected: canary") {
		t.Errorf("benched again: previous %+v; progress:\n%s", res.Previous, progress)
	}
	other := testBundle(func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--spec-draft-p-split", "0.2") })
	if res, progress := run(other, -1); len(res.Previous) != 0 || strings.Contains(progress, "measured before") {
		t.Errorf("another manifest: previous %+v; progress:\n%s", res.Previous, progress)
	}
}

// Promotion by the judge: a build beats the record only when the judge says faster against the
// record's bundle benched in the same rounds; slower and no difference are rejected with the
// verdict; a record's bundle not benched beside it, or too few rounds, leave the run unjudged
// (not a negative result); the beaten record becomes superseded, naming its successor.
func TestPromotionByTheJudge(t *testing.T) {
	dir := t.TempDir()
	full := fastProtocol(ModeFull)
	withArg := func(a ...string) *Bundle {
		b := testBundle(func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, a...) })
		b.Name = strings.Join(a, "")
		return b
	}
	slow, fast, same, slower := testBundle(), withArg("--poll", "0"), withArg("--poll", "1"), withArg("--poll", "2")
	slow.Name = "slow"
	speeds := map[string]int{"slow": 1000, "--poll0": 2000, "--poll1": 2000, "--poll2": 1500}
	fake := &fakeLlama{flipAt: -1, speed: func(b *Bundle) int { return speeds[b.Name] }}
	run := func(rounds int, bs ...*Bundle) *Result {
		t.Helper()
		res, err := Run(context.Background(), bs, Options{Protocol: full, Dir: dir, Rounds: rounds, start: fake.starter()})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	decisionOf := func(res *Result, name string) Judgement {
		for _, j := range res.Records {
			if j.Bundle == name {
				return j
			}
		}
		t.Fatalf("no judgement of %s in %+v", name, res.Records)
		return Judgement{}
	}

	// the first full run is the first record; the faster build, benched beside it, beats it
	res := run(6, slow, fast)
	if j := decisionOf(res, fast.Name); j.Decision != DecisionPromoted || j.Verdict == nil || j.Verdict.Kind != Faster ||
		!strings.Contains(j.Reason, "faster: median 2.000 (2.000-2.000, 6 rounds)") || !strings.Contains(j.Reason, "differs: --poll (unset) → 0") {
		t.Errorf("fast against the record: %+v, want promoted by a faster verdict, with what differs", j)
	}
	recs, _ := ReadRecords(dir)
	var promoted, superseded int
	for _, e := range recs.Runs {
		switch e.Decision {
		case DecisionPromoted:
			promoted++
			if e.Bundle != fast.Name {
				t.Errorf("promoted %s, want %s", e.Bundle, fast.Name)
			}
		case DecisionSuperseded:
			superseded++
			if e.Bundle != "slow" || e.SupersededBy == "" {
				t.Errorf("superseded %+v, want slow's first record, naming its successor", e)
			}
		case DecisionPending:
			t.Errorf("a run left pending: %+v", e)
		}
	}
	if promoted != 1 || superseded != 1 {
		t.Errorf("%d promoted, %d superseded, want one of each: %+v", promoted, superseded, recs.Runs)
	}
	if s := recs.Standing(recs.Runs[0].Model, recs.Runs[0].Protocol); s == nil || s.Bundle != fast.Name {
		t.Errorf("standing %+v, want fast", s)
	}

	// against the record: slower and no difference are rejected, with the verdict
	res = run(6, fast, slower, same)
	if j := decisionOf(res, slower.Name); j.Decision != DecisionBelow || !strings.Contains(j.Reason, "slower: median 0.750") {
		t.Errorf("a slower build: %+v, want rejected below the record", j)
	}
	if j := decisionOf(res, same.Name); j.Decision != DecisionNoise || !strings.Contains(j.Reason, "no difference") {
		t.Errorf("an as-fast build: %+v, want rejected, no difference", j)
	}
	for _, r := range res.Runs {
		if r.Bundle == fast.Name && r.Decision != DecisionRecordAgain {
			t.Errorf("the record's own bundle got %q", r.Decision)
		}
	}

	// unjudged: too few rounds, or the record's bundle not beside it; neither is negative
	res = run(3, fast, slow)
	if j := decisionOf(res, "slow"); j.Decision != DecisionUnjudged || !strings.Contains(j.Reason, "not enough rounds to decide (6 needed, 3 measured)") {
		t.Errorf("three rounds: %+v, want not judged, not enough rounds", j)
	}
	res = run(1, slower)
	if j := decisionOf(res, slower.Name); j.Decision != DecisionUnjudged || !strings.Contains(j.Reason, "did not run in these rounds: bench the two together") || !strings.Contains(j.Reason, "--rounds 6") {
		t.Errorf("alone: %+v, want not judged, with the command that would judge it", j)
	}
	if negative(DecisionUnjudged) || negative(DecisionRecordAgain) {
		t.Error("unjudged or the record measured again count as negative results")
	}
}

// A switch set in the shell reaches llama-server: one that changes computation is in the
// identity and the label, every other variable is recorded by name only (its value, a token
// say, is not written anywhere), and the manifest's own value wins over the shell's.
func TestShellSwitchesAreInTheIdentity(t *testing.T) {
	t.Setenv("LLAMA_MTP_DRAFT_DIRECT_ARGMAX_UNROLL", "7")
	t.Setenv("GGML_CUDA_DISABLE_GRAPHS", "1")
	t.Setenv("HF_TOKEN", "hf_secretsecret")
	t.Setenv("OMP_NUM_THREADS", "6")
	t.Setenv("GOMP_SPINCOUNT", "0")
	t.Setenv("NVIDIA_TF32_OVERRIDE", "0")
	t.Setenv("GGML_REMOTE_API_KEY", "sk-remote-secret") // a secret in a computing family: by name only
	fake := &fakeLlama{flipAt: -1}
	b := testBundle(func(m *manifest.Manifest) { m.Server.Env = map[string]string{"GGML_CUDA_DISABLE_GRAPHS": "0"} })
	res, err := Run(context.Background(), []*Bundle{b}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), Rounds: 1, start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Identity.Env["LLAMA_MTP_DRAFT_DIRECT_ARGMAX_UNROLL"] != "7" || !strings.Contains(r.Identity.Label, "-llama_mtp_draft_direct_argmax_unroll7-") {
		t.Errorf("identity env %v, label %s: want the shell's switch in both", r.Identity.Env, r.Identity.Label)
	}
	for k, v := range map[string]string{"OMP_NUM_THREADS": "6", "GOMP_SPINCOUNT": "0", "NVIDIA_TF32_OVERRIDE": "0"} {
		if r.Identity.Env[k] != v {
			t.Errorf("%s = %q in the identity, want the shell's %q (a knob bundle --env sets, recorded by value)", k, r.Identity.Env[k], v)
		}
	}
	if _, ok := r.Identity.Env["GGML_REMOTE_API_KEY"]; ok || !slices.Contains(r.EnvNames, "GGML_REMOTE_API_KEY") {
		t.Errorf("a secret's value in the identity, or its name missing: %v", r.Identity.Env)
	}
	if r.Identity.Env["GGML_CUDA_DISABLE_GRAPHS"] != "0" {
		t.Errorf("GGML_CUDA_DISABLE_GRAPHS = %q, want the manifest's 0", r.Identity.Env["GGML_CUDA_DISABLE_GRAPHS"])
	}
	if !slices.Contains(r.EnvNames, "HF_TOKEN") || !slices.Contains(r.EnvNames, "PATH") {
		t.Errorf("envNames %v, want every inherited name", r.EnvNames)
	}
	saved, _ := os.ReadFile(filepath.Join(r.Dir, "record.json"))
	if strings.Contains(string(saved), "hf_secret") || strings.Contains(string(saved), "sk-remote-secret") {
		t.Errorf("record.json holds a value of the shell's that changes no computation")
	}
	// the bundle's manifest, unchanged by the run
	if _, ok := b.Manifest.Server.Env["LLAMA_MTP_DRAFT_DIRECT_ARGMAX_UNROLL"]; ok {
		t.Errorf("the run changed the bundle's manifest env")
	}
}

// With --gpus, bundles rotate across devices from round to round, and a control bundle runs on
// every device in every round; the table says how much the devices differed.
func TestVariantsRotateAcrossDevicesWithAControl(t *testing.T) {
	cuda := func(m *manifest.Manifest) { m.Target = manifest.Target{Name: "h200", Backend: "cuda"} }
	fake := &fakeLlama{flipAt: -1}
	var mu sync.Mutex
	started := map[string][]string{} // bundle -> devices, in start order
	start := func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
		mu.Lock()
		started[b.Name] = append(started[b.Name], strings.Join(env, " "))
		mu.Unlock()
		return &fakeServer{ts: httptest.NewServer(fake.handler())}, nil
	}
	a := testBundle(cuda)
	b := testBundle(cuda, func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--poll", "0") })
	c := testBundle(cuda, func(m *manifest.Manifest) { m.Server.Args = append(m.Server.Args, "--poll", "50") })
	a.Name, b.Name, c.Name = "a", "b", "control"
	res, err := Run(context.Background(), []*Bundle{a, b}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), Rounds: 2,
		GPUs: []string{"0", "1"}, Control: c, start: start})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(started["a"], ","); got != "CUDA_VISIBLE_DEVICES=0,CUDA_VISIBLE_DEVICES=1" {
		t.Errorf("bundle a ran on %s, want device 0 then 1", got)
	}
	if got := strings.Join(started["b"], ","); got != "CUDA_VISIBLE_DEVICES=1,CUDA_VISIBLE_DEVICES=0" {
		t.Errorf("bundle b ran on %s, want device 1 then 0", got)
	}
	if n := len(started["control"]); n != 4 {
		t.Errorf("the control ran %d times, want on both devices in both rounds", n)
	}
	if len(res.Devices) != 2 || len(res.Devices[0].Row0) != 2 || res.Devices[0].Mean <= 0 {
		t.Fatalf("devices %+v", res.Devices)
	}
	var table strings.Builder
	res.WriteTable(&table)
	if !strings.Contains(table.String(), "control on every device") || !strings.Contains(table.String(), "the devices differ by") {
		t.Errorf("table:\n%s", table.String())
	}
	if _, err := Run(context.Background(), []*Bundle{a}, Options{Protocol: fastProtocol(ModeScreen), Dir: t.TempDir(), Control: c, start: start}); err == nil {
		t.Error("a control without --gpus was accepted")
	}
}

// A server built from a plain directory (a lab's worktree) is named by its tree's hash, not by
// the commit the plan named and nothing checked: the bundle keeps unverified and the tree, and
// the label and the differences say the tree.
func TestAWorktreeBuildIsNamedByItsTree(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	worktree := func(tree string) func(*manifest.Manifest) {
		return func(m *manifest.Manifest) { m.Build.Source.Unverified, m.Build.Source.Tree = true, tree }
	}
	a := newIdentity(testBundle(worktree("sha256:"+strings.Repeat("a1", 32))), fastProtocol(ModeScreen), "", at)
	b := newIdentity(testBundle(worktree("sha256:"+strings.Repeat("b2", 32))), fastProtocol(ModeScreen), "", at)
	if !strings.Contains(a.Label, "-treea1a1a1a1-") || strings.Contains(a.Label, "1425386fd") {
		t.Errorf("label %s: want the tree, not the commit nothing checked", a.Label)
	}
	if d := strings.Join(Differences(a, b), "; "); !strings.Contains(d, "source tree") {
		t.Errorf("differences %q, want the source tree", d)
	}
}

// A label of any length names a directory the filesystem takes: a readable prefix and the
// label's hash, the whole label in the record (a 200-character --label used to make the name too
// long for the filesystem and the commit loop spun on it).
func TestLongLabelsNameBoundedDirectories(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeLlama{flipAt: -1}
	long := strings.Repeat("psplit_0.25=", 30)
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeScreen), Dir: dir, Name: long, Rounds: 2, start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range res.Runs {
		base := filepath.Base(r.Dir)
		if len(base) > 255 || !strings.HasPrefix(base, long[:50]) || seen[base] {
			t.Errorf("run directory %q (%d bytes): want at most 255, the label's start, one per run", base, len(base))
		}
		seen[base] = true
		if !strings.HasPrefix(r.Identity.Label, long) || !r.Complete {
			t.Errorf("record label %q, complete %v: want the whole label and the run kept", r.Identity.Label, r.Complete)
		}
	}
	if a, b := dirName(long+"a"), dirName(long+"b"); a == b || len(a) != maxDirName {
		t.Errorf("dirName: %q and %q, want two names of %d bytes", a, b, maxDirName)
	}
}

// A build from a plain directory never passes for a commit: the record says unverified and names
// the tree, the page's command identity says so, and the leaderboard entry carries
// "unverified": true for a site to filter on.
func TestPlainTreeBuildIsUnverifiedEverywhere(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeLlama{flipAt: -1}
	b := testBundle(func(m *manifest.Manifest) { m.Build.Source.Tree = "sha256:7ee" + strings.Repeat("0", 61) })
	res, err := Run(context.Background(), []*Bundle{b}, Options{Protocol: fastProtocol(ModeFull), Dir: dir, start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if !r.Identity.Unverified || r.Identity.SourceTree == "" {
		t.Errorf("identity %+v: want unverified with its tree", r.Identity)
	}
	rep, err := ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "a plain tree 7ee00000, unverified (not checked to be llama.cpp 1425386f)") {
		t.Errorf("the command identity does not say unverified:\n%s", md.String())
	}
	e, err := rep.Leaderboard(r.Identity.Label)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(e); !e.Unverified || e.SourceTree == "" || !strings.Contains(string(raw), `"unverified":true`) {
		t.Errorf("leaderboard entry %s: want unverified and the tree", raw)
	}
	b2 := testBundle()
	res, err = Run(context.Background(), []*Bundle{b2}, Options{Protocol: fastProtocol(ModeFull), Dir: t.TempDir(), start: fake.starter()})
	if err != nil || res.Runs[0].Identity.Unverified {
		t.Errorf("a checkout's build said unverified (%v)", err)
	}
}

// What a killed bench leaves is adopted by the next, never a live one's: a run directory whose
// owner is gone becomes an incomplete run ("killed"), one whose owner runs (this process) is
// left alone, an empty one of a dead owner is removed, and an old one without a record is set
// aside; the bench says it continues the campaign.
func TestLeftOverRunsAreAdoptedOrSetAside(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := owner{PID: dead.Process.Pid, Start: "1"}
	mk := func(name string, rec *Record) string {
		p := filepath.Join(runs, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if rec != nil {
			b, _ := json.Marshal(pending{Record: rec, Owner: gone})
			if err := os.WriteFile(filepath.Join(p, pendingFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	killed := &Record{SchemaVersion: RecordSchema, Identity: newIdentity(testBundle(), fastProtocol(ModeFull), "", time.Now()), Bundle: "b",
		Protocol: fastProtocol(ModeFull), Rows: []Row{{DecodeTPS: 10}}}
	killed.Dir = filepath.Join(runs, "killed-run")
	mk(fmt.Sprintf(".tmp-%d-1-abc", gone.PID), killed)
	live := mk(tmpPrefix()+"live", nil)
	mk(fmt.Sprintf(".tmp-%d-1-empty", gone.PID), nil)
	old := mk(".tmp-123456", nil)
	if err := os.WriteFile(filepath.Join(old, "server.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(old, past, past)
	var progress strings.Builder
	fake := &fakeLlama{flipAt: -1}
	res, err := Run(context.Background(), []*Bundle{testBundle()}, Options{Protocol: fastProtocol(ModeScreen), Dir: dir, Progress: &progress, start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Continuing
	if c == nil || len(c.Adopted) != 1 || len(c.SetAside) != 1 || c.Runs != 1 || c.Incomplete != 1 ||
		!strings.Contains(progress.String(), "continuing campaign "+dir+": 1 runs, 1 incomplete (1 adopted from a bench that was killed)") {
		t.Errorf("continuing %+v, progress:\n%s", c, progress.String())
	}
	rs, _ := ReadRecords(dir)
	if rs.Runs[0].Decision != DecisionIncomplete || !strings.Contains(rs.Runs[0].Reason, "killed") {
		t.Errorf("adopted run %+v, want incomplete, killed", rs.Runs[0])
	}
	if _, err := os.Stat(filepath.Join(dir, rs.Runs[0].Dir, pendingFile)); err == nil {
		t.Error("the adopted run kept its pending record")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live bench's run directory was taken: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(runs, ".tmp-*"))
	if len(left) != 1 || left[0] != live {
		t.Errorf("left %v, want only the live one", left)
	}
}

// A patch's fate follows its bytes: a patch a rejected run carried (beyond what the record
// carries) warns when another bundle, on another tree or with other flags, carries it again,
// with that run's decision; the page's Learning lists it; the record's own patches are the
// baseline, no result of their own.
func TestRejectedPatchWarnsOnAnyTree(t *testing.T) {
	dir := t.TempDir()
	withPatch := func(args ...string) func(*manifest.Manifest) {
		return func(m *manifest.Manifest) {
			m.Build.Patches = append(m.Build.Patches, manifest.Patch{Name: "0012-try.patch", SHA256: "sha256:" + strings.Repeat("c", 64)})
			m.Server.Args = append(m.Server.Args, args...)
		}
	}
	base := testBundle()
	tried := testBundle(withPatch("--poll", "0"))
	tried.Name = "tried"
	speeds := map[string]int{"b": 1000, "tried": 500, "again": 1000}
	fake := &fakeLlama{flipAt: -1, speed: func(b *Bundle) int { return speeds[b.Name] }}
	if _, err := Run(context.Background(), []*Bundle{base, tried}, Options{Protocol: fastProtocol(ModeFull), Dir: dir, start: fake.starter()}); err != nil {
		t.Fatal(err)
	}
	again := testBundle(withPatch("--poll", "50"), func(m *manifest.Manifest) { m.Build.Source.Tree = "sha256:" + strings.Repeat("d", 64) })
	again.Name = "again"
	var progress strings.Builder
	res, err := Run(context.Background(), []*Bundle{again}, Options{Protocol: fastProtocol(ModeScreen), Dir: dir, Progress: &progress, start: fake.starter()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PreviousPatches) != 1 || !strings.Contains(progress.String(), "again carries patch 0012-try.patch (sha256 cccccccc), which this campaign tried and did not keep") ||
		!strings.Contains(progress.String(), DecisionBelow) {
		t.Errorf("no warning of the rejected patch:\n%s", progress.String())
	}
	var progress2 strings.Builder
	if _, err := Run(context.Background(), []*Bundle{base}, Options{Protocol: fastProtocol(ModeScreen), Dir: dir, Progress: &progress2, start: fake.starter()}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(progress2.String(), "did not keep") || strings.Contains(progress2.String(), "measured before") {
		t.Errorf("the record's own bundle warned as a negative result:\n%s", progress2.String())
	}
	rep, err := ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "| 0012-try.patch | cccccccc | not kept: ") {
		t.Errorf("Learning lacks the patch's fate:\n%s", md.String())
	}
}
