package shim

// vLLM's extra sampling parameters that llama-server honours reach it (ignore_eos, top_k,
// min_p, typical_p, repetition_penalty), and a field the shim does not read is refused with
// 400 naming it instead of being dropped (issue 27, item 2).

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

type errorAnswer struct {
	Error struct {
		Message string `json:"message"`
		Param   string `json:"param"`
		Type    string `json:"type"`
	} `json:"error"`
}

func TestUnknownFieldsAreRefusedByName(t *testing.T) {
	for _, tt := range []struct {
		name, body, param, want string
		chat                    bool
	}{
		{"completion, an unknown field", `{"prompt":"a","max_tokens":1,"frobnicate":1}`, "frobnicate", "Unrecognized request argument supplied: frobnicate", false},
		{"completion, the first of several, sorted", `{"prompt":"a","zz":1,"aa":2}`, "aa", "Unrecognized request argument supplied: aa", false},
		{"completion, vLLM's min_tokens", `{"prompt":"a","min_tokens":4}`, "min_tokens", `"min_tokens" is not supported: llama-server has no minimum output length`, false},
		{"completion, prompt_logprobs", `{"prompt":"a","prompt_logprobs":1}`, "prompt_logprobs", `"echo": true with "logprobs"`, false},
		{"chat, an unknown field", `{"messages":[{"role":"user","content":"hi"}],"frobnicate":true}`, "frobnicate", "Unrecognized request argument supplied: frobnicate", true},
		{"chat, a repetition_penalty of 0", `{"messages":[{"role":"user","content":"hi"}],"repetition_penalty":0}`, "repetition_penalty", "greater than 0", true},
		{"completion, top_k below -1", `{"prompt":"a","top_k":-2}`, "top_k", "between -1 and", false},
		{"completion, ignore_eos not a boolean", `{"prompt":"a","ignore_eos":"yes"}`, "ignore_eos", "must be true or false", false},
		{"chat, a misspelt message key", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","nmae":"x"}]}`, "messages", `"messages"[1].nmae is not a message field`, true},
	} {
		t.Run(tt.name, func(t *testing.T) { wantRefused(t, tt.body, tt.chat, tt.param, tt.want) })
	}
	// the assistant message a client got back goes into the next turn as it came, with the
	// keys OpenAI's and llama-server's answers carry
	if _, err := parseChatRequest([]byte(`{"messages":[{"role":"user","content":"hi","name":"u"},` +
		`{"role":"assistant","content":"a","refusal":null,"annotations":[],"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":"r"},` +
		`{"role":"tool","content":"t","tool_call_id":"c1"}]}`)); err != nil {
		t.Errorf("a conversation with every message key refused: %v", err)
	}
	for _, tt := range []struct{ body, param, want string }{
		{`{"prompt":"a","frobnicate":1}`, "frobnicate", "Unrecognized request argument supplied: frobnicate"},
		{`{"prompt":"a","return_token_strs":true}`, "return_token_strs", "/detokenize"},
		{`{"prompt":"a","model":7}`, "model", "must be a string"},
	} {
		var ae *apiError
		if _, err := parseTokenizeRequest([]byte(tt.body)); !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tt.param || !strings.Contains(ae.Message, tt.want) {
			t.Errorf("/tokenize %s = %v, want 400 on %q saying %q", tt.body, err, tt.param, tt.want)
		}
	}
	if r, err := parseTokenizeRequest([]byte(`{"model":"m","prompt":"a","add_special_tokens":false,"return_token_strs":false}`)); err != nil || r.text != "a" || r.addSpecial {
		t.Errorf("/tokenize with vLLM's every field = %+v, %v", r, err)
	}
	var ae *apiError
	if _, err := parseDetokenizeRequest([]byte(`{"tokens":[1],"skip_special_tokens":true}`)); !errors.As(err, &ae) || ae.Param != "skip_special_tokens" {
		t.Errorf("/detokenize with an unknown field = %v, want 400 naming it", err)
	}
	if ids, err := parseDetokenizeRequest([]byte(`{"model":"m","tokens":[1,2]}`)); err != nil || len(ids) != 2 {
		t.Errorf("/detokenize with model = %v, %v", ids, err)
	}
}

// wantRefused checks that the body (a chat request when chat) is refused with 400 on param,
// saying want.
func wantRefused(t *testing.T, body string, chat bool, param, want string) {
	t.Helper()
	var err error
	if chat {
		_, err = parseChatRequest([]byte(body))
	} else {
		_, err = parseCompletionRequest([]byte(body))
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != param || !strings.Contains(ae.Message, want) {
		t.Errorf("parse(%q) = %v, want 400 on %q saying %q", body, err, param, want)
	}
}

func TestSamplingExtrasReachLlamaServer(t *testing.T) {
	r, err := parseCompletionRequest([]byte(`{"prompt":"a","ignore_eos":true,"top_k":-1,"min_p":0.05,"typical_p":0.9,"repetition_penalty":1.1}`))
	if err != nil {
		t.Fatal(err)
	}
	nr := (&job{req: r, p: r.Prompts[0]}).nativeRequest(false)
	b, _ := json.Marshal(nr)
	for _, want := range []string{`"top_k":0`, `"min_p":0.05`, `"typical_p":0.9`, `"repeat_penalty":1.1`, `"ignore_eos":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("native request %s lacks %s", b, want)
		}
	}
	c, err := parseChatRequest([]byte(`{"messages":[{"role":"user","content":"hi"}],"repetition_penalty":1.25,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(c.Fields["repeat_penalty"]); got != "1.25" || c.Fields.has("repetition_penalty") {
		t.Errorf("chat fields: repeat_penalty %q, repetition_penalty still there: %v; want llama-server's name", got, c.Fields.has("repetition_penalty"))
	}
	// the chat the shim serves itself generates through the completions path
	if c.Gen == nil || c.Gen.RepeatPenalty == nil || *c.Gen.RepeatPenalty != 1.25 || !c.Gen.IgnoreEOS {
		t.Errorf("chat's completion request %+v, want repeat_penalty 1.25 and ignore_eos", c.Gen)
	}
}

// With the end-of-sequence token forced by logit_bias, a completion stops at once; with
// ignore_eos it generates max_tokens tokens, as llama-server does. top_k 1 makes sampling at
// temperature 1 greedy whatever the seed.
func TestIgnoreEOSAndTopKThroughTheShim(t *testing.T) {
	ts := sharedShim(t)
	type answer struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	for _, ignore := range []bool{false, true} {
		var a answer
		req := map[string]any{"prompt": "the quick brown fox", "max_tokens": 12, "temperature": 0, "logit_bias": map[string]float64{"2": 100}}
		if ignore {
			req["ignore_eos"] = true
		}
		if code := ts.post(t, "/v1/completions", req, &a); code != 200 {
			t.Fatalf("status %d", code)
		}
		want, reason := 1, "stop"
		if ignore {
			want, reason = 12, "length"
		}
		if a.Usage.CompletionTokens > want || (ignore && a.Usage.CompletionTokens != want) || a.Choices[0].FinishReason != reason {
			t.Errorf("ignore_eos %v: %d tokens, finish %q; want %d and %q", ignore, a.Usage.CompletionTokens, a.Choices[0].FinishReason, want, reason)
		}
	}
	text := func(extra map[string]any) string {
		req := map[string]any{"prompt": "the quick brown fox", "max_tokens": 24, "logit_bias": noEOS}
		for k, v := range extra {
			req[k] = v
		}
		var a answer
		if code := ts.post(t, "/v1/completions", req, &a); code != 200 {
			t.Fatalf("status %d", code)
		}
		return a.Choices[0].Text
	}
	greedy := text(map[string]any{"temperature": 0})
	sampled := map[string]bool{}
	for _, seed := range []int{1, 2, 3} {
		if got := text(map[string]any{"temperature": 1, "top_k": 1, "seed": seed}); got != greedy {
			t.Errorf("top_k 1, seed %d: %q, want the greedy %q (top_k did not reach llama-server)", seed, got, greedy)
		}
		sampled[text(map[string]any{"temperature": 1, "seed": seed})] = true
	}
	if len(sampled) == 1 {
		t.Errorf("without top_k three seeds gave one text %q: the test cannot tell top_k's effect", greedy)
	}
	var e errorAnswer
	if code := ts.post(t, "/v1/completions", map[string]any{"prompt": "a", "frobnicate": 1}, &e); code != 400 || e.Error.Param != "frobnicate" {
		t.Errorf("an unknown field: status %d, %+v; want 400 naming it", code, e.Error)
	}
}

// vLLM's add_special_tokens false: a text prompt is tokenized without the BOS the model adds,
// so a client that counted the prompt's tokens without it (lm-evaluation-harness with
// tokenized_requests=False slices the echo rows at its own count) finds its rows where it
// counted them: the same rows as the ids of the prompt sent without BOS. Default: BOS first.
func TestAddSpecialTokensFalseLeavesOutBOS(t *testing.T) {
	ts := sharedShim(t)
	const text = "the capital of france is paris"
	var noBOS []int
	if st := ts.post(t, "/tokenize", map[string]any{"prompt": text, "add_special_tokens": false}, &struct {
		Tokens *[]int `json:"tokens"`
	}{&noBOS}); st != 200 || len(noBOS) < 3 {
		t.Fatalf("/tokenize without special tokens: %d %v", st, noBOS)
	}
	echo := func(prompt any, extra map[string]any) cmplResp {
		req := map[string]any{"prompt": prompt, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0}
		maps.Copy(req, extra)
		var r cmplResp
		if st := ts.post(t, "/v1/completions", req, &r); st != 200 || len(r.Choices) != 1 || r.Choices[0].Logprobs == nil {
			t.Fatalf("echo of %v %v: status %d, %+v", prompt, extra, st, r)
		}
		return r
	}
	plain := echo(text, nil).Choices[0].Logprobs
	off := echo(text, map[string]any{"add_special_tokens": false})
	ids := echo(noBOS, nil).Choices[0].Logprobs
	lp := off.Choices[0].Logprobs
	if len(plain.Tokens) != len(noBOS)+2 || plain.Tokens[0] != "<s>" {
		t.Errorf("default rows %q, want <s>, the %d prompt tokens and the generated one", plain.Tokens, len(noBOS))
	}
	if !slices.Equal(lp.Tokens, ids.Tokens) || len(lp.Tokens) != len(noBOS)+1 || lp.Tokens[0] == "<s>" {
		t.Errorf("add_special_tokens false rows %q, want the rows of the ids without BOS %q", lp.Tokens, ids.Tokens)
	}
	for i := range min(len(lp.TokenLogprobs), len(ids.TokenLogprobs)) {
		if (lp.TokenLogprobs[i] == nil) != (ids.TokenLogprobs[i] == nil) || lp.TokenLogprobs[i] != nil && *lp.TokenLogprobs[i] != *ids.TokenLogprobs[i] {
			t.Errorf("row %d: %v, the ids' row %v", i, lp.TokenLogprobs[i], ids.TokenLogprobs[i])
		}
	}
	if off.Usage == nil || off.Usage.PromptTokens != len(noBOS) {
		t.Errorf("usage %+v, want %d prompt tokens", off.Usage, len(noBOS))
	}
	// without echo too: llama-server gets the ids, not the text it would add BOS to
	var gen cmplResp
	if st := ts.post(t, "/v1/completions", map[string]any{"prompt": text, "max_tokens": 2, "temperature": 0, "add_special_tokens": false}, &gen); st != 200 || gen.Usage == nil || gen.Usage.PromptTokens != len(noBOS) {
		t.Errorf("a generation with add_special_tokens false: status %d, usage %+v, want %d prompt tokens", st, gen.Usage, len(noBOS))
	}
	s := ts.streamCompletion(t, map[string]any{"prompt": text, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0, "add_special_tokens": false})
	if !slices.Equal(s.lp.Tokens, lp.Tokens) {
		t.Errorf("streamed rows %q, want %q", s.lp.Tokens, lp.Tokens)
	}
	wantRefused(t, `{"prompt":"a","add_special_tokens":"no"}`, false, "add_special_tokens", "must be true or false")
}
