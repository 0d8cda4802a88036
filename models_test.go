package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/kjvtext"
	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/internal/testwriter"
)

// bigramPair writes the bigram target and draft of the King James Version's Old Testament
// (gguf.BigramShapes "target" and "draft") into dir.
func bigramPair(t *testing.T, dir string) (target, draft, heldOut string) {
	t.Helper()
	train, heldOut := kjvtext.Files(t)
	text, err := os.ReadFile(train)
	if err != nil {
		t.Fatal(err)
	}
	target, draft = filepath.Join(dir, "bigram-target.gguf"), filepath.Join(dir, "bigram-draft.gguf")
	for f, shape := range map[string]string{target: "target", draft: "draft"} {
		b, _, err := gguf.BigramLlama(string(text), gguf.BigramShapes[shape])
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return target, draft, heldOut
}

// The bigram pair behaves like a trained target and draft on the series build: held-out text
// scores like text (median prompt-token logprob between -8 and -1 nats, where the random
// models give tens of nats below), and the bench's default screen (filled-long prompt, 512
// tokens, 128 canaries) passes every canary with drafting, accepts at least 60% of the draft
// tokens, and llama-server's /metrics counts the same drafts as the rows' timings.
func TestBigramPairBehavesLikeAModel(t *testing.T) {
	server := enginetest.PatchedServer(t)
	dir := t.TempDir()
	target, draft, heldOut := bigramPair(t, dir)

	// held-out text, scored in one prefill (patch 0002)
	nt, err := os.ReadFile(heldOut)
	if err != nil {
		t.Fatal(err)
	}
	port, err := llamatest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, server, "-m", target, "--prompt-logprobs", "--port", fmt.Sprint(port), "-c", "4096", "-t", "2", "--parallel", "1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server did not come up:\n%s", log.String())
		}
	}
	var lps []float64
	for _, off := range []int{10000, 300000, 700000} {
		body, _ := json.Marshal(map[string]any{"prompt": string(nt[off : off+3000]), "n_predict": 0, "prompt_logprobs": 0})
		resp, err := http.Post(base+"/completion", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Probs []struct {
				Logprob float64 `json:"logprob"`
			} `json:"prompt_probabilities"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || len(out.Probs) < 500 {
			t.Fatalf("scoring held-out text: %v, %d positions\n%s", err, len(out.Probs), log.String())
		}
		for _, p := range out.Probs {
			lps = append(lps, p.Logprob)
		}
	}
	sort.Float64s(lps)
	median := lps[len(lps)/2]
	t.Logf("held-out text: %d positions, median prompt-token logprob %.2f nats", len(lps), median)
	if median < -8 || median > -1 {
		t.Errorf("median held-out logprob %.2f nats, want between -8 and -1", median)
	}

	// the bench's default screen with the draft
	o := filepath.Join(dir, "bundle")
	if code, stderr := bundleDraft(server, target, draft, o); code != 0 {
		t.Fatalf("bundle: exit %d\n%s", code, stderr)
	}
	runs := filepath.Join(dir, "runs")
	code, so, se := benchRun(t, o, "--dir", runs)
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
	rs := readRecords(t, runs)
	rec := readRecord(t, filepath.Join(runs, rs.Runs[0].Dir, "record.json"))
	if rec.Canary.Passed != 128 || rec.Canary.Reference != "no-draft" || rec.Canary.CheckDrafted == 0 {
		t.Errorf("canaries %+v: want 128 passed against a no-draft reference, the checks drafting", rec.Canary)
	}
	a := rec.Summary.Acceptance
	if a == nil || *a < 0.6 {
		t.Errorf("acceptance %v, want at least 0.6", a)
	} else {
		t.Logf("acceptance %.3f, row 0 %.1f tok/s", *a, rec.Summary.Row0TPS)
	}
	if sc := rec.ServerCounters; sc == nil || !sc.Agree || sc.Drafted == 0 {
		t.Errorf("serverCounters %+v: want /metrics' drafts, agreeing with the rows'", sc)
	}

	// a multiple-choice task from held-out verses, scored through llbuild serve with
	// lm-evaluation-harness's loglikelihood request (echo, logprobs 1, max_tokens 0): the first
	// half of a verse, then its second half or one of three shuffles of the same words; chance
	// is 25%, a model that knows word order picks the verse
	items := wordOrderItems(string(nt), 60)
	correct := scoreThroughServe(t, o, items)
	acc := float64(correct) / float64(len(items))
	t.Logf("word-order multiple choice through serve: %d of %d (%.0f%%; chance 25%%)", correct, len(items), 100*acc)
	if acc < 0.6 {
		t.Errorf("word-order multiple choice: %.0f%% correct, want well above the 25%% of chance (at least 60%%)", 100*acc)
	}
}

// mcItem is a context and its choices, choice 0 the right one.
type mcItem struct {
	context string
	choices []string
}

// wordOrderItems makes n items from verses of text with at least 12 words: the verse's first
// half, then its second half or three deterministic shuffles of that half's words.
func wordOrderItems(text string, n int) []mcItem {
	var items []mcItem
	rng := uint64(42)
	next := func(k int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int((rng >> 33) % uint64(k))
	}
	for _, line := range strings.Split(text, "\n") {
		w := strings.Fields(line)
		if len(w) < 12 || len(items) == n {
			continue
		}
		half := len(w) / 2
		rest := w[half:]
		it := mcItem{context: strings.Join(w[:half], " "), choices: []string{" " + strings.Join(rest, " ")}}
		for len(it.choices) < 4 {
			p := append([]string(nil), rest...)
			for i := len(p) - 1; i > 0; i-- {
				j := next(i + 1)
				p[i], p[j] = p[j], p[i]
			}
			c := " " + strings.Join(p, " ")
			dup := false
			for _, x := range it.choices {
				dup = dup || x == c
			}
			if !dup {
				it.choices = append(it.choices, c)
			}
		}
		items = append(items, it)
	}
	return items
}

// scoreThroughServe serves the bundle and answers each item with the choice of the highest
// summed continuation logprob, as lm-eval's acc does; it returns how many were right.
func scoreThroughServe(t *testing.T, bundle string, items []mcItem) (correct int) {
	t.Helper()
	serveOnce(t, bundle, func(base string) { correct = scoreItems(t, base, items) })
	return correct
}

func scoreItems(t *testing.T, base string, items []mcItem) int {
	t.Helper()
	correct := 0
	for _, it := range items {
		best, bestLP := -1, 0.0
		for ci, c := range it.choices {
			body, _ := json.Marshal(map[string]any{"prompt": it.context + c, "max_tokens": 0, "echo": true, "logprobs": 1, "temperature": 0})
			resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Choices []struct {
					Logprobs struct {
						TokenLogprobs []*float64 `json:"token_logprobs"`
						TextOffset    []int      `json:"text_offset"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
				t.Fatalf("scoring %q: status %d, %v", it.context+c, resp.StatusCode, err)
			}
			lp, n := 0.0, 0
			l := out.Choices[0].Logprobs
			for i, off := range l.TextOffset {
				if off >= len(it.context) && i < len(l.TokenLogprobs) && l.TokenLogprobs[i] != nil {
					lp += *l.TokenLogprobs[i]
					n++
				}
			}
			if n == 0 {
				t.Fatalf("no continuation tokens scored for %q", it.context+c)
			}
			if best < 0 || lp > bestLP {
				best, bestLP = ci, lp
			}
		}
		if best == 0 {
			correct++
		}
	}
	return correct
}

// A Gemma 4 target with its MTP assistant, both written by the project's GGUF writer with
// exactly what llama.cpp reads: the series build loads them with --spec-type draft-mtp;
// llbuild bundle records the draft as gemma4's MTP assistant and runs it as draft-mtp; serve
// answers; the bench's screen drafts with it and reports the acceptance. An assistant for
// another hidden size or another architecture is refused by bundle, and llama-server refuses
// the same pairs too (it aborts or crashes and never answers), so the check mirrors it.
func TestGemma4WithItsMTPAssistant(t *testing.T) {
	server := enginetest.PatchedServer(t)
	dir := t.TempDir()
	write := func(name string) func(*gguf.Builder, error) string {
		return func(b *gguf.Builder, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, name)
			if err := b.WriteFile(f); err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	o := gguf.TinyGemma4()
	target := write("gemma4.gguf")(gguf.Gemma4Target(o))
	assistant := write("gemma4-assistant.gguf")(gguf.Gemma4Assistant(o))
	other := o
	other.Embd = 48
	wrongSize := write("gemma4-assistant-48.gguf")(gguf.Gemma4Assistant(other))
	llama := filepath.Join(dir, "llama.gguf")
	if err := gguf.WriteTinyLlamaFile(llama, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}

	bundle := func(model, draft, out string) (int, string) { return bundleDraft(server, model, draft, out) }
	o1 := filepath.Join(dir, "bundle")
	if code, stderr := bundle(target, assistant, o1); code != 0 {
		t.Fatalf("bundle of gemma4 and its assistant: exit %d\n%s", code, stderr)
	}
	m, err := os.ReadFile(filepath.Join(o1, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Models struct {
			Draft struct {
				GGUF struct {
					Architecture string `json:"architecture"`
					DraftFor     string `json:"draft_for"`
				} `json:"gguf"`
			} `json:"draft"`
		} `json:"models"`
		Server struct {
			Args []string `json:"args"`
		} `json:"server"`
	}
	if err := json.Unmarshal(m, &man); err != nil {
		t.Fatal(err)
	}
	if d := man.Models.Draft.GGUF; d.Architecture != "gemma4-assistant" || d.DraftFor != "gemma4" || !strings.Contains(strings.Join(man.Server.Args, " "), "--spec-type draft-mtp") {
		t.Errorf("manifest: draft %+v, launch %v; want gemma4's MTP assistant run as draft-mtp", d, man.Server.Args)
	}

	serveOnce(t, o1, func(base string) {
		body, _ := json.Marshal(map[string]any{"prompt": "the quick brown fox", "max_tokens": 8, "temperature": 0})
		resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 || out.Usage.CompletionTokens != 8 {
			t.Errorf("serve of gemma4 with its assistant: status %d, %v, %+v", resp.StatusCode, err, out)
		}
	})

	runs := filepath.Join(dir, "runs")
	code, so, se := benchRun(t, o1, "--dir", runs, "--canaries", "16", "--prompt-tokens", "64", "--generate", "48")
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
	rs := readRecords(t, runs)
	rec := readRecord(t, filepath.Join(runs, rs.Runs[0].Dir, "record.json"))
	if !strings.Contains(rec.Identity.Label, "draft_mtp") || rec.Canary.Passed != 16 || rec.Canary.CheckDrafted == 0 ||
		len(rec.Rows) != 1 || rec.Rows[0].DraftProposed == 0 || rec.Summary.Acceptance == nil {
		t.Errorf("bench of the MTP bundle: label %s, canary %+v, rows %+v; want draft_mtp, 16 canaries passed with drafting, row 0 drafted with an acceptance", rec.Identity.Label, rec.Canary, rec.Rows)
	} else {
		t.Logf("MTP screen: %d drafted, acceptance %.3f (random weights), row 0 %.1f tok/s", rec.Rows[0].DraftProposed, *rec.Summary.Acceptance, rec.Summary.Row0TPS)
	}

	for _, tt := range []struct {
		name, model, draft, want string
	}{
		{"an assistant for another hidden size", target, wrongSize, "hidden size of 48"},
		{"an assistant for another architecture", llama, assistant, "an MTP draft for gemma4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := bundle(tt.model, tt.draft, filepath.Join(t.TempDir(), "b"))
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("bundle: exit %d, stderr %q; want a refusal saying %q", code, stderr, tt.want)
			}
			// llama-server with the same pair never serves
			port, err := llamatest.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, server, "-m", tt.model, "--model-draft", tt.draft, "--spec-type", "draft-mtp", "--port", fmt.Sprint(port), "-c", "2048", "-t", "2")
			var log bytes.Buffer
			cmd.Stdout, cmd.Stderr = &log, &log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			for {
				select {
				case err := <-exited:
					if err == nil {
						t.Errorf("llama-server exited 0 with this pair:\n%s", log.String())
					}
					return
				case <-time.After(100 * time.Millisecond):
				}
				if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port)); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						t.Fatalf("llama-server serves this pair, so bundle's refusal is stricter than llama-server:\n%s", log.String())
					}
				}
				if ctx.Err() != nil {
					t.Fatalf("llama-server neither served nor exited within a minute:\n%s", log.String())
				}
			}
		})
	}
}

// bundleDraft bundles model and draft with the artifacts of server (the series build) for
// cpu-v3 into out, and returns bundle's exit status and stderr.
func bundleDraft(server, model, draft, out string) (int, string) {
	args := []string{"llbuild", "bundle", "--target", "cpu-v3", "--artifacts", filepath.Dir(server), "--model", model, "--draft", draft,
		"--ctx-size", "2048", "--threads", "2", "--parallel", "1", "-o", out, "--quiet", "--link"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stderr.String()
}

// serveOnce runs llbuild serve of bundle on a free loopback port while f runs.
func serveOnce(t *testing.T, bundle string, f func(base string)) {
	t.Helper()
	port, err := llamatest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testwriter.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"llbuild", "serve", bundle, "--addr", addr}, strings.NewReader(""), &testwriter.Buffer{}, &stderr)
	}()
	defer func() { cancel(); <-done }()
	base := "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case c := <-done:
			done <- c
			t.Fatalf("serve exited %d before it was healthy:\n%s", c, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not healthy after a minute:\n%s", stderr.String())
		}
	}
	f(base)
}

// The bigram pair in Gemma 4's shape (gguf.BigramGemma4: the target carries the Old
// Testament's bigrams, its MTP assistant the same blurred): the bench's default screen drafts
// with --spec-type draft-mtp, passes every canary, and accepts at least 60% of the drafts; its
// row 0 ends in a cycle, which the bench names.
func TestBigramGemma4AssistantIsAccepted(t *testing.T) {
	rec, so := benchBigramGemma4(t, gguf.BigramShapes["draft"])
	a := rec.Summary.Acceptance
	if !strings.Contains(rec.Identity.Label, "draft_mtp") || rec.Canary.Passed != 128 || a == nil || *a < 0.6 {
		t.Fatalf("bench: label %s, canary %+v, acceptance %v; want draft_mtp, 128 canaries passed, at least 60%% accepted", rec.Identity.Label, rec.Canary, a)
	}
	// a bigram model's greedy output ends in a cycle: the bench says so under its table, since
	// the drafts are then accepted on the cycle, not on text
	l := rec.Summary.Loop
	if l == nil || l.Period < 1 || l.From > rec.Rows[0].Generated/2 || !strings.Contains(so, "warning: row 0 of "+rec.Identity.Label+" loops: its output repeats a ") {
		t.Fatalf("row 0's loop %+v (of %d tokens), want a cycle over at least half; stdout:\n%s", l, rec.Rows[0].Generated, so)
	}
	t.Logf("MTP acceptance %.3f, row 0 %.1f tok/s, output loops: a %d-token cycle from token %d", *a, rec.Summary.Row0TPS, l.Period, l.From)
}

// The walk pair (gguf.BigramOptions.Cycle: a walk through 600 of the text's pieces, its
// assistant blurred to agree on about nine steps in ten) is what draft settings can be swept on:
// on the real patched llama-server its row 0 does not loop, every canary passes, and its
// assistant's drafts are accepted often but not always (the text pair's are 98%, on a loop).
func TestBigramGemma4WalkDoesNotLoop(t *testing.T) {
	d := gguf.BigramShapes["draft"]
	d.Cycle, d.Noise = 600, gguf.CycleDraftNoise
	rec, so := benchBigramGemma4(t, d)
	a := rec.Summary.Acceptance
	if rec.Canary.Passed != 128 || a == nil || *a < 0.5 || *a > 0.95 || rec.Summary.Loop != nil || strings.Contains(so, " loops: ") {
		t.Fatalf("bench: canary %+v, acceptance %v, loop %+v; want 128 passed, 50-95%% accepted, no loop\nstdout:\n%s", rec.Canary, a, rec.Summary.Loop, so)
	}
	t.Logf("walk pair: MTP acceptance %.3f at the default n-max, row 0 %.1f tok/s", *a, rec.Summary.Row0TPS)
}

// The walk pair padded to a real vocabulary (gguf.BigramOptions.Vocab: target and assistant
// alike) drafts as the unpadded one does: every canary passes, its assistant's drafts are
// accepted as often (50-95%), and its row 0 does not loop. This is the pair a GPU measures
// per-token sampling costs with (scripts/gpu-plans/54-backend-sampling.plan, VOCAB).
func TestBigramGemma4WalkPaddedIsAccepted(t *testing.T) {
	d := gguf.BigramShapes["draft"]
	d.Cycle, d.Noise, d.Vocab = 600, gguf.CycleDraftNoise, 32000
	rec, so := benchBigramGemma4(t, d)
	a := rec.Summary.Acceptance
	if rec.Canary.Passed != 128 || a == nil || *a < 0.5 || *a > 0.95 || rec.Summary.Loop != nil {
		t.Fatalf("bench of the padded walk pair: canary %+v, acceptance %v, loop %+v; want 128 passed, 50-95%% accepted, no loop\nstdout:\n%s", rec.Canary, a, rec.Summary.Loop, so)
	}
	t.Logf("padded walk pair: MTP acceptance %.3f, row 0 %.1f tok/s", *a, rec.Summary.Row0TPS)
}

// benchBigramGemma4 makes the Old Testament's gemma4 bigram pair with draft's options for the
// assistant, bundles it for the patched llama-server with its MTP assistant and runs the bench's
// default screen: the run's record and the bench's stdout.
func benchBigramGemma4(t *testing.T, draft gguf.BigramOptions) (*bench.Record, string) {
	t.Helper()
	server := enginetest.PatchedServer(t)
	train, _ := kjvtext.Files(t)
	text, err := os.ReadFile(train)
	if err != nil {
		t.Fatal(err)
	}
	tb, ab, _, err := gguf.BigramGemma4(string(text), gguf.BigramGemma4Shape(), draft)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	target, assistant := filepath.Join(dir, "gemma4.gguf"), filepath.Join(dir, "gemma4-assistant.gguf")
	if err := tb.WriteFile(target); err != nil {
		t.Fatal(err)
	}
	if err := ab.WriteFile(assistant); err != nil {
		t.Fatal(err)
	}
	o := filepath.Join(dir, "bundle")
	if code, stderr := bundleDraft(server, target, assistant, o); code != 0 {
		t.Fatalf("bundle: exit %d\n%s", code, stderr)
	}
	runs := filepath.Join(dir, "runs")
	code, so, se := benchRun(t, o, "--dir", runs)
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
	rs := readRecords(t, runs)
	return readRecord(t, filepath.Join(runs, rs.Runs[0].Dir, "record.json")), so
}

// A bigram target padded to a real model's vocabulary (gguf.BigramOptions.Vocab, 32,000 here)
// is the same model to llama-server: it reports the padded vocabulary, and its greedy text and
// each token's top-3 log probabilities are the unpadded target's; only the output layer and the
// sampling cost more, as a real vocabulary's do.
func TestBigramPaddedVocabularyGivesTheSameText(t *testing.T) {
	server := enginetest.PatchedServer(t)
	bin, err := llamatest.External(context.Background(), server)
	if err != nil {
		t.Fatal(err)
	}
	train, _ := kjvtext.Files(t)
	text, err := os.ReadFile(train)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	type answer struct {
		Content string `json:"content"`
		Probs   []struct {
			Top []struct {
				ID      int     `json:"id"`
				Logprob float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"completion_probabilities"`
	}
	complete := func(vocab int) (answer, int) {
		o := gguf.BigramShapes["target"]
		o.Vocab = vocab
		b, _, err := gguf.BigramLlama(string(text), o)
		if err != nil {
			t.Fatal(err)
		}
		model := filepath.Join(dir, fmt.Sprintf("t%d.gguf", vocab))
		if err := b.WriteFile(model); err != nil {
			t.Fatal(err)
		}
		srv := llamatest.StartWith(t, bin, model, "-c", "1024", "-t", "2", "--parallel", "1")
		defer srv.Stop()
		body, _ := json.Marshal(map[string]any{"prompt": "And God said unto Moses", "n_predict": 48, "temperature": 0, "n_probs": 3, "cache_prompt": false})
		resp, err := http.Post(srv.URL+"/completion", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Probs) != 48 {
			t.Fatalf("vocabulary %d: %v, %d tokens", vocab, err, len(a.Probs))
		}
		var models struct {
			Data []struct {
				Meta struct {
					NVocab int `json:"n_vocab"`
				} `json:"meta"`
			} `json:"data"`
		}
		r, err := http.Get(srv.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		if err := json.NewDecoder(r.Body).Decode(&models); err != nil || len(models.Data) == 0 {
			t.Fatalf("/v1/models: %v", err)
		}
		return a, models.Data[0].Meta.NVocab
	}
	plain, vPlain := complete(0)
	padded, vPadded := complete(32000)
	if vPadded != 32000 || vPlain >= 32000 {
		t.Fatalf("llama-server's n_vocab: %d unpadded, %d padded; want the text's and 32000", vPlain, vPadded)
	}
	if padded.Content != plain.Content || padded.Content == "" {
		t.Fatalf("greedy text padded %q, unpadded %q", padded.Content, plain.Content)
	}
	for i := range plain.Probs {
		for j, p := range plain.Probs[i].Top {
			q := padded.Probs[i].Top[j]
			if q.ID != p.ID || q.Logprob < p.Logprob-1e-3 || q.Logprob > p.Logprob+1e-3 {
				t.Fatalf("token %d, top %d: padded %+v, unpadded %+v", i, j, q, p)
			}
		}
	}
	t.Logf("n_vocab %d -> %d, the same %d tokens: %.60q", vPlain, vPadded, len(plain.Probs), plain.Content)
}
