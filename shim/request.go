package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/llbuild/llbuild/internal/jsonscan"
)

// Limits on what a request may ask for.
const (
	maxLogprobs = 20   // vLLM's default cap; OpenAI's is 5
	maxBatch    = 4096 // prompts in one request
	// maxEchoEntries is Options.MaxEchoEntries' default: the prompt logprobs one request may
	// ask for, its echoed prompt tokens times (1 + logprobs) over all its prompts. The answer is
	// built whole, at about 20 bytes of JSON an entry and ten times that while it is made, so
	// this keeps one request near 100 MB of answer and 1 GB of the shim's memory (4096 prompts
	// of 250 tokens with 20 logprobs each asked for 21 M entries, and took the shim to 4.2 GB).
	// lm-eval's scoring batches (tens of prompts, logprobs 1) use a few per cent of it.
	maxEchoEntries = 5 << 20
	maxStops       = 16      // stop strings
	maxMaxTokens   = 1 << 20 // far beyond any context; llama-server stops at its context anyway
	defaultMaxToks = 16      // OpenAI's default for legacy completions
)

// prompt is one prompt of a completion request: text, or token ids used
// verbatim (no BOS added), as llama-server treats them.
type prompt struct {
	Text   string
	IDs    []int
	IsText bool
}

// completionRequest is a validated POST /v1/completions body.
type completionRequest struct {
	Model            string
	Prompts          []prompt
	MaxTokens        int
	Temperature      *float64
	TopP             *float64
	Seed             *int64
	Stop             []string
	Logprobs         int // -1: no logprobs
	Echo             bool
	Stream           bool
	IncludeUsage     bool
	PresencePenalty  *float64
	FrequencyPenalty *float64
	LogitBias        [][2]float64 // [token id, bias], sorted by id
	// TokenIDs names tokens "token_id:N" in logprobs, vLLM's
	// return_tokens_as_token_ids, for clients that need exact ids.
	TokenIDs bool
	// vLLM's extra sampling parameters that llama-server honours.
	IgnoreEOS                     bool
	TopK                          *int
	MinP, TypicalP, RepeatPenalty *float64
	// NoSpecialTokens is vLLM's add_special_tokens false: a text prompt is tokenized
	// without the BOS token the model adds, for clients that count the prompt's tokens with a
	// tokenizer that adds none.
	NoSpecialTokens bool
	// echoEntries counts the prompt logprob entries the request's prompts ask for as they
	// are tokenized (maxEchoEntries); nil for a request that echoes nothing
	echoEntries *atomic.Int64
}

// The request fields each endpoint reads. Any other field is refused with 400 naming it, as
// OpenAI does ("Unrecognized request argument supplied"), never dropped silently.
var (
	completionFields = fieldSet("model", "prompt", "max_tokens", "temperature", "top_p", "presence_penalty",
		"frequency_penalty", "seed", "stop", "logprobs", "echo", "stream", "stream_options", "n", "best_of",
		"suffix", "user", "logit_bias", "return_tokens_as_token_ids", "add_special_tokens",
		"ignore_eos", "top_k", "min_p", "typical_p", "repetition_penalty")
	chatFields = fieldSet("model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
		"presence_penalty", "frequency_penalty", "seed", "stop", "logprobs", "top_logprobs", "stream",
		"stream_options", "n", "user", "logit_bias", "tools", "tool_choice", "parallel_tool_calls",
		"response_format", "chat_template_kwargs", "reasoning_format",
		"ignore_eos", "top_k", "min_p", "typical_p", "repetition_penalty")
	// messageFields are the keys of a chat message: OpenAI's (refusal, annotations and audio as
	// a client sends back the assistant message it was answered with) and llama-server's
	// reasoning_content, which its answers carry.
	messageFields = fieldSet("role", "content", "name", "tool_calls", "tool_call_id", "function_call",
		"reasoning_content", "refusal", "annotations", "audio")
	// tokenizeFields and detokenizeFields are vLLM's /tokenize and /detokenize fields.
	tokenizeFields   = fieldSet("model", "prompt", "add_special_tokens", "return_token_strs")
	detokenizeFields = fieldSet("model", "tokens")
	// unsupported are fields other servers take that llama-server cannot honour.
	unsupported = map[string]string{
		"min_tokens":      "llama-server has no minimum output length; use ignore_eos with max_tokens for a fixed length",
		"use_beam_search": "llama-server does not search beams",
		"length_penalty":  "llama-server does not search beams",
		"prompt_logprobs": "ask for prompt-token logprobs the OpenAI way: \"echo\": true with \"logprobs\"",
	}
)

// chatRoles are the message roles OpenAI's chat API takes (function: its
// deprecated form of tool).
var chatRoles = fieldSet("system", "developer", "user", "assistant", "tool", "function")

func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkKnown refuses the first field (in sorted order) that is not in known.
func (f fields) checkKnown(known map[string]bool) error {
	n := f.firstUnknown(known)
	if n == "" {
		return nil
	}
	if why, ok := unsupported[n]; ok {
		return badRequest(n, "%q is not supported: %s", n, why)
	}
	return badRequest(n, "Unrecognized request argument supplied: %s", n)
}

// firstUnknown is the first field of f (in sorted order) not in known, "" when none is.
func (f fields) firstUnknown(known map[string]bool) string {
	var names []string
	for k := range f {
		if !known[k] {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[0]
}

// samplingExtras reads vLLM's extra sampling parameters that llama-server honours.
func (f fields) samplingExtras() (ignoreEOS bool, topK *int, minP, typicalP, repeatPenalty *float64, err error) {
	if ignoreEOS, err = f.boolean("ignore_eos"); err != nil {
		return
	}
	// vLLM: top_k -1 (or 0) means no top-k filtering; llama-server reads 0 so.
	if v, ok, e := f.integer("top_k", -1, 1<<31-1); e != nil {
		err = e
		return
	} else if ok {
		k := max(int(v), 0)
		topK = &k
	}
	if minP, err = f.float("min_p", 0, 1); err != nil {
		return
	}
	if typicalP, err = f.float("typical_p", 0, 1); err != nil {
		return
	}
	repeatPenalty, err = f.float("repetition_penalty", 0, 2)
	if repeatPenalty != nil && *repeatPenalty == 0 {
		err = badRequest("repetition_penalty", `"repetition_penalty" must be greater than 0 (1 is no penalty)`)
	}
	return
}

// fields is a JSON object whose values are decoded one by one, so that a
// wrong type names the field it is in.
type fields map[string]json.RawMessage

func decodeObject(body []byte) (fields, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, badRequest("", "request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		return nil, badRequest("", "request body must be a JSON object")
	}
	if !utf8.Valid(trimmed) {
		return nil, badRequest("", "request body is not valid UTF-8 (JSON text must be); at byte %d", invalidUTF8At(trimmed))
	}
	f, ok := splitObject(trimmed)
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if err := dec.Decode(&f); err != nil {
			return nil, badRequest("", "malformed JSON: %v", err)
		}
		if dec.More() {
			return nil, badRequest("", "malformed JSON: data after the object")
		}
	}
	for k, v := range f {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(f, k) // null means "not given" for every optional field
		}
	}
	return f, nil
}

// splitObject reads a valid JSON object into its members' values as json.Decoder does, but
// with one check of the whole (json.Valid) and a plain walk over it instead of the decoder's
// two scans and its reflection: a 512-token prompt's request took 23 µs that way. ok is false
// for input that is not valid JSON or has a key with escapes or invalid UTF-8, which
// json.Decoder then reads or refuses.
func splitObject(data []byte) (fields, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	f := fields{}
	i := jsonscan.Space(data, 0)
	if data[i] != '{' {
		return nil, false
	}
	for {
		i = jsonscan.Space(data, i+1) // past '{' or ','
		if data[i] == '}' {
			return f, true
		}
		end := jsonscan.Value(data, i)
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			return nil, false
		}
		i = jsonscan.Space(data, end)
		start := jsonscan.Space(data, i+1) // past ':'
		end = jsonscan.Value(data, start)
		f[string(key)] = json.RawMessage(data[start:end:end])
		if i = jsonscan.Space(data, end); data[i] == '}' {
			return f, true
		}
	}
}

func (f fields) has(name string) bool { _, ok := f[name]; return ok }

// invalidUTF8At is the offset of b's first byte that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func (fields) rawFloat(v float64) json.RawMessage {
	return json.RawMessage(strconv.FormatFloat(v, 'g', -1, 64))
}

func (f fields) number(name string) (float64, bool, error) {
	raw, ok := f[name]
	if !ok {
		return 0, false, nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		// json.Number would also take a string that holds a number.
		return 0, false, badRequest(name, "%q must be a number", name)
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return 0, false, badRequest(name, "%q must be a number", name)
	}
	v, err := n.Float64()
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false, badRequest(name, "%q must be a finite number", name)
	}
	return v, true, nil
}

func (f fields) float(name string, lo, hi float64) (*float64, error) {
	v, ok, err := f.number(name)
	if err != nil || !ok {
		return nil, err
	}
	if v < lo || v > hi {
		return nil, badRequest(name, "%q is %v; it must be between %v and %v", name, v, lo, hi)
	}
	return &v, nil
}

func (f fields) integer(name string, lo, hi int64) (int64, bool, error) {
	v, ok, err := f.number(name)
	if err != nil || !ok {
		return 0, false, err
	}
	if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, false, badRequest(name, "%q must be an integer", name)
	}
	if int64(v) < lo || int64(v) > hi {
		return 0, false, badRequest(name, "%q is %d; it must be between %d and %d", name, int64(v), lo, hi)
	}
	return int64(v), true, nil
}

func (f fields) boolean(name string) (bool, error) {
	raw, ok := f[name]
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, badRequest(name, "%q must be true or false", name)
	}
	return b, nil
}

func (f fields) str(name string) (string, error) {
	raw, ok := f[name]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest(name, "%q must be a string", name)
	}
	return s, nil
}

// parseCompletionRequest validates a legacy completions body.
func parseCompletionRequest(body []byte) (*completionRequest, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	r := &completionRequest{MaxTokens: defaultMaxToks, Logprobs: -1, echoEntries: new(atomic.Int64)}
	if err := f.checkKnown(completionFields); err != nil {
		return nil, err
	}
	if r.IgnoreEOS, r.TopK, r.MinP, r.TypicalP, r.RepeatPenalty, err = f.samplingExtras(); err != nil {
		return nil, err
	}
	if f.has("add_special_tokens") {
		add, err := f.boolean("add_special_tokens")
		if err != nil {
			return nil, err
		}
		r.NoSpecialTokens = !add
	}
	if r.Model, err = f.str("model"); err != nil {
		return nil, err
	}
	raw, ok := f["prompt"]
	if !ok {
		return nil, badRequest("prompt", `"prompt" is required: a string, an array of token ids, or an array of either`)
	}
	if r.Prompts, err = parsePrompts(raw); err != nil {
		return nil, err
	}
	for i, p := range r.Prompts {
		if p.IsText && p.Text == "" {
			if len(r.Prompts) == 1 {
				return nil, badRequest("prompt", `"prompt" is an empty string: send some text or token ids`)
			}
			return nil, badRequest("prompt", `"prompt"[%d] is an empty string: send some text or token ids`, i)
		}
	}
	if v, ok, err := f.integer("max_tokens", 0, maxMaxTokens); err != nil {
		return nil, err
	} else if ok {
		r.MaxTokens = int(v)
	}
	if r.Temperature, err = f.float("temperature", 0, 2); err != nil {
		return nil, err
	}
	if r.TopP, err = f.float("top_p", 0, 1); err != nil {
		return nil, err
	}
	if r.PresencePenalty, err = f.float("presence_penalty", -2, 2); err != nil {
		return nil, err
	}
	if r.FrequencyPenalty, err = f.float("frequency_penalty", -2, 2); err != nil {
		return nil, err
	}
	if v, ok, err := f.integer("seed", math.MinInt64, math.MaxInt64); err != nil {
		return nil, err
	} else if ok {
		r.Seed = &v
	}
	if r.Stop, err = parseStop(f); err != nil {
		return nil, err
	}
	if v, ok, err := f.integer("logprobs", 0, maxLogprobs); err != nil {
		return nil, err
	} else if ok {
		r.Logprobs = int(v)
	}
	if r.Echo, err = f.boolean("echo"); err != nil {
		return nil, err
	}
	if r.Stream, err = f.boolean("stream"); err != nil {
		return nil, err
	}
	if r.IncludeUsage, err = parseStreamOptions(f, r.Stream); err != nil {
		return nil, err
	}
	if err := checkN(f); err != nil {
		return nil, err
	}
	if _, _, err := f.integer("best_of", 1, 1); err != nil {
		return nil, badRequest("best_of", `"best_of" must be 1: the shim returns one choice per prompt`)
	}
	if s, err := f.str("suffix"); err != nil {
		return nil, err
	} else if s != "" {
		return nil, badRequest("suffix", `"suffix" is not supported`)
	}
	if _, err := f.str("user"); err != nil {
		return nil, err
	}
	if r.LogitBias, err = parseLogitBias(f); err != nil {
		return nil, err
	}
	if r.TokenIDs, err = f.boolean("return_tokens_as_token_ids"); err != nil {
		return nil, err
	}
	return r, nil
}

// checkN accepts n=1 only: several samples of one prompt are several
// requests, which clients can send themselves (each can use its own seed).
func checkN(f fields) error {
	v, ok, err := f.integer("n", 1, 128)
	if err != nil {
		return badRequest("n", `"n" must be an integer between 1 and 1 (this server returns one choice per prompt; send n separate requests)`)
	}
	if ok && v != 1 {
		return badRequest("n", `"n" is %d; only n=1 is supported (send %d separate requests, each with its own seed)`, v, v)
	}
	return nil
}

func parseStreamOptions(f fields, stream bool) (bool, error) {
	raw, ok := f["stream_options"]
	if !ok {
		return false, nil
	}
	opts, err := decodeObject(raw)
	if err != nil {
		return false, badRequest("stream_options", `"stream_options" must be an object`)
	}
	if !stream {
		return false, badRequest("stream_options", `"stream_options" is only allowed with "stream": true`)
	}
	for k := range opts {
		// include_obfuscation is OpenAI's padding of streamed events, which a local server
		// has no reason for, continuous_usage_stats vLLM's usage in every chunk: taken and
		// ignored
		if k != "include_usage" && k != "include_obfuscation" && k != "continuous_usage_stats" {
			return false, badRequest("stream_options", "Unrecognized request argument supplied: stream_options.%s", k)
		}
	}
	iu, err := opts.boolean("include_usage")
	if err != nil {
		return false, badRequest("stream_options.include_usage", `"stream_options.include_usage" must be true or false`)
	}
	return iu, nil
}

func parseStop(f fields) ([]string, error) {
	raw, ok := f["stop"]
	if !ok {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", `"stop" must be a string or an array of strings`)
	}
	if len(many) > maxStops {
		return nil, badRequest("stop", `"stop" has %d strings; at most %d are allowed`, len(many), maxStops)
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// checkLogitBias refuses a bias for a token the vocabulary does not have, which
// llama-server would ignore.
func checkLogitBias(bias [][2]float64, v *vocab) error {
	for _, b := range bias {
		if !v.valid(int(b[0])) {
			return badRequest("logit_bias", `"logit_bias" names token id %d; the vocabulary has %d tokens`, int(b[0]), v.size())
		}
	}
	return nil
}

func parseLogitBias(f fields) ([][2]float64, error) {
	raw, ok := f["logit_bias"]
	if !ok {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, badRequest("logit_bias", `"logit_bias" must be an object mapping token ids to biases`)
	}
	var out [][2]float64
	for k, v := range m {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 {
			return nil, badRequest("logit_bias", `"logit_bias" key %q is not a token id`, k)
		}
		var b float64
		if err := json.Unmarshal(v, &b); err != nil || b < -100 || b > 100 {
			return nil, badRequest("logit_bias", `"logit_bias" value for %s must be a number between -100 and 100`, k)
		}
		out = append(out, [2]float64{float64(id), b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

// parsePrompts accepts a string, an array of token ids, or a non-empty
// array of strings and token-id arrays (a batch).
func parsePrompts(raw json.RawMessage) ([]prompt, error) {
	if ps, ok := fastIDPrompts(raw); ok {
		return ps, nil
	}
	return decodePrompts(raw)
}

// decodePrompts is parsePrompts for any shape.
func decodePrompts(raw json.RawMessage) ([]prompt, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []prompt{{Text: s, IsText: true}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("prompt", `"prompt" must be a string, an array of token ids, or an array of either`)
	}
	if len(items) == 0 {
		return nil, badRequest("prompt", `"prompt" is an empty array`)
	}
	if ids, ok := tokenIDs(items); ok {
		return []prompt{{IDs: ids}}, nil
	}
	if j, bad := badTokenID(items); bad != "" {
		return nil, badRequest("prompt", `"prompt"[%d] is %s: a token id is a whole number from 0 (and a prompt is a string, an array of token ids, or an array of either)`, j, bad)
	}
	if len(items) > maxBatch {
		return nil, badRequest("prompt", `"prompt" batch has %d prompts; at most %d are allowed`, len(items), maxBatch)
	}
	out := make([]prompt, 0, len(items))
	for i, item := range items {
		if err := json.Unmarshal(item, &s); err == nil {
			out = append(out, prompt{Text: s, IsText: true})
			continue
		}
		var sub []json.RawMessage
		if err := json.Unmarshal(item, &sub); err != nil || len(sub) == 0 {
			return nil, badRequest("prompt", `"prompt"[%d] must be a string or a non-empty array of token ids`, i)
		}
		ids, ok := tokenIDs(sub)
		if !ok {
			if j, bad := badTokenID(sub); bad != "" {
				return nil, badRequest("prompt", `"prompt"[%d][%d] is %s: a token id is a whole number from 0`, i, j, bad)
			}
			return nil, badRequest("prompt", `"prompt"[%d] must be a string or an array of non-negative integer token ids`, i)
		}
		out = append(out, prompt{IDs: ids})
	}
	return out, nil
}

// fastIDPrompts reads a prompt of token ids ([1,2,3]) or a batch of them
// ([[1,2],[3]]) in one pass, the shape lm-eval sends, without the decoding
// into raw items that parsePrompts does for any shape (a 512-token prompt
// took 0.18 ms that way). ok is false for anything else, and for anything
// parsePrompts would refuse: that path then says why.
func fastIDPrompts(raw []byte) (ps []prompt, ok bool) {
	i := jsonscan.Space(raw, 0)
	ids := func() ([]int, bool) { // one [id,...] at raw[i], non-empty
		if i >= len(raw) || raw[i] != '[' {
			return nil, false
		}
		i++
		out := make([]int, 0, len(raw)/6)
		for {
			i = jsonscan.Space(raw, i)
			start, v := i, 0
			for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
				if v = v*10 + int(raw[i]-'0'); v > math.MaxInt32 {
					return nil, false
				}
				i++
			}
			if i == start || (raw[start] == '0' && i-start > 1) {
				return nil, false
			}
			out = append(out, v)
			i = jsonscan.Space(raw, i)
			if i >= len(raw) {
				return nil, false
			}
			if raw[i] == ']' {
				i++
				return out, true
			}
			if raw[i] != ',' {
				return nil, false
			}
			i++
		}
	}
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	if j := jsonscan.Space(raw, i+1); j < len(raw) && raw[j] == '[' {
		i = j
		for {
			one, ok := ids()
			if !ok || len(ps) == maxBatch {
				return nil, false
			}
			ps = append(ps, prompt{IDs: one})
			i = jsonscan.Space(raw, i)
			if i >= len(raw) {
				return nil, false
			}
			if raw[i] == ']' {
				i++
				break
			}
			if raw[i] != ',' {
				return nil, false
			}
			i = jsonscan.Space(raw, i+1)
		}
	} else {
		one, ok := ids()
		if !ok {
			return nil, false
		}
		ps = []prompt{{IDs: one}}
	}
	return ps, jsonscan.Space(raw, i) == len(raw)
}

// tokenIDs reports whether every item is a non-negative integer.
// badTokenID finds, in items that are all numbers, the first that is no token id (negative,
// fractional, beyond an int32), and returns its index and text; "" when items are not all
// numbers, or all are ids.
func badTokenID(items []json.RawMessage) (int, string) {
	for _, item := range items {
		if item = bytes.TrimSpace(item); len(item) == 0 || (item[0] != '-' && (item[0] < '0' || item[0] > '9')) {
			return 0, ""
		}
	}
	for i, item := range items {
		if v, err := strconv.ParseInt(string(bytes.TrimSpace(item)), 10, 32); err != nil || v < 0 {
			return i, string(bytes.TrimSpace(item))
		}
	}
	return 0, ""
}

func tokenIDs(items []json.RawMessage) ([]int, bool) {
	ids := make([]int, len(items))
	for i, item := range items {
		item = bytes.TrimSpace(item)
		if len(item) == 0 || (item[0] != '-' && (item[0] < '0' || item[0] > '9')) {
			return nil, false
		}
		v, err := strconv.ParseInt(string(item), 10, 32)
		if err != nil || v < 0 {
			return nil, false
		}
		ids[i] = int(v)
	}
	return ids, true
}

// chatRequest is a validated POST /v1/chat/completions body, kept as its
// fields so that everything the shim does not check reaches llama-server
// unchanged.
type chatRequest struct {
	Model        string
	Fields       fields
	LogitBias    [][2]float64
	Stream       bool
	Logprobs     bool
	TopLogprobs  int
	IncludeUsage bool
	// Images and Audio say a message has an image or an audio part.
	Images, Audio bool
	// Gen is the request as the completions path runs it, its prompt still to be rendered
	// from the messages; nil when the request needs llama-server's chat-output parser
	// (parserFields, or content parts that are not text).
	Gen *completionRequest
}

// parserFields are the chat fields whose meaning lives in llama-server's chat-output
// parser (tool calls, structured output, reasoning): a request with one of them goes to
// llama-server's chat endpoint.
var parserFields = []string{"tools", "tool_choice", "parallel_tool_calls", "response_format", "reasoning_format", "chat_template_kwargs"}

// checkMedia refuses a content part that llama-server would fetch: it downloads an http(s)
// URL given as an image's url, or as an audio or video part's data or url, from the serving
// host, which would let any client make that host request its own network (a server-side
// request forgery). Media come inline: an image as a data: URL, audio and video as base64. It
// returns the field at fault.
func checkMedia(part map[string]json.RawMessage) (string, error) {
	str := func(raw json.RawMessage) (string, bool) {
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	sub := func(raw json.RawMessage) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		json.Unmarshal(raw, &m)
		return m
	}
	if raw, ok := part["image_url"]; ok && string(raw) != "null" {
		url, isString := str(raw)
		if !isString {
			m := sub(raw)
			if m == nil {
				return "image_url", errors.New(`must be an object with a "url"`)
			}
			url, _ = str(m["url"])
		}
		if len(url) < 5 || !strings.EqualFold(url[:5], "data:") {
			return "image_url", errors.New(`the url must be a data: URL (data:image/png;base64,...): llbuild serve does not fetch images from the network for a client`)
		}
	}
	for _, kind := range []string{"input_audio", "input_video"} {
		m := sub(part[kind])
		for _, key := range []string{"data", "url"} {
			if v, _ := str(m[key]); fetched(v) {
				return kind + "." + key, fmt.Errorf("%q is a URL: llbuild serve does not fetch media from the network for a client; send the data inline, base64", v)
			}
		}
	}
	return "", nil
}

// fetched says llama-server would download v rather than decode it.
func fetched(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return strings.HasPrefix(v, "http") || strings.HasPrefix(v, "file:") || strings.HasPrefix(v, "ftp")
}

// maxSchemaDepth bounds how deep a chat request's tools and response_format nest (JSON schemas
// are rarely more than ten deep).
const maxSchemaDepth = 64

// jsonDepth is how deep raw, a JSON value, nests its objects and arrays.
func jsonDepth(raw []byte) int {
	depth, most, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			most = max(most, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return most
}

func parseChatRequest(body []byte) (*chatRequest, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	r := &chatRequest{Fields: f}
	if err := f.checkKnown(chatFields); err != nil {
		return nil, err
	}
	g := &completionRequest{MaxTokens: -1, Logprobs: -1}
	if g.IgnoreEOS, g.TopK, g.MinP, g.TypicalP, g.RepeatPenalty, err = f.samplingExtras(); err != nil {
		return nil, err
	} else if rp := g.RepeatPenalty; rp != nil {
		// llama-server's name for it
		delete(f, "repetition_penalty")
		f["repeat_penalty"] = f.rawFloat(*rp)
	}
	if r.Model, err = f.str("model"); err != nil {
		return nil, err
	}
	raw, ok := f["messages"]
	if !ok {
		return nil, badRequest("messages", `"messages" is required: an array of message objects`)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return nil, badRequest("messages", `"messages" must be a non-empty array of message objects`)
	}
	plain := true // no content part but text
	for i, m := range msgs {
		mf, err := decodeObject(m)
		if err != nil {
			return nil, badRequest("messages", `"messages"[%d] must be an object`, i)
		}
		role, err := mf.str("role")
		if err != nil || role == "" {
			return nil, badRequest("messages", `"messages"[%d].role must be a non-empty string`, i)
		}
		if !chatRoles[role] {
			return nil, badRequest("messages", `"messages"[%d].role %q is not a role: use system, developer, user, assistant or tool`, i, role)
		}
		if n := mf.firstUnknown(messageFields); n != "" {
			return nil, badRequest("messages", `"messages"[%d].%s is not a message field: a message takes role, content, name, tool_calls, tool_call_id, function_call, reasoning_content, refusal, annotations and audio`, i, n)
		}
		// null content was dropped by decodeObject: it is missing, which only an
		// assistant's tool call may be
		if !mf.has("content") && !(role == "assistant" && (mf.has("tool_calls") || mf.has("function_call"))) {
			return nil, badRequest("messages", `"messages"[%d].content is required for role %q: a string or an array of content parts`, i, role)
		}
		if c, ok := mf["content"]; ok {
			if t := bytes.TrimSpace(c); len(t) == 0 || (t[0] != '"' && t[0] != '[') {
				return nil, badRequest("messages", `"messages"[%d].content must be a string or an array of content parts`, i)
			} else if t[0] == '[' {
				if len(bytes.TrimSpace(t[1:len(t)-1])) == 0 {
					return nil, badRequest("messages", `"messages"[%d].content is an empty array: give at least one content part`, i)
				}
				// each part as llama-server reads it: exact keys (encoding/json's struct
				// fields match any case, and nlohmann's do not), the last of a repeated one
				var parts []map[string]json.RawMessage
				if json.Unmarshal(t, &parts) != nil {
					plain = false
				}
				for j, p := range parts {
					var typ string
					json.Unmarshal(p["type"], &typ)
					plain = plain && typ == "text"
					switch typ {
					case "image_url":
						r.Images = true
					case "input_audio":
						r.Audio = true
					}
					if field, err := checkMedia(p); err != nil {
						return nil, badRequest("messages", `"messages"[%d].content[%d].%s: %v`, i, j, field, err)
					}
				}
			}
		}
	}
	if r.Logprobs, err = f.boolean("logprobs"); err != nil {
		return nil, err
	}
	if v, ok, err := f.integer("top_logprobs", 0, maxLogprobs); err != nil {
		return nil, err
	} else if ok {
		if !r.Logprobs {
			return nil, badRequest("top_logprobs", `"top_logprobs" requires "logprobs": true`)
		}
		r.TopLogprobs = int(v)
	}
	// max_completion_tokens is OpenAI's newer name; it wins where both are given
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok, err := f.integer(name, 0, maxMaxTokens); err != nil {
			return nil, err
		} else if ok {
			g.MaxTokens = int(v)
		}
	}
	for _, p := range []struct {
		name   string
		lo, hi float64
		to     **float64
	}{{"temperature", 0, 2, &g.Temperature}, {"top_p", 0, 1, &g.TopP}, {"presence_penalty", -2, 2, &g.PresencePenalty}, {"frequency_penalty", -2, 2, &g.FrequencyPenalty}} {
		if *p.to, err = f.float(p.name, p.lo, p.hi); err != nil {
			return nil, err
		}
	}
	if v, ok, err := f.integer("seed", math.MinInt64, math.MaxInt64); err != nil {
		return nil, err
	} else if ok {
		g.Seed = &v
	}
	if g.Stop, err = parseStop(f); err != nil {
		return nil, err
	}
	if err := checkN(f); err != nil {
		return nil, err
	}
	if r.Stream, err = f.boolean("stream"); err != nil {
		return nil, err
	}
	if r.IncludeUsage, err = parseStreamOptions(f, r.Stream); err != nil {
		return nil, err
	}
	if r.LogitBias, err = parseLogitBias(f); err != nil {
		return nil, err
	}
	if t, ok := f["tools"]; ok {
		if t = bytes.TrimSpace(t); len(t) == 0 || t[0] != '[' {
			return nil, badRequest("tools", `"tools" must be an array of tool objects`)
		}
	}
	// llama-server turns these into grammars; a schema nested thousands deep held every slot for
	// tens of seconds before its 400
	for _, name := range []string{"tools", "response_format"} {
		if d := jsonDepth(f[name]); d > maxSchemaDepth {
			return nil, badRequest(name, "%q is nested %d deep; at most %d", name, d, maxSchemaDepth)
		}
	}
	for _, name := range parserFields {
		plain = plain && !f.has(name)
	}
	if plain {
		g.Model, g.LogitBias, g.Stream, g.IncludeUsage = r.Model, r.LogitBias, r.Stream, r.IncludeUsage
		if r.Logprobs {
			g.Logprobs = r.TopLogprobs
		}
		r.Gen = g
	}
	return r, nil
}
