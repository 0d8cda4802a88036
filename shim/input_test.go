package shim

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

// TestBadInputGetsOpenAIErrors sends malformed and out-of-range requests:
// each must get an OpenAI-style error object with status 400 (413 for an
// oversized body), never a 500 or a hang.
func TestBadInputGetsOpenAIErrors(t *testing.T) {
	ts := sharedShim(t)
	big := `{"prompt":"` + strings.Repeat("a", 17<<20) + `"}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"empty body", "/v1/completions", ``, 400, ""},
		{"malformed JSON", "/v1/completions", `{"prompt":`, 400, ""},
		{"not an object", "/v1/completions", `[1,2]`, 400, ""},
		{"trailing data", "/v1/completions", `{"prompt":"a"} {}`, 400, ""},
		{"missing prompt", "/v1/completions", `{"max_tokens":1}`, 400, "prompt"},
		{"prompt of wrong type", "/v1/completions", `{"prompt":{"a":1}}`, 400, "prompt"},
		{"empty prompt array", "/v1/completions", `{"prompt":[]}`, 400, "prompt"},
		{"negative token id", "/v1/completions", `{"prompt":[1,-2]}`, 400, "prompt"},
		{"token id beyond the vocabulary", "/v1/completions", `{"prompt":[1,99999999]}`, 400, "prompt"},
		{"mixed ids and text", "/v1/completions", `{"prompt":[1,"a"]}`, 400, "prompt"},
		{"empty inner array", "/v1/completions", `{"prompt":[[]]}`, 400, "prompt"},
		{"logprobs too large", "/v1/completions", `{"prompt":"a","logprobs":21}`, 400, "logprobs"},
		{"logprobs negative", "/v1/completions", `{"prompt":"a","logprobs":-1}`, 400, "logprobs"},
		{"logprobs fractional", "/v1/completions", `{"prompt":"a","logprobs":1.5}`, 400, "logprobs"},
		{"logprobs a string", "/v1/completions", `{"prompt":"a","logprobs":"5"}`, 400, "logprobs"},
		{"max_tokens negative", "/v1/completions", `{"prompt":"a","max_tokens":-1}`, 400, "max_tokens"},
		{"max_tokens huge", "/v1/completions", `{"prompt":"a","max_tokens":1e12}`, 400, "max_tokens"},
		{"max_tokens a bool", "/v1/completions", `{"prompt":"a","max_tokens":true}`, 400, "max_tokens"},
		{"n of 2", "/v1/completions", `{"prompt":"a","n":2}`, 400, "n"},
		{"n of 0", "/v1/completions", `{"prompt":"a","n":0}`, 400, "n"},
		{"temperature out of range", "/v1/completions", `{"prompt":"a","temperature":3}`, 400, "temperature"},
		{"echo not a bool", "/v1/completions", `{"prompt":"a","echo":"yes"}`, 400, "echo"},
		{"stop of wrong type", "/v1/completions", `{"prompt":"a","stop":[1]}`, 400, "stop"},
		{"stream_options without stream", "/v1/completions", `{"prompt":"a","stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"best_of 3", "/v1/completions", `{"prompt":"a","best_of":3}`, 400, "best_of"},
		{"suffix", "/v1/completions", `{"prompt":"a","suffix":"b"}`, 400, "suffix"},
		{"logit_bias bad key", "/v1/completions", `{"prompt":"a","logit_bias":{"x":1}}`, 400, "logit_bias"},
		{"chat without messages", "/v1/chat/completions", `{"model":"m"}`, 400, "messages"},
		{"chat message without role", "/v1/chat/completions", `{"messages":[{"content":"hi"}]}`, 400, "messages"},
		{"chat top_logprobs without logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}`, 400, "top_logprobs"},
		{"chat top_logprobs too large", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}`, 400, "top_logprobs"},
		{"chat n of 3", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":3}`, 400, "n"},
		{"chat malformed", "/v1/chat/completions", `{"messages":[`, 400, ""},
		{"tokenize without prompt", "/tokenize", `{}`, 400, "prompt"},
		{"detokenize with text", "/detokenize", `{"tokens":["a"]}`, 400, "tokens"},
		{"detokenize beyond vocabulary", "/detokenize", `{"tokens":[12345678]}`, 400, "tokens"},
		{"body too large", "/v1/completions", big, 413, ""},
		{"a prompt longer than the context", "/v1/completions", `{"prompt":[` + strings.Repeat("5,", 5000) + `5],"max_tokens":1}`, 400, ""},
		{"echo of a prompt longer than the context", "/v1/completions", `{"prompt":[` + strings.Repeat("5,", 5000) + `5],"echo":true,"logprobs":1,"max_tokens":0}`, 400, "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out errorBody
			st := ts.postRaw(t, tc.path, []byte(tc.body), &out)
			if st != tc.status {
				t.Errorf("status %d, want %d (%+v)", st, tc.status, out.Error)
			}
			if out.Error.Message == "" || out.Error.Type == "" {
				t.Errorf("error object %+v lacks message or type", out.Error)
			}
			if tc.param != "" && (out.Error.Param == nil || *out.Error.Param != tc.param) {
				t.Errorf("param %v, want %q", out.Error.Param, tc.param)
			}
		})
	}
}

func TestAPIKeyIsRequiredExceptForHealth(t *testing.T) {
	s := newServer(Options{APIKey: "sekret", ServerPath: "unused"}, nil)
	// No llama-server runs here: authorized requests get 503, the
	// supervisor's answer while it has no ready server.
	for _, tc := range []struct {
		name, path, auth string
		status           int
	}{
		{"no key", "/v1/models", "", 401},
		{"wrong key", "/v1/models", "Bearer sekreT", 401},
		{"key without Bearer", "/v1/models", "sekret", 401},
		{"prefix of the key", "/v1/models", "Bearer sek", 401},
		{"right key", "/v1/models", "Bearer sekret", 503},
		{"health without key", "/health", "", 503},
		{"unknown path without key", "/nope", "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var out errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error.Message == "" {
				t.Errorf("body %q is not an error object", rec.Body)
			}
		})
	}
}

func TestWrongMethodAndPath(t *testing.T) {
	s := newServer(Options{ServerPath: "unused"}, nil)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/completions", 405},
		{"POST", "/health", 405},
		{"GET", "/v2/nothing", 404},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, rec.Code, tc.status)
		}
	}
}

// checkDecoded holds a request decoder to its contract on any input: a
// value, or a 400 apiError; never a panic.
func checkDecoded(t *testing.T, v any, err error) {
	if err == nil {
		if v == nil {
			t.Fatal("nil request without an error")
		}
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" {
		t.Fatalf("error %v is not a 400 apiError", err)
	}
}

func FuzzParseCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hello","max_tokens":0,"echo":true,"logprobs":5}`,
		`{"model":"m","prompt":[[1,2,3]],"temperature":0,"max_tokens":1,"logprobs":1,"seed":1234,"echo":true}`,
		`{"prompt":["a",[1,2]],"stream":true,"stream_options":{"include_usage":true},"stop":["x","y"]}`,
		`{"prompt":[1,2],"logit_bias":{"5":-100},"n":1,"best_of":1,"top_p":0.5}`,
		`{"prompt":null,"logprobs":null}`, `[]`, `{"prompt":1e400}`, `{"prompt":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseCompletionRequest(body)
		checkDecoded(t, r, err)
		if err == nil {
			if len(r.Prompts) == 0 || r.MaxTokens < 0 || r.Logprobs < -1 || r.Logprobs > maxLogprobs {
				t.Fatalf("accepted an invalid request: %+v", r)
			}
		}
	})
}

func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3,"stream":true}`,
		`{"messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"y"}]}],"max_tokens":5}`,
		`{"messages":[]}`, `{"messages":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseChatRequest(body)
		checkDecoded(t, r, err)
		if err == nil && (r.TopLogprobs < 0 || r.TopLogprobs > maxLogprobs || r.TopLogprobs > 0 && !r.Logprobs) {
			t.Fatalf("accepted an invalid request: %+v", r)
		}
	})
}

// TestShimImportsOnlyStdlibAndProjectPackages enforces the issue's
// minimality rule on the package and everything it pulls in.
func TestShimImportsOnlyStdlibAndProjectPackages(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/llbuild/llbuild/shim":     true,
		"github.com/llbuild/llbuild/gguf":     true,
		"github.com/llbuild/llbuild/manifest": true,
		// llama-server's own package: its process, native API and client
		"github.com/llbuild/llbuild/llamaserver": true,
		// the JSON scanner shared with llamaserver; it imports only the standard library
		"github.com/llbuild/llbuild/internal/jsonscan": true,
	}
	for _, dep := range strings.Fields(string(out)) {
		if !allowed[dep] {
			t.Errorf("shim depends on %s; it may use only the standard library and the project's manifest, gguf, llamaserver and internal/jsonscan packages", dep)
		}
	}
}
