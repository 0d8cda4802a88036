package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"

	"github.com/llbuild/llbuild/internal/testwriter"
	"github.com/llbuild/llbuild/llamaserver"
)

// The native scorer needs a llama-server built with patches/0002-server-
// prompt-logprobs.patch. These tests run against a build named by the
// environment: scripts/test.sh builds one (and one with patch 0001 alone) with
// `llbuild server --executor host -t cpu-v3` when ../shared/llama.cpp is
// beside the repository. Without it they skip; under CI=true they fail.

// patchedServer is the patched llama-server named by
// LLBUILD_PATCHED_LLAMA_SERVER.
func patchedServer(t testing.TB) string {
	t.Helper()
	p := enginetest.PatchedServer(t)
	return p
}

// unpatchedServer is a llama-server of the same llama.cpp commit built
// without the prompt-logprobs patch, named by
// LLBUILD_UNPATCHED_LLAMA_SERVER.
func unpatchedServer(t testing.TB) string {
	t.Helper()
	p := enginetest.UnpatchedServer(t)
	return p
}

// promptLogprobsArg turns on the patched llama-server's prompt_logprobs
// (off by default, as it reserves logits for one more ubatch).
const promptLogprobsArg = "--prompt-logprobs"

// chunkArgs make llama-server process prompts in small ubatches, so that
// a few hundred prompt tokens exceed both n_ubatch and the logits
// capacity of one decode (n_outputs_max = 2 slots + 64).
var chunkArgs = []string{"-b", "128", "-ub", "64", promptLogprobsArg}

// shimOn starts a shim on serverPath with the tiny model written to a
// fresh directory.
func shimOn(t testing.TB, serverPath string, o gguf.TinyOptions, args ...string) *testShim {
	t.Helper()
	model := filepath.Join(t.TempDir(), "model.gguf")
	if err := gguf.WriteTinyLlamaFile(model, o); err != nil {
		t.Fatal(err)
	}
	ts, err := startShim(serverPath, model, Options{ServerArgs: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.stop)
	return ts
}

// scoringPrompts cover plain ASCII, multi-byte text that the tiny model
// spells with byte-fallback tokens (which teacher forcing cannot force
// directly), and a prompt longer than n_ubatch and n_outputs_max.
func scoringPrompts() map[string]string {
	words := strings.Fields("the quick brown fox jumps over the lazy dog while the capital of france is paris")
	var long []string
	for len(long) < 160 {
		long = append(long, words...)
	}
	return map[string]string{
		"ascii":      "the capital of france is paris, and the quick brown fox jumps.",
		"multi-byte": "naïve café — 東京 と 大阪 🙂 ok",
		"long":       strings.Join(long, " "),
	}
}

// nativeTol bounds the difference between a logprob from batched prompt
// processing and one from a single-token decode of the same position:
// the same formula over logits that a different matrix tiling computes
// (up to about 3e-3 over hundreds of positions with the tiny model).
const nativeTol = 5e-3

// TestNativeScorerMatchesTeacherForcing compares the two scorers on the
// CPU backend, even in a GPU build (--device none): there the batched and
// the single-token matrix products differ only in tiling. On CUDA the
// batched products of F16 weights accumulate in FP16 (cuBLAS) and the
// single-token ones in FP32, which alone moves logprobs by up to about
// 8e-3 with the tiny model (measured on an H200); that is the backend's
// precision, not the patch's.
func TestNativeScorerMatchesTeacherForcing(t *testing.T) {
	t.Setenv("SHIM_SERVER_ARGS", os.Getenv("SHIM_SERVER_ARGS")+" --device none")
	ts := shimOn(t, patchedServer(t), gguf.DefaultTiny(), chunkArgs...)
	u := ts.upstream(t)
	if !u.info.PromptLogprobs {
		t.Fatal("the patched llama-server does not advertise prompt_logprobs in /props")
	}
	native, ok := u.scorer.(*nativeScorer)
	if !ok {
		t.Fatalf("scorer is %q, want the native scorer", u.scorer.Name())
	}
	forcing := &forcingScorer{u: u}
	// At most one alternative, llama-server computes the logprobs in the
	// graph (patches 0005 and 0006); more, from the logits on the host (0002).
	for _, top := range []int{1, 5} {
		for name, text := range scoringPrompts() {
			t.Run(fmt.Sprintf("%s/top%d", name, top), func(t *testing.T) {
				ids := ts.tokenize(t, text, true)
				positions := echoPositions(len(ids))
				if name == "long" && len(ids) <= 2*64 {
					t.Fatalf("long prompt has %d tokens, want more than two ubatches", len(ids))
				}
				slot, err := u.acquire(context.Background(), time.Minute, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer u.release(slot, nil)
				got, err := native.Score(context.Background(), slot, ids, positions, top)
				if err != nil {
					t.Fatal(err)
				}
				want, err := forcing.Score(context.Background(), slot, ids, positions, top)
				if err != nil {
					t.Fatal(err)
				}
				compareScores(t, ids, positions, got, want)
			})
		}
	}
}

// TestNativeScorerSlotsShareABatch scores two prompts at once on the two
// slots, one with one alternative (computed in the graph) and one with
// five (from the logits on the host), so that llama-server puts both
// prompts' positions in the same batches (-b 128: each prompt spans
// several), then checks each against teacher forcing.
func TestNativeScorerSlotsShareABatch(t *testing.T) {
	t.Setenv("SHIM_SERVER_ARGS", os.Getenv("SHIM_SERVER_ARGS")+" --device none")
	ts := shimOn(t, patchedServer(t), gguf.DefaultTiny(), chunkArgs...)
	u := ts.upstream(t)
	native, ok := u.scorer.(*nativeScorer)
	if !ok {
		t.Fatalf("scorer is %q, want the native scorer", u.scorer.Name())
	}
	words := strings.Fields(scoringPrompts()["long"])
	slices.Reverse(words)
	texts := []string{scoringPrompts()["long"], strings.Join(words, " ")}
	tops := []int{1, 5}
	ids := make([][]int, 2)
	got := make([][]Row, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k := range 2 {
		ids[k] = ts.tokenize(t, texts[k], true)
		slot, err := u.acquire(context.Background(), time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer u.release(slot, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[k], errs[k] = native.Score(context.Background(), slot, ids[k], echoPositions(len(ids[k])), tops[k])
		}()
	}
	wg.Wait()
	forcing := &forcingScorer{u: u}
	for k := range 2 {
		if errs[k] != nil {
			t.Fatalf("prompt %d: %v", k, errs[k])
		}
		want, err := forcing.Score(context.Background(), 0, ids[k], echoPositions(len(ids[k])), tops[k])
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if len(want[i].Top) != tops[k] {
				t.Fatalf("prompt %d row %d: %d forced alternatives, want %d", k, i, len(want[i].Top), tops[k])
			}
		}
		t.Logf("prompt %d, top %d:", k, tops[k])
		compareScores(t, ids[k], echoPositions(len(ids[k])), got[k], want)
	}
}

// compareScores checks the native scorer's rows against teacher forcing's
// for the same positions: the same token ids and, within nativeTol, the
// same logprobs for the token and at each rank of the alternatives.
func compareScores(t *testing.T, ids, positions []int, got, want []Row) {
	t.Helper()
	worst := 0.0
	for i, p := range positions {
		g, w := got[i], want[i]
		if g.ID != ids[p] || w.ID != ids[p] {
			t.Fatalf("position %d: row ids native %d, forcing %d, want %d", p, g.ID, w.ID, ids[p])
		}
		worst = max(worst, math.Abs(g.Logprob-w.Logprob))
		if len(g.Top) != len(w.Top) {
			t.Fatalf("position %d: %d native alternatives, %d forced", p, len(g.Top), len(w.Top))
		}
		for j := range g.Top {
			// Near-ties may swap places; the values at each rank must agree.
			worst = max(worst, math.Abs(g.Top[j].Logprob-w.Top[j].Logprob))
			if g.Top[j].ID != w.Top[j].ID && math.Abs(g.Top[j].Logprob-w.Top[j].Logprob) > nativeTol {
				t.Errorf("position %d rank %d: native token %d (%g), forced %d (%g)", p, j, g.Top[j].ID, g.Top[j].Logprob, w.Top[j].ID, w.Top[j].Logprob)
			}
		}
	}
	t.Logf("%d positions, largest difference %.2g", len(positions), worst)
	if worst > nativeTol {
		t.Errorf("native and teacher-forced logprobs differ by up to %g, want <= %g", worst, nativeTol)
	}
}

// TestNativeEchoThroughTheShim sends the request lm-evaluation-harness
// sends and checks the echoed rows against teacher forcing.
func TestNativeEchoThroughTheShim(t *testing.T) {
	ts := shimOn(t, patchedServer(t), gguf.DefaultTiny(), chunkArgs...)
	u := ts.upstream(t)
	ids := ts.tokenize(t, scoringPrompts()["long"], false)
	out := ts.complete(t, map[string]any{"prompt": [][]int{ids}, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": true})
	lp := out.Choices[0].Logprobs
	if lp == nil || len(lp.TokenLogprobs) != len(ids)+1 {
		t.Fatalf("echo gave %v rows, want %d", lp, len(ids)+1)
	}
	forcing := &forcingScorer{u: u}
	for _, p := range []int{1, 2, 63, 64, 65, 150, len(ids) - 1} {
		rows, err := forcing.Score(context.Background(), 0, ids, []int{p}, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := lp.TokenLogprobs[p]
		if got == nil || math.Abs(*got-rows[0].Logprob) > nativeTol {
			t.Errorf("row %d: echo %s, teacher forcing %g", p, fmtp(got), rows[0].Logprob)
		}
	}
}

// TestFlatPromptLogprobsAreTheFullFormsNumbers asks the series build for the
// same prompt's logprobs in the full form (0002) and the flat one (0008), with
// 0 and 1 alternatives (computed in the graph, 0006) and 3 (on the host, 0002),
// over a prompt longer than a ubatch: every float and id must be the same, no
// piece may be sent, and the shim must ask for the flat form. The flat form's
// arrays as base64 (0009) hold the same values, in a shorter answer.
func TestFlatPromptLogprobsAreTheFullFormsNumbers(t *testing.T) {
	ts := shimOn(t, patchedServer(t), gguf.DefaultTiny(), chunkArgs...)
	u := ts.upstream(t)
	if !u.info.PromptLogprobsFlat || !u.info.PromptLogprobsBase64 {
		t.Fatalf("the series build advertises prompt_logprobs_flat %v (patch 0008) and prompt_logprobs_base64 %v (0009) in /props, want both", u.info.PromptLogprobsFlat, u.info.PromptLogprobsBase64)
	}
	ids := ts.tokenize(t, scoringPrompts()["long"]+" "+scoringPrompts()["multi-byte"], true)
	ctx := context.Background()
	for _, top := range []int{0, 1, 3} {
		ask := func(flat, packed bool) (*llamaserver.Completion, []byte) {
			req := &llamaserver.PromptLogprobsRequest{Prompt: ids, NPredict: 1, PromptLogprobs: top, TopK: 1, Samplers: []string{"top_k"},
				IDSlot: 0, ResponseFields: []string{"prompt_probabilities", "prompt_logprobs_flat"}, Flat: flat, Base64: packed}
			body, _ := json.Marshal(req)
			resp, err := u.do(ctx, http.MethodPost, "/completion", body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var out llamaserver.Completion
			if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil {
				t.Fatalf("prompt_logprobs %d, flat %v: status %d: %.300s", top, flat, resp.StatusCode, data)
			}
			return &out, data
		}
		full, _ := ask(false, false)
		flat, raw := ask(true, false)
		packed, packedRaw := ask(true, true)
		if !bytes.Contains(packedRaw, []byte(`"encoding":"base64"`)) || !reflect.DeepEqual(packed.PromptFlat, flat.PromptFlat) {
			t.Errorf("prompt_logprobs %d: the base64 form (0009) gives other values than the flat arrays: %.300s", top, packedRaw)
		}
		if len(packedRaw) >= len(raw) && top > 0 {
			t.Errorf("prompt_logprobs %d: the base64 answer has %d bytes, the flat arrays' %d", top, len(packedRaw), len(raw))
		}
		if full.PromptProbs == nil || full.PromptFlat != nil {
			t.Fatalf("prompt_logprobs %d without the flag: want prompt_probabilities only", top)
		}
		if flat.PromptFlat == nil || flat.PromptProbs != nil {
			t.Fatalf("prompt_logprobs %d with prompt_logprobs_flat: want the flat form only: %.300s", top, raw)
		}
		f, probs := flat.PromptFlat, *full.PromptProbs
		if f.NTop != top || len(f.Logprobs) != len(ids)-1 || len(f.TopIDs) != top*(len(ids)-1) || len(f.TopLogprobs) != len(f.TopIDs) {
			t.Fatalf("prompt_logprobs %d: flat n_top %d with %d logprobs, %d top ids, %d top logprobs for %d tokens", top, f.NTop, len(f.Logprobs), len(f.TopIDs), len(f.TopLogprobs), len(ids))
		}
		diffs := 0
		for k, pr := range probs {
			same := pr.ID == ids[k+1] && pr.Logprob == f.Logprobs[k] && len(pr.Top) == top
			for j := 0; same && j < top; j++ {
				same = pr.Top[j].ID == f.TopIDs[k*top+j] && pr.Top[j].Logprob == f.TopLogprobs[k*top+j]
			}
			if !same && diffs < 5 {
				t.Errorf("prompt_logprobs %d, position %d: full %+v, flat %g top %v %v", top, k+1, pr, f.Logprobs[k], f.TopIDs[k*top:(k+1)*top], f.TopLogprobs[k*top:(k+1)*top])
			}
			if !same {
				diffs++
			}
		}
		if bytes.Contains(raw, []byte(`"token"`)) || bytes.Contains(raw, []byte(`"bytes"`)) {
			t.Errorf("prompt_logprobs %d: the flat answer carries pieces: %.300s", top, raw)
		}
	}
	// the shim's own scorer takes the flat form and gives the full form's rows
	native := u.scorer.(*nativeScorer)
	rows, err := native.Score(ctx, 0, ids, echoPositions(len(ids)), 1)
	if err != nil {
		t.Fatal(err)
	}
	u.info.PromptLogprobsBase64 = false
	arrays, err := native.Score(ctx, 0, ids, echoPositions(len(ids)), 1)
	if err != nil {
		t.Fatal(err)
	}
	u.info.PromptLogprobsFlat = false
	want, err := native.Score(ctx, 0, ids, echoPositions(len(ids)), 1)
	u.info.PromptLogprobsFlat, u.info.PromptLogprobsBase64 = true, true
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows, want) || !reflect.DeepEqual(arrays, want) {
		t.Errorf("native scorer: rows from the flat form (base64 %v, arrays %v) differ from the full form's", reflect.DeepEqual(rows, want), reflect.DeepEqual(arrays, want))
	}
}

// TestScoringPromptsStayOutOfThePromptCache: with the prompt cache on (llama-server's
// default --cache-ram) and two slots, a scoring request's prompt is never copied into it
// when another request starts (0008), while a plain completion's prompt still is. Read
// from llama-server's own log (-lv 4 names every prompt it saves, with its length).
func TestScoringPromptsStayOutOfThePromptCache(t *testing.T) {
	model := filepath.Join(t.TempDir(), "model.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	log := &testwriter.Buffer{}
	ts, err := startShim(patchedServer(t), model, Options{ServerArgs: []string{promptLogprobsArg, "-lv", "4"}, ServerOutput: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.stop)
	u := ts.upstream(t)
	ctx := context.Background()
	seq := func(from, n int) []int {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = 3 + (from+i)%400
		}
		return ids
	}
	// a scoring prompt of 101 tokens on slot 0, then a plain one of 61 on slot 1, then
	// two more on alternating slots: each start saves the other, idle slot
	if _, err := u.scorer.Score(ctx, 0, seq(0, 101), echoPositions(101), 1); err != nil {
		t.Fatal(err)
	}
	for i, slot := range []int{1, 0, 1} {
		if _, err := u.complete(ctx, &llamaserver.CompletionRequest{Prompt: seq(1000+100*i, 61), NPredict: 1, CachePrompt: true, IDSlot: slot}); err != nil {
			t.Fatal(err)
		}
	}
	saved := regexp.MustCompile(`saving prompt with length (\d+)`).FindAllStringSubmatch(log.String(), -1)
	var lengths []string
	for _, m := range saved {
		lengths = append(lengths, m[1])
	}
	if slices.Contains(lengths, "101") {
		t.Errorf("the scoring prompt was saved to the prompt cache (saved lengths %v)", lengths)
	}
	if !slices.Contains(lengths, "61") {
		t.Errorf("no plain prompt was saved to the prompt cache (saved lengths %v): the check cannot see saves", lengths)
	}
}

// TestPatchedServerKeepsPlainCompletions runs the same greedy completions
// on the patched and the unpatched llama-server of one commit: the
// tokens and their reported probabilities must be identical.
func TestPatchedServerKeepsPlainCompletions(t *testing.T) {
	patched := shimOn(t, patchedServer(t), gguf.DefaultTiny(), promptLogprobsArg)
	plain := shimOn(t, unpatchedServer(t), gguf.DefaultTiny())
	if plain.upstream(t).info.PromptLogprobs {
		t.Fatal("LLBUILD_UNPATCHED_LLAMA_SERVER advertises prompt_logprobs: it is a patched build")
	}
	prompts := []any{"hello world", "the capital of france is", strings.Repeat("the quick brown fox ", 60), []int{1, 300, 301, 302}}
	for i, prompt := range prompts {
		req := map[string]any{"prompt": prompt, "n_predict": 48, "temperature": 0, "n_probs": 3, "cache_prompt": false, "return_tokens": true,
			"response_fields": []string{"content", "tokens", "completion_probabilities"}}
		a, b := rawComplete(t, patched.upstream(t), req), rawComplete(t, plain.upstream(t), req)
		var ta, tb struct {
			Tokens []int `json:"tokens"`
		}
		json.Unmarshal(a, &ta)
		json.Unmarshal(b, &tb)
		if len(ta.Tokens) == 0 || !slices.Equal(ta.Tokens, tb.Tokens) {
			t.Errorf("prompt %d: patched tokens %v, unpatched %v", i, ta.Tokens, tb.Tokens)
		}
		if string(a) != string(b) {
			t.Errorf("prompt %d: answers differ:\npatched   %.400s\nunpatched %.400s", i, a, b)
		}
	}
}

// rawComplete posts a native /completion and returns the answer's bytes.
func rawComplete(t testing.TB, u *upstream, req map[string]any) []byte {
	t.Helper()
	var out json.RawMessage
	if err := u.postJSON(context.Background(), "/completion", req, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPromptLogprobsRefusals checks the patched server's answers to
// requests it cannot serve.
func TestPromptLogprobsRefusals(t *testing.T) {
	ts := shimOn(t, patchedServer(t), gguf.DefaultTiny(), promptLogprobsArg)
	u := ts.upstream(t)
	for name, req := range map[string]map[string]any{
		"n_cmpl above 1": {"prompt": "hello", "n_predict": 1, "prompt_logprobs": 1, "n_cmpl": 2},
		"negative top N": {"prompt": "hello", "n_predict": 1, "prompt_logprobs": -2},
		"not a number":   {"prompt": "hello", "n_predict": 1, "prompt_logprobs": "all"},
	} {
		body, _ := json.Marshal(req)
		resp, err := u.do(context.Background(), http.MethodPost, "/completion", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, resp.StatusCode)
		}
	}
}

// TestPromptLogprobsNeedTheOption starts the patched llama-server without
// --prompt-logprobs: it reserves no extra logits, does not advertise the
// capability, refuses such requests with a hint, and the shim scores by
// teacher forcing.
func TestPromptLogprobsNeedTheOption(t *testing.T) {
	ts := shimOn(t, patchedServer(t), gguf.DefaultTiny())
	u := ts.upstream(t)
	if u.info.PromptLogprobs {
		t.Error("/props advertises prompt_logprobs without --prompt-logprobs")
	}
	if got := u.scorer.Name(); got != "teacher-forcing" {
		t.Errorf("scorer is %q, want teacher-forcing", got)
	}
	body, _ := json.Marshal(map[string]any{"prompt": "hello world", "n_predict": 1, "prompt_logprobs": 1})
	resp, err := u.do(context.Background(), http.MethodPost, "/completion", body)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "--prompt-logprobs") {
		t.Errorf("prompt_logprobs without the option: status %d, %s; want 400 naming --prompt-logprobs", resp.StatusCode, msg)
	}
}

// BenchmarkPromptLogprobs scores every position of a 128- and a 512-token
// prompt on a patched llama-server, natively and by teacher forcing (the
// fallback for unpatched servers), and compares both with one plain
// prefill of the same prompt, alternating the three in each iteration.
// Reported: medians in ms and the ratios to the prefill (goal for the
// native path: <= 1.2). "echo" is the request lm-evaluation-harness sends
// through the shim (echo, logprobs 1, max_tokens 1); "native" and
// "forcing" are the scorers alone; "prefill" is /completion with
// n_predict 1 and no prompt cache. SHIM_BENCH_MODEL=mid or 1b picks a
// bigger model, SHIM_BENCH_VOCAB=32000 pads its vocabulary to that many
// tokens (the softmax over the vocabulary at every position is the native
// path's own cost, small with the tiny model's 519 tokens) and
// SHIM_SERVER_ARGS adds llama-server arguments ("-t 2", "-ngl 99").
// SHIM_BENCH_ONLY=native sends native scorer requests alone, =echo echo
// requests through the shim alone, for a profiler.
// With a server that has the flat form (0008), "echo_full_form" is the echo
// request through the full form, in the same run.
// The echo request's time is split (medians, ms): the request the shim makes
// for it sent straight to llama-server gives "compute" (its timings: prompt
// and the generated token), "answer" (until the answer's headers arrive, less
// compute: building and writing the JSON, the request's parsing and queueing;
// "prefill_answer" is the same for the plain prefill, with its body read),
// "transfer" (reading the body); "echo_less_direct" is echo end to end less that
// request. From echo's own Server-Timing header: "shim" is the shim's own work
// (decoding llama-server's answer included), "shim_waited" its calls to
// llama-server (sending to the answer's last byte), "shim_slot" its wait for a
// free slot and "client_hop" the rest (the client's connection to the shim).
// Echo's time ends at the answer's last byte (decoding it is the client's). Each kind of request is sent SHIM_BENCH_WARM (2) times
// and then SHIM_BENCH_REPEAT (3) times in a row, which count, so that CUDA graph
// captures fall alike on each kind (every kind measured replayed; with graphs off,
// GGML_CUDA_DISABLE_GRAPHS=1, as each new prompt shape runs), and every request
// goes to the slot the shim gives the prompt.
func BenchmarkPromptLogprobs(b *testing.B) {
	gcAsServed(b)
	server := patchedServer(b)
	vocab, _ := strconv.Atoi(os.Getenv("SHIM_BENCH_VOCAB"))
	model := benchModelFile(b, benchModelOptions(), vocab)
	ts, err := startShim(server, model, Options{ServerArgs: []string{promptLogprobsArg}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ts.stop)
	u := ts.upstream(b)
	native, ok := u.scorer.(*nativeScorer)
	if !ok {
		b.Fatalf("scorer is %q, want the native scorer", u.scorer.Name())
	}
	forcing := &forcingScorer{u: u}
	words := strings.Fields(scoringPrompts()["long"])
	var text []string
	for len(text) < 1200 {
		text = append(text, words...)
	}
	all := ts.tokenize(b, strings.Join(text, " "), true)
	for _, n := range []int{128, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ids := all[:n]
			positions := echoPositions(n)
			ctx := context.Background()
			var prefill, echo, echoFull, nat, forc, prefillSrv, nativeSrv, direct, compute, predicted, answer, transfer []time.Duration
			var shimOwn, llamaWait, slotWait, hops, prefillRest []time.Duration
			echoBody := map[string]any{"prompt": [][]int{ids}, "temperature": 0, "max_tokens": 1, "logprobs": 1, "echo": true}
			reps, warm := 3, 2
			if r, err := strconv.Atoi(os.Getenv("SHIM_BENCH_REPEAT")); err == nil && r > 0 {
				reps = r
			}
			if w, err := strconv.Atoi(os.Getenv("SHIM_BENCH_WARM")); err == nil && w >= 0 {
				warm = w
			}
			// The slot the shim gives this prompt (the pool's choice by shared prefix): every
			// request here goes there, as one client's requests would. Another slot is other
			// KV buffers, which a captured CUDA graph does not replay.
			key := slotKey(ids, "")
			slot, err := u.acquire(ctx, time.Minute, key)
			if err != nil {
				b.Fatal(err)
			}
			u.release(slot, key)
			directBody := echoRequestBody(b, u, echoBody, slot)
			if os.Getenv("SHIM_BENCH_ONLY") == "echo" {
				// for a profiler: echo requests through the shim alone
				for b.Loop() {
					ts.timedPost(b, "/v1/completions", echoBody)
				}
				return
			}
			if os.Getenv("SHIM_BENCH_ONLY") == "native" {
				// for a profiler: native scorer requests alone
				for b.Loop() {
					if _, err := native.Score(ctx, slot, ids, positions, 1); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			for b.Loop() {
				// Each kind of request runs warm + reps times in a row and the last reps count:
				// CUDA's graphs are captured on the second decode of one shape and replayed from
				// the third, so a kind measured right after another kind would pay for a capture
				// the other did not; with warm 2 every kind is measured replayed.
				for range warm + reps {
					t0 := time.Now()
					resp, err := u.complete(ctx, &llamaserver.CompletionRequest{Prompt: ids, NPredict: 1, CachePrompt: false, IDSlot: slot, ReturnTokens: true})
					if err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					prefill = append(prefill, d)
					prefillSrv = append(prefillSrv, serverTime(b, resp))
					prefillRest = append(prefillRest, d-time.Duration((resp.Timings.PromptMS+resp.Timings.PredictedMS)*float64(time.Millisecond)))
				}
				for range warm + reps {
					// the native request alone, for llama-server's own prompt time
					one := 1
					resp, err := u.complete(ctx, &llamaserver.CompletionRequest{Prompt: ids, NPredict: 1, CachePrompt: false, IDSlot: slot, PromptLogprobs: &one})
					if err != nil {
						b.Fatal(err)
					}
					nativeSrv = append(nativeSrv, serverTime(b, resp))
				}
				for range warm + reps {
					// the request the shim makes for echo, straight to llama-server
					t0 := time.Now()
					hresp, err := u.do(ctx, http.MethodPost, "/completion", directBody)
					if err != nil {
						b.Fatal(err)
					}
					head := time.Since(t0)
					data, err := io.ReadAll(hresp.Body)
					hresp.Body.Close()
					all := time.Since(t0)
					var dresp llamaserver.Completion
					if err != nil || hresp.StatusCode != http.StatusOK || json.Unmarshal(data, &dresp) != nil || dresp.Timings == nil {
						b.Fatalf("echo's request to llama-server: status %d, %v: %.200s", hresp.StatusCode, err, data)
					}
					c := time.Duration((dresp.Timings.PromptMS + dresp.Timings.PredictedMS) * float64(time.Millisecond))
					direct, compute, answer, transfer = append(direct, all), append(compute, c), append(answer, head-c), append(transfer, all-head)
					predicted = append(predicted, time.Duration(dresp.Timings.PredictedMS*float64(time.Millisecond)))
				}
				for range warm + reps {
					// to the answer's last byte: decoding it is the client's work
					raw, d, h := ts.timedPost(b, "/v1/completions", echoBody)
					echo = append(echo, d)
					own, waited, inSlot := serverTimingMS(b, h, "shim"), serverTimingMS(b, h, "llama"), serverTimingMS(b, h, "slot")
					shimOwn, llamaWait, slotWait, hops = append(shimOwn, own), append(llamaWait, waited), append(slotWait, inSlot), append(hops, d-own-waited-inSlot)
					var out cmplResp
					if err := json.Unmarshal(raw, &out); err != nil {
						b.Fatal(err)
					}
					if lp := out.Choices[0].Logprobs; lp == nil || len(lp.TokenLogprobs) != n+1 {
						b.Fatalf("echo gave %d rows, want %d", len(lp.TokenLogprobs), n+1)
					}
				}
				if flat := u.info.PromptLogprobsFlat; flat {
					// the same through the full form of 0002, for the same run's comparison
					u.info.PromptLogprobsFlat = false
					for range warm + reps {
						_, d, _ := ts.timedPost(b, "/v1/completions", echoBody)
						echoFull = append(echoFull, d)
					}
					u.info.PromptLogprobsFlat = flat
				}
				for range warm + reps {
					t0 := time.Now()
					if _, err := native.Score(ctx, slot, ids, positions, 1); err != nil {
						b.Fatal(err)
					}
					nat = append(nat, time.Since(t0))
				}
				t0 := time.Now()
				if _, err := forcing.Score(ctx, slot, ids, positions, 1); err != nil {
					b.Fatal(err)
				}
				forc = append(forc, time.Since(t0))
			}
			// the medians of the counted requests: each kind's come in runs of warm + reps
			ms := func(d []time.Duration) float64 {
				var kept []time.Duration
				for i, x := range d {
					if i%(warm+reps) >= warm {
						kept = append(kept, x)
					}
				}
				return float64(median(kept).Microseconds()) / 1000
			}
			forcingMS := float64(median(forc).Microseconds()) / 1000
			p := ms(prefill)
			b.ReportMetric(p, "prefill_ms")
			b.ReportMetric(ms(echo), "echo_ms")
			b.ReportMetric(ms(nat), "native_ms")
			b.ReportMetric(forcingMS, "forcing_ms")
			b.ReportMetric(ms(prefillSrv), "prefill_server_ms")
			b.ReportMetric(ms(nativeSrv), "native_server_ms")
			b.ReportMetric(ms(compute), "split_compute_ms")
			b.ReportMetric(ms(predicted), "split_compute_predicted_ms")
			b.ReportMetric(ms(direct), "direct_ms")
			b.ReportMetric(ms(answer), "split_answer_ms")
			b.ReportMetric(ms(prefillRest), "split_prefill_answer_ms")
			b.ReportMetric(ms(transfer), "split_transfer_ms")
			b.ReportMetric(ms(echo)-ms(direct), "split_echo_less_direct_ms")
			b.ReportMetric(ms(shimOwn), "split_shim_ms")
			b.ReportMetric(ms(llamaWait), "split_shim_waited_ms")
			b.ReportMetric(ms(slotWait), "split_shim_slot_ms")
			b.ReportMetric(ms(hops), "split_client_hop_ms")
			b.ReportMetric(ms(echo)/p, "echo/prefill")
			if len(echoFull) > 0 {
				b.ReportMetric(ms(echoFull)/p, "echo_full_form/prefill")
			}
			b.ReportMetric(ms(nat)/p, "native/prefill")
			b.ReportMetric(forcingMS/p, "forcing/prefill")
		})
	}
}

// timedPost posts v to the shim and returns the answer of status 200, the
// time from sending to its last byte and the answer's headers.
func (ts *testShim) timedPost(b *testing.B, path string, v any) ([]byte, time.Duration, http.Header) {
	b.Helper()
	body, _ := json.Marshal(v)
	t0 := time.Now()
	resp, err := http.Post(ts.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: status %d, %v: %.300s", path, resp.StatusCode, err, data)
	}
	return data, d, resp.Header
}

// lmEvalEchoBody is lm-eval's loglikelihood request for an n-token prompt of token ids (echo,
// logprobs 1, max_tokens 1): the vocabulary's first pieces, byte and control tokens among them.
func lmEvalEchoBody(n int) []byte {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = 3 + i%50
	}
	body, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": 1, "echo": true, "logprobs": 1, "temperature": 0})
	return body
}

// serverTimingMS reads one metric's duration from a Server-Timing header.
func serverTimingMS(b *testing.B, h http.Header, name string) time.Duration {
	b.Helper()
	for _, m := range strings.Split(h.Get("Server-Timing"), ",") {
		parts := strings.Split(strings.TrimSpace(m), ";")
		if parts[0] != name {
			continue
		}
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(p, "dur="); ok {
				ms, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("Server-Timing %q: %v", h.Get("Server-Timing"), err)
				}
				return time.Duration(ms * float64(time.Millisecond))
			}
		}
	}
	b.Fatalf("Server-Timing %q has no %s", h.Get("Server-Timing"), name)
	return 0
}

// echoRequestBody is the body of the request the shim sends llama-server for
// the completion request body (one prompt, no streaming).
func echoRequestBody(b *testing.B, u *upstream, body map[string]any, slot int) []byte {
	b.Helper()
	raw, _ := json.Marshal(body)
	req, err := parseCompletionRequest(raw)
	if err != nil {
		b.Fatal(err)
	}
	j := &job{u: u, req: req, p: req.Prompts[0], ids: req.Prompts[0].IDs, slot: slot}
	data, err := json.Marshal(j.generationRequest(j.echoInOneRequest()))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// benchModelOptions is the model SHIM_BENCH_MODEL names: the tiny one, "mid"
// (512 x 8) or "1b" (2048 x 16, about 0.8 billion parameters).
func benchModelOptions() gguf.TinyOptions {
	o := gguf.DefaultTiny()
	switch os.Getenv("SHIM_BENCH_MODEL") {
	case "mid":
		o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-mid-llama", 512, 8, 8, 8, 1536
	case "1b":
		o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-1b-llama", 2048, 16, 16, 16, 5632
	}
	return o
}

// benchModelFile writes the model o describes with its vocabulary padded to
// vocab tokens, or with SHIM_BENCH_GGUF set reuses that file, written on the
// first run (a 1B model takes a while to write).
func benchModelFile(b *testing.B, o gguf.TinyOptions, vocab int) string {
	b.Helper()
	model := os.Getenv("SHIM_BENCH_GGUF")
	if model == "" {
		model = filepath.Join(b.TempDir(), "bench.gguf")
	}
	if _, err := os.Stat(model); err != nil {
		if err := writeBenchModel(model, o, vocab); err != nil {
			b.Fatal(err)
		}
	}
	return model
}

// serverTime is llama-server's prompt processing time for one answer: the
// decodes and, with prompt_logprobs, the prompt probabilities, but not
// the response's JSON nor the HTTP around it.
func serverTime(b *testing.B, resp *llamaserver.Completion) time.Duration {
	b.Helper()
	if resp.Timings == nil {
		b.Fatal("llama-server's answer has no timings")
	}
	return time.Duration(resp.Timings.PromptMS * float64(time.Millisecond))
}

// writeBenchModel writes the tiny llama o describes with its vocabulary
// padded to vocab tokens, if that is more: pieces of a character that no
// text here contains, so that tokenization does not change, with random
// embedding and output rows like the others'.
func writeBenchModel(path string, o gguf.TinyOptions, vocab int) error {
	b, err := gguf.TinyLlama(o)
	if err != nil {
		return err
	}
	tokens, scores, types := gguf.TinyVocab(o.Merges)
	if vocab > len(tokens) {
		for i := len(tokens); i < vocab; i++ {
			tokens = append(tokens, fmt.Sprintf("\u2400%d", i))
			scores = append(scores, -1e9)
			types = append(types, 1) // normal
		}
		b.Set("llama.vocab_size", gguf.Uint32(uint32(vocab)))
		b.Set("tokenizer.ggml.tokens", gguf.Array(tokens))
		b.Set("tokenizer.ggml.scores", gguf.Array(scores))
		b.Set("tokenizer.ggml.token_type", gguf.Array(types))
		rng := rand.New(rand.NewPCG(o.Seed, uint64(vocab)))
		for i, t := range b.Tensors {
			scale := map[string]float64{"token_embd.weight": 1, "output.weight": 0.5}[t.Name]
			if scale == 0 {
				continue
			}
			n := t.Dims[0] * uint64(vocab)
			data := make([]byte, 2*n)
			for j := uint64(0); j < n; j++ {
				h := gguf.Float16(float32((rng.Float64()*2 - 1) * scale))
				data[2*j], data[2*j+1] = byte(h), byte(h>>8)
			}
			b.Tensors[i] = gguf.Tensor{Name: t.Name, Type: gguf.TensorF16, Dims: []uint64{t.Dims[0], uint64(vocab)}, Data: data}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := b.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BenchmarkEchoShimTime sends lm-eval's loglikelihood request (a token-id
// prompt of 128 and 512 tokens, echo, logprobs 1, max_tokens 1) through a shim
// in front of the patched llama-server (native prompt logprobs in the flat
// base64 form) with a 32,000-token vocabulary, and reports the mean of its
// Server-Timing figures: the shim's own work and its call of llama-server, and
// their ratio shim/llama. The prompt's tokens are the vocabulary's first
// pieces, byte and control tokens among them, which take every escape.
// SHIM_BENCH_MODEL picks a bigger model (benchModelOptions).
func BenchmarkEchoShimTime(b *testing.B) {
	gcAsServed(b)
	ts, err := startShim(patchedServer(b), benchModelFile(b, benchModelOptions(), 32000), Options{ServerArgs: []string{"-np", "1", promptLogprobsArg}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ts.stop)
	for _, n := range []int{128, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			body := lmEvalEchoBody(n)
			var shim, llama time.Duration
			for b.Loop() {
				resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				shim += serverTimingMS(b, resp.Header, "shim")
				llama += serverTimingMS(b, resp.Header, "llama")
			}
			b.ReportMetric(float64(shim.Microseconds())/float64(b.N), "shim_us")
			b.ReportMetric(float64(llama.Microseconds())/float64(b.N), "llama_us")
			b.ReportMetric(shim.Seconds()/llama.Seconds(), "shim/llama")
		})
	}
}
