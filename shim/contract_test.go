package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llbuild/llbuild/llamaserver"
)

// The tests in this file hold the shim to the completion and logprob
// contract (../shared/notes/contract.md) against a real llama-server.

type legacyLP struct {
	Tokens        []string          `json:"tokens"`
	TokenLogprobs []*float64        `json:"token_logprobs"`
	TopLogprobs   []json.RawMessage `json:"top_logprobs"`
	TextOffset    []int             `json:"text_offset"`
}

type cmplChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *legacyLP `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type cmplResp struct {
	Object  string       `json:"object"`
	Choices []cmplChoice `json:"choices"`
	Usage   *usage       `json:"usage"`
	Error   *errorObject `json:"error"`
}

// orderedTop reads a top_logprobs object keeping its key order.
func orderedTop(t testing.TB, raw json.RawMessage) (keys []string, vals []float64) {
	t.Helper()
	if string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		t.Fatalf("top_logprobs %s: %v", raw, err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		v, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		f, err := v.(json.Number).Float64()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		vals = append(vals, f)
	}
	return keys, vals
}

func (ts *testShim) complete(t testing.TB, req map[string]any) cmplResp {
	t.Helper()
	var out cmplResp
	if st := ts.post(t, "/v1/completions", req, &out); st != http.StatusOK {
		t.Fatalf("POST /v1/completions %v: status %d, error %+v", req, st, out.Error)
	}
	return out
}

func (ts *testShim) tokenize(t testing.TB, text string, addSpecial bool) []int {
	t.Helper()
	var out struct {
		Tokens []int `json:"tokens"`
	}
	if st := ts.post(t, "/tokenize", map[string]any{"prompt": text, "add_special_tokens": addSpecial}, &out); st != 200 {
		t.Fatalf("POST /tokenize: status %d", st)
	}
	return out.Tokens
}

func (ts *testShim) upstream(t testing.TB) *upstream {
	t.Helper()
	u, err := ts.srv.current()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// idsOf reads "token_id:N" names (return_tokens_as_token_ids).
func idsOf(t testing.TB, tokens []string) []int {
	t.Helper()
	ids := make([]int, len(tokens))
	for i, s := range tokens {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "token_id:"))
		if err != nil {
			t.Fatalf("token %q is not token_id:N", s)
		}
		ids[i] = n
	}
	return ids
}

// directLogprob reads the logprob of seq[p] given seq[:p] from the whole
// distribution llama-server reports at that position, forcing the
// vocabulary's safe token rather than seq[p].
func directLogprob(t testing.TB, u *upstream, seq []int, p int) float64 {
	t.Helper()
	one := 1
	resp, err := u.complete(context.Background(), &llamaserver.CompletionRequest{
		Prompt: seq[:p], NPredict: 1, NProbs: u.vocab.size(), Temperature: new(float64),
		TopK: &one, Samplers: []string{"top_k"}, LogitBias: [][2]float64{{float64(u.vocab.safe), forcingBias}},
		CachePrompt: false, IDSlot: -1, ReturnTokens: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Probs) != 1 {
		t.Fatalf("direct distribution at %d: %d probability entries", p, len(resp.Probs))
	}
	for _, a := range resp.Probs[0].Top {
		if a.ID == seq[p] {
			return a.Logprob
		}
	}
	t.Fatalf("token %d not in the full distribution", seq[p])
	return 0
}

const tol = 2e-3

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

// byteBias makes the tiny model generate byte-fallback tokens, among them
// lead bytes whose pieces are incomplete UTF-8; a logit bias changes what
// is sampled, not the logprobs reported.
func byteBias(t testing.TB, u *upstream) map[string]float64 {
	t.Helper()
	bias := map[string]float64{}
	for s, id := range u.vocab.fragments {
		if len(s) == 1 && s[0] == 0xE4 {
			bias[strconv.Itoa(id)] = 14
		}
		if len(s) == 1 && (s[0] == 0xB8 || s[0] == 0x96) {
			bias[strconv.Itoa(id)] = 10
		}
	}
	if len(bias) != 3 {
		t.Fatalf("vocabulary lacks byte tokens <0xE4> <0xB8> <0x96>: %v", bias)
	}
	return bias
}

// evenByteBias biases the three bytes of 世 (E4 B8 96) alike.
func evenByteBias(t testing.TB, u *upstream, b float64) map[string]float64 {
	t.Helper()
	bias := map[string]float64{}
	for s, id := range u.vocab.fragments {
		if len(s) == 1 && (s[0] == 0xE4 || s[0] == 0xB8 || s[0] == 0x96) {
			bias[strconv.Itoa(id)] = b
		}
	}
	return bias
}

func TestGreedyLogprobsEqualEchoOfTheSameTokens(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	for _, tc := range []struct {
		name string
		bias bool
	}{{"plain text", false}, {"byte-fallback tokens", true}} {
		t.Run(tc.name, func(t *testing.T) {
			prompt := ts.tokenize(t, "the answer is", true)
			req := map[string]any{"prompt": prompt, "max_tokens": 10, "temperature": 0, "logprobs": 5, "return_tokens_as_token_ids": true}
			if tc.bias {
				req["logit_bias"] = byteBias(t, u)
			}
			gen := ts.complete(t, req).Choices[0]
			genIDs := idsOf(t, gen.Logprobs.Tokens)
			if len(genIDs) == 0 {
				t.Fatal("no tokens generated")
			}
			if tc.bias {
				fragments := 0
				for _, id := range genIDs {
					if !u.vocab.forceable(id) {
						fragments++
					}
				}
				if fragments == 0 {
					t.Fatalf("generation %v has no incomplete-UTF-8 token; the test does not cover them", genIDs)
				}
			}
			echo := ts.complete(t, map[string]any{"prompt": append(slices.Clone(prompt), genIDs...), "max_tokens": 0, "echo": true, "logprobs": 5, "return_tokens_as_token_ids": true}).Choices[0]
			if got, want := len(echo.Logprobs.Tokens), len(prompt)+len(genIDs); got != want {
				t.Fatalf("echo rows = %d, want %d", got, want)
			}
			for k, id := range genIDs {
				row := len(prompt) + k
				g, e := gen.Logprobs.TokenLogprobs[k], echo.Logprobs.TokenLogprobs[row]
				if g == nil || e == nil {
					t.Fatalf("token %d (id %d): generated logprob %v, echo logprob %v; want both", k, id, g, e)
				}
				if !near(*g, *e) {
					t.Errorf("token %d (id %d): generated logprob %v, echo %v", k, id, *g, *e)
				}
			}
		})
	}
}

func TestTopLogprobsAreSortedHoldTheChosenTokenAndSumBelowOne(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	for _, n := range []int{0, 1, 5, 20} {
		for _, bias := range []bool{false, true} {
			req := map[string]any{"prompt": "what is the capital of france", "max_tokens": 6, "temperature": 0, "logprobs": n, "echo": true}
			if bias {
				req["logit_bias"] = byteBias(t, u)
			}
			lp := ts.complete(t, req).Choices[0].Logprobs
			for i := range lp.Tokens {
				keys, vals := orderedTop(t, lp.TopLogprobs[i])
				if i == 0 {
					if lp.TokenLogprobs[0] != nil || keys != nil {
						t.Errorf("logprobs %d: row 0 = %v %v, want null (nothing precedes it)", n, lp.TokenLogprobs[0], keys)
					}
					continue
				}
				chosen := lp.TokenLogprobs[i]
				if chosen == nil {
					t.Fatalf("logprobs %d row %d (%q): token_logprobs null", n, i, lp.Tokens[i])
				}
				if len(keys) > n+1 || len(keys) < 1 {
					t.Errorf("logprobs %d row %d: %d alternatives, want 1..%d", n, i, len(keys), n+1)
				}
				k := slices.Index(keys, lp.Tokens[i])
				if k < 0 {
					t.Fatalf("logprobs %d row %d: chosen %q missing from top_logprobs %v", n, i, lp.Tokens[i], keys)
				}
				if vals[k] != *chosen {
					t.Errorf("logprobs %d row %d: top_logprobs[%q] = %v, token_logprobs = %v; want the identical float", n, i, lp.Tokens[i], vals[k], *chosen)
				}
				sum := 0.0
				for j, v := range vals {
					sum += math.Exp(v)
					if j > 0 && v > vals[j-1] {
						t.Errorf("logprobs %d row %d: top_logprobs not sorted: %v", n, i, vals)
					}
				}
				if sum > 1+1e-5 {
					t.Errorf("logprobs %d row %d: probabilities sum to %v > 1", n, i, sum)
				}
			}
		}
	}
}

// TestLMEvalLocalCompletionsLoglikelihood sends the request
// lm-evaluation-harness's local-completions model sends to score a
// continuation and scores it the way lm-eval does.
func TestLMEvalLocalCompletionsLoglikelihood(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	ctxIDs := ts.tokenize(t, "Question: what is the capital of france? Answer:", false)
	contIDs := ts.tokenize(t, " paris is the capital", false)
	ids := append(slices.Clone(ctxIDs), contIDs...)
	out := ts.complete(t, map[string]any{
		"model": "tiny", "prompt": [][]int{ids}, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": true,
	})
	if len(out.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(out.Choices))
	}
	lp := out.Choices[0].Logprobs
	if got, want := len(lp.TokenLogprobs), len(ids)+1; got != want {
		t.Fatalf("rows = %d, want len(prompt)+1 = %d", got, want)
	}
	ctxlen := len(ctxIDs)
	sum, direct := 0.0, 0.0
	greedy := true
	for i := ctxlen; i < len(ids); i++ {
		sum += *lp.TokenLogprobs[i]
		direct += directLogprob(t, u, ids, i)
		_, vals := orderedTop(t, lp.TopLogprobs[i])
		if *lp.TokenLogprobs[i] != slices.Max(vals) {
			greedy = false
		}
	}
	if !near(sum, direct) {
		t.Errorf("sum(token_logprobs[ctxlen:-1]) = %v, direct computation %v", sum, direct)
	}
	t.Logf("continuation logprob %v (direct %v), greedy %v", sum, direct, greedy)
}

// TestLMEvalGGUFStringPrompt sends the request lm-evaluation-harness's gguf
// model type sends and finds the continuation by text_offset.
func TestLMEvalGGUFStringPrompt(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	for _, tc := range []struct{ context, continuation string }{
		{"the answer is", " yes"},
		{"Question: 世界 is what? Answer:", " the capital of france"},
		{"emoji 😀 then", " one two three"},
	} {
		out := ts.complete(t, map[string]any{"prompt": tc.context + tc.continuation, "logprobs": 10, "temperature": 0.0, "max_tokens": 1, "echo": true})
		ch := out.Choices[0]
		if !strings.HasPrefix(ch.Text, tc.context+tc.continuation) {
			t.Errorf("text %q does not start with the prompt %q", ch.Text, tc.context+tc.continuation)
		}
		lp := ch.Logprobs
		ctxLen := utf8.RuneCountInString(tc.context)
		idx := 0
		for lp.TextOffset[idx] < ctxLen {
			idx++
		}
		sum := 0.0
		for _, v := range lp.TokenLogprobs[idx : len(lp.TokenLogprobs)-1] {
			sum += *v
		}
		ids := ts.tokenize(t, tc.context+tc.continuation, true)
		ctxIDs := ts.tokenize(t, tc.context, true)
		if !slices.Equal(ids[:len(ctxIDs)], ctxIDs) {
			t.Logf("%q: the context tokenizes differently inside the prompt; skipping the direct sum", tc.context)
			continue
		}
		if idx != len(ctxIDs) {
			t.Errorf("%q: continuation found at row %d by text_offset, want row %d (offsets %v)", tc.context, idx, len(ctxIDs), lp.TextOffset)
		}
		direct := 0.0
		for i := len(ctxIDs); i < len(ids); i++ {
			direct += directLogprob(t, u, ids, i)
		}
		if !near(sum, direct) {
			t.Errorf("%q: continuation logprob by text_offset %v, direct %v", tc.context, sum, direct)
		}
	}
}

func TestReportedLogprobDoesNotDependOnTheForcedToken(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	seq := ts.tokenize(t, "the quick brown fox", true)
	p := len(seq) - 1
	target := seq[p]
	var others []int
	for id := range u.vocab.size() {
		if id != target && u.vocab.forceable(id) && len(others) < 3 {
			others = append(others, id)
		}
	}
	one := 1
	read := func(forced int) (float64, []llamaserver.TopProb) {
		resp, err := u.complete(context.Background(), &llamaserver.CompletionRequest{
			Prompt: seq[:p], NPredict: 1, NProbs: u.vocab.size(), Temperature: new(float64),
			TopK: &one, Samplers: []string{"top_k"}, LogitBias: [][2]float64{{float64(forced), forcingBias}},
			CachePrompt: true, IDSlot: 0, ReturnTokens: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Probs) != 1 || resp.Probs[0].ID != forced {
			t.Fatalf("forcing %d: got %+v", forced, resp.Tokens)
		}
		for _, a := range resp.Probs[0].Top {
			if a.ID == target {
				return a.Logprob, resp.Probs[0].Top
			}
		}
		t.Fatalf("target missing")
		return 0, nil
	}
	want, wantTop := read(target)
	for _, o := range others {
		got, gotTop := read(o)
		if got != want {
			t.Errorf("logprob of %d forcing %d = %v, forcing itself %v", target, o, got, want)
		}
		if !slices.Equal(gotTop[:20], wantTop[:20]) {
			t.Errorf("top 20 forcing %d differ from forcing %d", o, target)
		}
	}
}

type streamResult struct {
	text     string
	lp       legacyLP
	finish   string
	usage    *usage
	chunks   int
	usageNil int
}

// streamCompletion reads a streamed completion of one prompt, checking
// the framing: data lines, usage null on every chunk but the last when
// include_usage, then [DONE].
func (ts *testShim) streamCompletion(t testing.TB, req map[string]any) streamResult {
	t.Helper()
	req["stream"] = true
	body, _ := json.Marshal(req)
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var r streamResult
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		if done {
			t.Fatalf("data after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			cmplResp
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if chunk.Error != nil {
			t.Fatalf("stream error: %+v", chunk.Error)
		}
		r.chunks++
		if string(chunk.Usage) == "null" {
			r.usageNil++
		} else if chunk.Usage != nil {
			if len(chunk.Choices) != 0 {
				t.Errorf("usage chunk has %d choices, want none", len(chunk.Choices))
			}
			r.usage = &usage{}
			json.Unmarshal(chunk.Usage, r.usage)
		}
		for _, c := range chunk.Choices {
			r.text += c.Text
			if c.FinishReason != nil {
				r.finish = *c.FinishReason
			}
			if c.Logprobs != nil {
				r.lp.Tokens = append(r.lp.Tokens, c.Logprobs.Tokens...)
				r.lp.TokenLogprobs = append(r.lp.TokenLogprobs, c.Logprobs.TokenLogprobs...)
				r.lp.TopLogprobs = append(r.lp.TopLogprobs, c.Logprobs.TopLogprobs...)
				r.lp.TextOffset = append(r.lp.TextOffset, c.Logprobs.TextOffset...)
			}
		}
	}
	if !done {
		t.Fatal("stream ended without data: [DONE]")
	}
	return r
}

func TestStreamedAndNonStreamedAgreeTokenForToken(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	for _, tc := range []struct {
		name string
		req  map[string]any
	}{
		{"echo with logprobs", map[string]any{"prompt": "the quick brown fox", "echo": true, "logprobs": 3}},
		// Greedy: sixteen lead bytes, all held back by llama-server, so the
		// stream ends without them and the shim recovers the tail.
		{"byte-fallback tail", map[string]any{"prompt": "世界 is", "logprobs": 2, "logit_bias": byteBias(t, u)}},
		// Sampled with a seed (the same draws streamed or not): lead bytes
		// held back in the middle of the stream and sent with later tokens.
		{"byte-fallback middle", map[string]any{"prompt": "世界 is", "logprobs": 2, "logit_bias": evenByteBias(t, u, 8), "temperature": 1, "seed": 7, "max_tokens": 22}},
		{"stop string", map[string]any{"prompt": "one two three", "logprobs": 1, "stop": []string{"the"}}},
		{"no logprobs", map[string]any{"prompt": "hello world"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req["max_tokens"] == nil {
				tc.req["max_tokens"], tc.req["temperature"] = 16, 0
			}
			plain := ts.complete(t, tc.req).Choices[0]
			tc.req["stream_options"] = map[string]any{"include_usage": true}
			st := ts.streamCompletion(t, tc.req)
			if st.text != plain.Text {
				t.Errorf("streamed text %q, non-streamed %q", st.text, plain.Text)
			}
			if plain.FinishReason == nil || st.finish != *plain.FinishReason {
				t.Errorf("streamed finish_reason %q, non-streamed %v", st.finish, plain.FinishReason)
			}
			if st.usage == nil || st.usage.PromptTokensDetails == nil || st.usage.CompletionTokens == 0 {
				t.Errorf("streamed usage = %+v, want the full usage before [DONE]", st.usage)
			}
			if st.usageNil != st.chunks-1 {
				t.Errorf("%d of %d chunks have usage null, want all but the usage chunk", st.usageNil, st.chunks)
			}
			if plain.Logprobs == nil {
				return
			}
			t.Logf("tokens %q, finish %s", plain.Logprobs.Tokens, st.finish)
			if !slices.Equal(st.lp.Tokens, plain.Logprobs.Tokens) {
				t.Fatalf("streamed tokens %q, non-streamed %q", st.lp.Tokens, plain.Logprobs.Tokens)
			}
			if !slices.Equal(st.lp.TextOffset, plain.Logprobs.TextOffset) {
				t.Errorf("streamed text_offset %v, non-streamed %v", st.lp.TextOffset, plain.Logprobs.TextOffset)
			}
			for i := range st.lp.TokenLogprobs {
				a, b := st.lp.TokenLogprobs[i], plain.Logprobs.TokenLogprobs[i]
				if (a == nil) != (b == nil) || a != nil && !near(*a, *b) {
					t.Errorf("row %d (%q): streamed logprob %v, non-streamed %v", i, st.lp.Tokens[i], fmtp(a), fmtp(b))
				}
			}
		})
	}
}

func fmtp(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

func TestTextOffsetCountsCharactersOfTheText(t *testing.T) {
	ts := sharedShim(t)
	for _, prompt := range []string{"hello world", "世界 and 😀 é", "the answer is yes"} {
		ch := ts.complete(t, map[string]any{"prompt": prompt, "max_tokens": 4, "temperature": 0, "logprobs": 1, "echo": true}).Choices[0]
		if !strings.HasPrefix(ch.Text, prompt) {
			t.Fatalf("echo text %q does not start with %q", ch.Text, prompt)
		}
		runes := []rune(ch.Text)
		prev := 0
		for i, off := range ch.Logprobs.TextOffset {
			if off < prev || off > len(runes) {
				t.Errorf("%q: text_offset[%d] = %d after %d, text has %d characters", prompt, i, off, prev, len(runes))
			}
			prev = off
		}
	}
}

func TestBatchAndMaxTokensZero(t *testing.T) {
	ts := sharedShim(t)
	ids := ts.tokenize(t, "the lazy dog", false)
	out := ts.complete(t, map[string]any{"prompt": []any{"hello world", ids, "one two"}, "max_tokens": 0, "echo": true, "logprobs": 0})
	if len(out.Choices) != 3 {
		t.Fatalf("choices = %d, want 3", len(out.Choices))
	}
	for i, c := range out.Choices {
		if c.Index != i {
			t.Errorf("choices[%d].index = %d", i, c.Index)
		}
		if *c.FinishReason != "length" {
			t.Errorf("choices[%d].finish_reason = %q, want length", i, *c.FinishReason)
		}
	}
	if got := out.Choices[1].Logprobs.Tokens; len(got) != len(ids) {
		t.Errorf("token-id prompt echoed %d rows, want %d (no BOS added)", len(got), len(ids))
	}
	if out.Choices[0].Text != "hello world" || out.Choices[2].Text != "one two" {
		t.Errorf("echo texts %q %q", out.Choices[0].Text, out.Choices[2].Text)
	}
	if out.Usage.CompletionTokens != 0 || out.Usage.PromptTokens == 0 {
		t.Errorf("usage %+v, want prompt tokens and no completion tokens", out.Usage)
	}
}

func TestTokenizerEndpointsAsLMEvalUsesThem(t *testing.T) {
	ts := sharedShim(t)
	var info map[string]any
	resp, err := http.Get(ts.URL + "/tokenizer_info")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	eos, ok := info["eos_token"].(string)
	if !ok || eos == "" {
		t.Fatalf("tokenizer_info %v has no eos_token", info)
	}
	bos, _ := info["bos_token"].(string)
	// lm-eval derives the ids by encoding the special tokens' text.
	if got := ts.tokenize(t, eos, false); len(got) != 1 || float64(got[0]) != info["eos_token_id"] {
		t.Errorf("tokenize(eos_token %q) = %v, want [%v]", eos, got, info["eos_token_id"])
	}
	if got := ts.tokenize(t, bos, false); len(got) != 1 || float64(got[0]) != info["bos_token_id"] {
		t.Errorf("tokenize(bos_token %q) = %v, want [%v]", bos, got, info["bos_token_id"])
	}
	with, without := ts.tokenize(t, "hello world", true), ts.tokenize(t, "hello world", false)
	if len(with) != len(without)+1 || float64(with[0]) != info["bos_token_id"] {
		t.Errorf("add_special_tokens: %v vs %v", with, without)
	}
	var de struct {
		Prompt *string `json:"prompt"`
	}
	if st := ts.post(t, "/detokenize", map[string]any{"tokens": without}, &de); st != 200 || de.Prompt == nil {
		t.Fatalf("detokenize: status %d, %+v", st, de)
	}
	if strings.TrimSpace(*de.Prompt) != "hello world" {
		t.Errorf("detokenize(tokenize(%q)) = %q", "hello world", *de.Prompt)
	}
}

func TestChatCompletionsLogprobs(t *testing.T) {
	ts := sharedShim(t)
	msgs := []map[string]string{{"role": "user", "content": "what is the capital of france"}}
	for _, top := range []int{0, 3} {
		var out struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Message  struct{ Content string } `json:"message"`
				Logprobs struct {
					Content []struct {
						Token       string  `json:"token"`
						Logprob     float64 `json:"logprob"`
						Bytes       []int   `json:"bytes"`
						TopLogprobs []struct {
							Token   string  `json:"token"`
							Logprob float64 `json:"logprob"`
						} `json:"top_logprobs"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		st := ts.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 5, "temperature": 0, "logprobs": true, "top_logprobs": top}, &out)
		if st != 200 || len(out.Choices) != 1 {
			t.Fatalf("top_logprobs %d: status %d, %+v", top, st, out)
		}
		content := out.Choices[0].Logprobs.Content
		if len(content) == 0 {
			t.Fatalf("top_logprobs %d: no logprobs content", top)
		}
		for _, c := range content {
			if len(c.TopLogprobs) != top {
				t.Errorf("top_logprobs %d: token %q has %d alternatives", top, c.Token, len(c.TopLogprobs))
			}
		}
		if out.Object != "chat.completion" || out.Model != "tiny" {
			t.Errorf("object %q model %q", out.Object, out.Model)
		}
	}
	body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 5, "stream": true, "logprobs": true, "top_logprobs": 2, "stream_options": map[string]any{"include_usage": true}})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var events []string
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("chat stream events %q, want chunks then [DONE]", events)
	}
	for i, e := range events[:len(events)-1] {
		var c struct {
			Usage   json.RawMessage `json:"usage"`
			Choices []struct {
				Logprobs *struct {
					Content []struct {
						TopLogprobs []json.RawMessage `json:"top_logprobs"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chat chunk %q: %v", e, err)
		}
		last := i == len(events)-2
		if last != (string(c.Usage) != "null") || c.Usage == nil {
			t.Errorf("chat chunk %d usage %s; want null on every chunk but the last", i, c.Usage)
		}
		for _, ch := range c.Choices {
			if ch.Logprobs == nil {
				continue
			}
			for _, tok := range ch.Logprobs.Content {
				if len(tok.TopLogprobs) != 2 {
					t.Errorf("chat chunk %d: %d top_logprobs, want 2", i, len(tok.TopLogprobs))
				}
			}
		}
	}
}

// TestCompletionsSayWhereTheirTimeWent: a non-streamed completion's Server-Timing
// header gives the time spent waiting on llama-server and the shim's own, in
// milliseconds, and together they are no more than the request took.
func TestCompletionsSayWhereTheirTimeWent(t *testing.T) {
	ts := sharedShim(t)
	body, _ := json.Marshal(map[string]any{"prompt": "the capital of france is", "max_tokens": 4, "temperature": 0, "logprobs": 1, "echo": true})
	t0 := time.Now()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(t0)
	h := resp.Header.Get("Server-Timing")
	m := regexp.MustCompile(`^slot;dur=([0-9.]+);desc="waiting for a free slot", llama;dur=([0-9.]+);desc="llama-server", shim;dur=([0-9.]+)$`).FindStringSubmatch(h)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("status %d, Server-Timing %q; want slot;dur=MS;desc=\"waiting for a free slot\", llama;dur=MS;desc=\"llama-server\", shim;dur=MS", resp.StatusCode, h)
	}
	slot, _ := strconv.ParseFloat(m[1], 64)
	llama, _ := strconv.ParseFloat(m[2], 64)
	shim, _ := strconv.ParseFloat(m[3], 64)
	if slot < 0 || llama <= 0 || shim <= 0 || time.Duration((slot+llama+shim)*float64(time.Millisecond)) > took {
		t.Errorf("Server-Timing slot %g ms, llama %g ms, shim %g ms for a request that took %v: want llama and shim > 0 and the sum within it", slot, llama, shim, took)
	}
}
