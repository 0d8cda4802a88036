package shim

// Resource limits and bad input (issue 27, items 5): idle connections are closed, a slow body
// gets 408, an oversized body a 413 that a client sending the whole body can read, and bad
// input 400 naming the field.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func dial(t *testing.T, ts *testShim) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	ts := ownShim(t, Options{IdleTimeout: 300 * time.Millisecond})
	var conns []net.Conn
	for i := 0; i < 32; i++ {
		c := dial(t, ts)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health on connection %d: %v %v", i, resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("idle connection %d after 1 s: read %v, want EOF (closed by the shim)", i, err)
		}
	}
}

func TestSlowBodyGets408(t *testing.T) {
	ts := ownShim(t, Options{BodyTimeout: 500 * time.Millisecond})
	c := dial(t, ts)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body within 5 s: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 500ms") {
		t.Errorf("stalled body: %d %s, want 408 saying so", resp.StatusCode, body)
	}
	// and the connection is closed then, though the client goes on trickling its body: a slow
	// client holds no connection (a descriptor and a goroutine) past the timeout
	closed := make(chan error, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		closed <- err
	}()
	for i := 0; i < 20; i++ {
		select {
		case err := <-closed:
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the 408: read %v, want the connection closed", err)
			}
			return
		case <-time.After(200 * time.Millisecond):
			c.Write([]byte(" "))
		}
	}
	t.Errorf("the connection of a client trickling its body was still open 4 s after the 408")
}

// A client that writes its whole body before reading (most do) reads the 413.
func TestOversizedBodyGets413TheClientCanRead(t *testing.T) {
	ts := ownShim(t, Options{MaxRequestBytes: 1 << 20})
	c := dial(t, ts)
	const size = 48 << 20
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			t.Fatalf("writing the body after %d MiB: %v (the shim closed the connection before the client could read its answer)", sent>>20, err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "exceeds 1048576 bytes") {
		t.Errorf("oversized body: %d %s, want 413", resp.StatusCode, body)
	}
}

func TestBadInputIsRefusedByName(t *testing.T) {
	for _, tt := range []struct {
		name, body, param, want string
		chat                    bool
	}{
		{"invalid UTF-8", "{\"prompt\":\"a\xff\"}", "", "not valid UTF-8", false},
		{"an empty prompt", `{"prompt":""}`, "prompt", "empty string", false},
		{"an empty prompt in a batch", `{"prompt":["a",""]}`, "prompt", `"prompt"[1] is an empty string`, false},
		{"a negative token id", `{"prompt":[1,-5]}`, "prompt", `"prompt"[1] is -5: a token id is a whole number from 0`, false},
		{"a fractional token id", `{"prompt":[1,5.5]}`, "prompt", `"prompt"[1] is 5.5`, false},
		{"a token id beyond int32", `{"prompt":[1,1099511627776]}`, "prompt", `"prompt"[1] is 1099511627776`, false},
		{"a bad token id in a batch", `{"prompt":[[1,2],[3,-1]]}`, "prompt", `"prompt"[1][1] is -1`, false},
		{"an unknown stream option", `{"prompt":"a","stream":true,"stream_options":{"foo":1}}`, "stream_options", "stream_options.foo", false},
		{"an empty content array", `{"messages":[{"role":"user","content":[]}]}`, "messages", `"messages"[0].content is an empty array`, true},
		{"an unknown role", `{"messages":[{"role":"wizard","content":"hi"}]}`, "messages", `role "wizard" is not a role`, true},
		{"null content", `{"messages":[{"role":"user","content":null}]}`, "messages", `content is required for role "user"`, true},
		{"content of another type", `{"messages":[{"role":"user","content":5}]}`, "messages", "must be a string or an array", true},
		// llama-server would download these from the serving host: any client could make it
		// request its own network
		{"an image by http URL", `{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"http://127.0.0.1:18099/img.png"}}]}]}`, "messages", `"messages"[0].content[1].image_url: the url must be a data: URL`, true},
		{"an image by https URL as a string", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"HTTPS://example.com/a.png"}]}]}`, "messages", `content[0].image_url: the url must be a data: URL`, true},
		{"a response format nested too deep", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"schema":` + strings.Repeat(`{"a":`, 80) + `1` + strings.Repeat(`}`, 80) + `}}}`, "response_format", `"response_format" is nested 82 deep; at most 64`, true},
		{"tools that are no array", `{"messages":[{"role":"user","content":"hi"}],"tools":"x"}`, "tools", `"tools" must be an array`, true},
		// keys as llama-server reads them: exact, the last of a repeated one
		{"an image URL under a key of another case", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"},"IMAGE_URL":{"url":"data:,"}}]}]}`, "messages", `content[0].image_url: the url must be a data: URL`, true},
		{"an image url beside a URL key", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/","URL":"data:,"}}]}]}`, "messages", `content[0].image_url: the url must be a data: URL`, true},
		{"audio by URL", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"http://10.0.0.1/a.wav","format":"wav"}}]}]}`, "messages", `content[0].input_audio.data: "http://10.0.0.1/a.wav" is a URL`, true},
		{"video by url", `{"messages":[{"role":"user","content":[{"type":"input_video","input_video":{"url":"HTTPS://x/v.mp4"}}]}]}`, "messages", `content[0].input_video.url`, true},
		{"tools nested too deep", `{"messages":[{"role":"user","content":"hi"}],"tools":[` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `]}`, "tools", `"tools" is nested 71 deep; at most 64`, true},
		{"an image by file URL", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`, "messages", `the url must be a data: URL`, true},
	} {
		t.Run(tt.name, func(t *testing.T) { wantRefused(t, tt.body, tt.chat, tt.param, tt.want) })
	}
	if _, err := parseChatRequest([]byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[]}]}`)); err != nil {
		t.Errorf("an assistant's tool call without content: %v, want it accepted", err)
	}
	ts := sharedShim(t)
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		req := map[string]any{"prompt": "a", "max_tokens": 1, "logit_bias": map[string]float64{"999999": 5}}
		if path != "/v1/completions" {
			req = map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 1, "logit_bias": map[string]float64{"999999": 5}}
		}
		var e errorAnswer
		if code := ts.post(t, path, req, &e); code != 400 || e.Error.Param != "logit_bias" || !strings.Contains(e.Error.Message, "token id 999999") {
			t.Errorf("%s with a bias for a token beyond the vocabulary: %d %+v, want 400 on logit_bias", path, code, e.Error)
		}
	}
}

// A request naming a model this server does not serve is 404 model_not_found, as OpenAI and
// vLLM answer; the name /v1/models lists, llama-server's alias and no name at all are served
// (issue 31).
func TestUnknownModelIs404(t *testing.T) {
	ts := sharedShim(t)
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 {
		t.Fatalf("/v1/models = %+v", models)
	}
	listed := models.Data[0].ID
	chat := func(model string) map[string]any {
		return map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 1}
	}
	for _, name := range []string{listed, listed + ".gguf", ""} {
		req := map[string]any{"prompt": "a", "max_tokens": 1}
		if name != "" {
			req["model"] = name
		}
		if code := ts.post(t, "/v1/completions", req, nil); code != 200 {
			t.Errorf("model %q: status %d, want 200", name, code)
		}
	}
	for path, req := range map[string]map[string]any{
		"/v1/completions":      {"model": "gpt-4o", "prompt": "a", "max_tokens": 1},
		"/v1/chat/completions": chat("gpt-4o"),
	} {
		var e struct {
			Error struct {
				Message, Param, Code string
			} `json:"error"`
		}
		if code := ts.post(t, path, req, &e); code != 404 || e.Error.Code != "model_not_found" || e.Error.Param != "model" || !strings.Contains(e.Error.Message, listed) {
			t.Errorf("%s with model gpt-4o: %d %+v, want 404 model_not_found naming %q", path, code, e.Error, listed)
		}
	}
	if code := ts.post(t, "/v1/chat/completions", chat(listed), nil); code != 200 {
		t.Errorf("chat with the listed model: status %d", code)
	}
}

// On a llama-server without the series, output that is not valid UTF-8 (a lone continuation
// byte) fails in its chat-output parser, plain completions too (issue 27, item 3). The shim
// names the cause and the fix (patch 0003), and a stream that breaks after it started ends
// with the error event and [DONE], as vLLM ends it, instead of stopping without an end.
func TestBrokenStreamSaysWhyAndEnds(t *testing.T) {
	sharedShim(t) // writes the model
	ts, err := startShim(unpatchedServer(t), sharedModel, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.stop()
	u := ts.upstream(t)
	bias := map[string]float64{}
	for s, id := range u.vocab.fragments {
		if len(s) == 1 && s[0] == 0x96 {
			bias[fmt.Sprint(id)] = 100
		}
	}
	if len(bias) != 1 {
		t.Fatalf("the tiny vocabulary has no <0x96> byte token")
	}
	// echo: the prompt is streamed first, so the failure comes mid-stream
	body, _ := json.Marshal(map[string]any{"prompt": "the quick", "max_tokens": 6, "stream": true, "echo": true, "temperature": 0, "logit_bias": bias})
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	events := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	if resp.StatusCode != 200 || len(events) < 3 {
		t.Fatalf("status %d, events %q; want the echo, the error and [DONE]", resp.StatusCode, events)
	}
	if last, errEv := events[len(events)-1], events[len(events)-2]; last != "data: [DONE]" || !strings.Contains(errEv, `"error"`) || !strings.Contains(errEv, "patch 0003") {
		t.Errorf("the stream ends %q, %q; want an error event naming patch 0003, then data: [DONE]", errEv, last)
	}
}

// A shim on loopback answers only requests addressed to a loopback name and sent by no other
// site's page: a browser lets any page post to 127.0.0.1 (text/plain needs no preflight), and
// DNS rebinding lets a page's own name resolve there. Programs send no Origin and are served.
func TestLoopbackShimRefusesOtherHostsAndSites(t *testing.T) {
	ts := sharedShim(t)
	port := ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:" + port, "", 200},
		{"localhost:" + port, "", 200},
		{"LOCALHOST.:" + port, "", 200},
		{"[::1]:" + port, "", 200},
		{"127.0.0.1:" + port, "http://localhost:3000", 200},
		{"attacker.example:" + port, "", 403},
		{"127.0.0.1.nip.io:" + port, "", 403},
		{"127.0.0.1:" + port, "http://attacker.example", 403},
		{"127.0.0.1:" + port, "null", 403},
		{"127.0.0.1:" + port, "chrome-extension://abcdefghijklmnop", 200},
		{"127.0.0.1:" + port, "vscode-webview://1a2b", 200},
	} {
		req, err := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		req.Header.Set("Content-Type", "text/plain")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || tc.want == 403 && !strings.Contains(string(body), "loopback") {
			t.Errorf("Host %s, Origin %q: %d %s, want %d", tc.host, tc.origin, resp.StatusCode, body, tc.want)
		}
	}
}

// The prompt logprobs one request asks for are bounded (Options.MaxEchoEntries): the answer is
// built whole, and a batch of long prompts with many logprobs each took the shim to 4.2 GB. A
// batch within the bound is answered; one beyond it is a 400 that says how to split it.
func TestEchoBatchesAreBounded(t *testing.T) {
	ts := ownShim(t, Options{MaxEchoEntries: 200})
	batch := func(n int) map[string]any {
		prompts := make([]any, n)
		for i := range prompts {
			prompts[i] = []int{1, 5, 9, 14, 20, 27, 35, 44, 54, 65} // 10 tokens
		}
		return map[string]any{"prompt": prompts, "max_tokens": 0, "echo": true, "logprobs": 4}
	}
	if code := ts.post(t, "/v1/completions", batch(4), nil); code != 200 { // 4 × 10 × 5 = 200
		t.Errorf("a batch at the bound: %d, want 200", code)
	}
	var e errorAnswer
	if code := ts.post(t, "/v1/completions", batch(5), &e); code != 400 || e.Error.Param != "prompt" || !strings.Contains(e.Error.Message, "more than 200 prompt logprob entries") {
		t.Errorf("a batch beyond the bound: %d %+v, want 400 on prompt", code, e.Error)
	}
	// a streamed batch sends each prompt's rows as they come: it is not built whole, nor bounded
	streamed := batch(5)
	streamed["stream"] = true
	if code := ts.post(t, "/v1/completions", streamed, nil); code != 200 {
		t.Errorf("a streamed batch beyond the bound: %d, want 200", code)
	}
	// generation without echo, and echo without logprobs, ask for none
	if code := ts.post(t, "/v1/completions", map[string]any{"prompt": []any{"a b c", "d e f"}, "max_tokens": 2, "echo": true}, nil); code != 200 {
		t.Errorf("echo without logprobs: %d, want 200", code)
	}
}

// A client that asks before sending its body (Expect: 100-continue, as curl does for a large
// one) hears 413 at once instead of 100 Continue, and sends nothing.
func TestOversizedBodyAnnouncedIsRefusedBeforeItIsSent(t *testing.T) {
	ts := ownShim(t, Options{MaxRequestBytes: 1 << 20})
	c := dial(t, ts)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 100<<20)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "exceeds 1048576 bytes") {
		t.Errorf("announced oversized body: %d %s, want 413 before any body", resp.StatusCode, body)
	}
}

// Media sent to a server without a projector is the client's mistake, a 400 on messages that
// says how to bundle one, not llama-server's 500 passed on as a 502.
func TestMediaWithoutAProjectorIs400(t *testing.T) {
	ts := sharedShim(t)
	for name, part := range map[string]any{
		"image": map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0KGgo="}},
		"audio": map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": "UklGRg==", "format": "wav"}},
	} {
		req := map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "x"}, part}}}, "max_tokens": 2}
		var e errorAnswer
		if code := ts.post(t, "/v1/chat/completions", req, &e); code != 400 || e.Error.Param != "messages" || !strings.Contains(e.Error.Message, "no "+map[string]string{"image": "vision", "audio": "audio"}[name]+" projector") {
			t.Errorf("%s to a server without a projector: %d %+v, want 400 on messages", name, code, e.Error)
		}
	}
}

func TestJSONDepthSkipsStrings(t *testing.T) {
	for raw, want := range map[string]int{`1`: 0, `[]`: 1, `{"a":[{"b":"[[[{{"}]}`: 3, `"\\"`: 0, `["\"[["]`: 1} {
		if got := jsonDepth([]byte(raw)); got != want {
			t.Errorf("jsonDepth(%s) = %d, want %d", raw, got, want)
		}
	}
}

// A reverse proxy on this machine that passes the Host it was asked for (Caddy's default) is
// named with Options.AllowHosts (serve --allow-host): that name, and pages of that site, are
// answered; others still are not.
func TestLoopbackShimAnswersTheHostsItIsTold(t *testing.T) {
	ts := ownShim(t, Options{AllowHosts: []string{"LLM.example.org"}})
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"llm.example.org", "", 200},
		{"llm.example.org:443", "https://llm.example.org", 200},
		{"other.example.org", "", 403},
		{"llm.example.org", "https://evil.example", 403},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":1}`))
		req.Host = tc.host
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s, Origin %q: %d, want %d", tc.host, tc.origin, resp.StatusCode, tc.want)
		}
	}
}

// The stream options other APIs' clients send are taken; an unknown one is not (the table above).
func TestStreamOptionsOfOtherClientsAreTaken(t *testing.T) {
	r, err := parseCompletionRequest([]byte(`{"prompt":"a","stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false,"continuous_usage_stats":false}}`))
	if err != nil || !r.IncludeUsage {
		t.Errorf("parse = %+v, %v; want include_usage taken and the others ignored", r, err)
	}
}

// The context's limits, as llama-server keeps them: a prompt longer than the context is 400
// naming both sizes; a prompt that fits with max_tokens past the context generates until the
// context is full and says so with finish_reason "length" (the client sees fewer tokens than
// it asked for, and why), as llama-server does and OpenAI's max_tokens cut-off reads.
func TestTheContextEndsAGenerationOrRefusesAPrompt(t *testing.T) {
	ts := ownShim(t, Options{ServerArgs: []string{"-np", "1", "-t", "2", "-c", "256"}})
	ids := []int{1}
	for i := range 200 {
		ids = append(ids, 3+(i*37)%200)
	}
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if code := ts.post(t, "/v1/completions", map[string]any{"prompt": ids, "max_tokens": 100, "temperature": 0, "ignore_eos": true}, &out); code != 200 || len(out.Choices) != 1 ||
		out.Choices[0].FinishReason != "length" || out.Usage.PromptTokens != len(ids) || out.Usage.PromptTokens+out.Usage.CompletionTokens != 256 {
		t.Errorf("a prompt of %d tokens with max_tokens 100 in a context of 256: %d %+v, want 200 finished by length at 256 tokens in all", len(ids), code, out)
	}
	var e errorAnswer
	long := append(append([]int{}, ids...), ids[1:100]...)
	if code := ts.post(t, "/v1/completions", map[string]any{"prompt": long, "max_tokens": 1}, &e); code != 400 || !strings.Contains(e.Error.Message, "exceeds the available context size (256 tokens)") {
		t.Errorf("a prompt of %d tokens in a context of 256: %d %+v, want 400 naming the context size", len(long), code, e.Error)
	}
}
