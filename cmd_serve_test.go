package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/internal/testwriter"
)

// serving is a `llbuild serve` run by a test: its base URL and its stderr.
type serving struct {
	base   string
	stderr *testwriter.Buffer
	cancel context.CancelFunc
	code   chan int
	exit   *int
}

// startServe runs `llbuild serve DIR` on a free loopback port until stop (or the test's end)
// and returns it once /health answers 200.
func startServe(t *testing.T, dir string, extra ...string) *serving {
	t.Helper()
	port, err := llamatest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{base: "http://" + addr, stderr: &testwriter.Buffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() {
		s.code <- run(ctx, append([]string{"llbuild", "serve", dir, "--addr", addr}, extra...), strings.NewReader(""), &testwriter.Buffer{}, s.stderr)
	}()
	t.Cleanup(func() { s.stop(t) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(s.base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case c := <-s.code:
			s.exit = &c // stop, at the cleanup, has nothing left to wait for
			t.Fatalf("serve exited %d before it was healthy:\n%s", c, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not healthy after a minute:\n%s", s.stderr.String())
		}
	}
}

// stop ends the serve and returns its exit code (-1 if it did not stop within 30 s).
func (s *serving) stop(t *testing.T) int {
	if s.exit != nil {
		return *s.exit
	}
	s.cancel()
	c := -1
	select {
	case c = <-s.code:
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop within 30 s of its context ending")
	}
	s.exit = &c
	return c
}

// post sends body as JSON to the serve's /v1/completions, with key as its bearer token when key
// is not empty, and returns the status and the answer.
func (s *serving) post(t *testing.T, key string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"/v1/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}

// echoRows asks for lm-eval's echo of a short prompt (two tokens generated, logprobs 1) and
// returns the answer's token_logprobs; anything but a 200 with one choice ends the test, what
// naming the bundle.
func (s *serving) echoRows(t *testing.T, what string) []*float64 {
	t.Helper()
	st, body := s.post(t, "", map[string]any{"prompt": "the quick brown fox", "max_tokens": 2, "logprobs": 1, "echo": true, "temperature": 0})
	var out struct {
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); st != 200 || err != nil || len(out.Choices) != 1 {
		t.Fatalf("%s: completion: status %d %v %s\n%s", what, st, err, body, s.stderr.String())
	}
	return out.Choices[0].Logprobs.TokenLogprobs
}

// TestServeBundle serves a real bundle (sid's llama-server, a tiny model
// and a draft) with an API key, scores a prompt with echo through it, and
// stops it the way SIGTERM does: by cancelling run's context.
func TestServeBundle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	dir := realServerBundle(t)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, dir, "--api-key-file", keyFile)
	if st, _ := srv.post(t, "", map[string]any{"prompt": "hi"}); st != 401 {
		t.Errorf("without the API key: status %d, want 401", st)
	}
	st, body := srv.post(t, "s3cret", map[string]any{"prompt": "the quick brown fox", "max_tokens": 1, "logprobs": 1, "echo": true, "temperature": 0})
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); st != 200 || err != nil || len(out.Choices) != 1 {
		t.Fatalf("completion: status %d %v %s", st, err, body)
	}
	rows := out.Choices[0].Logprobs.TokenLogprobs
	if len(rows) < 3 || rows[0] != nil || rows[1] == nil {
		t.Errorf("echo rows %v, want null then logprobs", rows)
	}
	if out.Model != "tiny" {
		t.Errorf("model %q, want the bundle's model name tiny", out.Model)
	}
	if c := srv.stop(t); c != 0 {
		t.Errorf("serve exited %d after its context ended, want 0:\n%s", c, srv.stderr.String())
	}
	if !strings.Contains(srv.stderr.String(), "llama-server stopped") {
		t.Errorf("serve's log does not say llama-server stopped:\n%s", srv.stderr.String())
	}
}

func TestServeRefusesATamperedBundle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a real bundle")
	}
	dir := realServerBundle(t)
	model := filepath.Join(dir, "models", "tiny.gguf")
	f, err := os.OpenFile(model, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	var stdout, stderr bytes.Buffer
	c := run(context.Background(), []string{"llbuild", "serve", dir, "--addr", "127.0.0.1:0"}, strings.NewReader(""), &stdout, &stderr)
	if c != 1 || !strings.Contains(stderr.String(), "models/tiny.gguf") {
		t.Errorf("serve of a tampered bundle: exit %d, want 1 naming models/tiny.gguf:\n%s", c, stderr.String())
	}
}

func TestServeUsage(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, args := range [][]string{
		{"serve"},
		{"serve", "a", "b"},
		{"serve", t.TempDir(), "--addr", "nonsense"},
		{"serve", t.TempDir(), "--addr", "127.0.0.1:99999"},
		{"serve", t.TempDir(), "--addr", "127.0.0.1:abc"},
		{"serve", t.TempDir(), "--addr", "127.0.0.1:-1"},
		{"serve", t.TempDir(), "--allow-host", "llm.example.org:443"},
		{"serve", t.TempDir(), "--allow-host", "https://llm.example.org"},
		{"serve", t.TempDir(), "--api-key-file", empty},
		{"serve", filepath.Join(t.TempDir(), "missing")},
	} {
		if code, _, stderr := runCLI(t, args...); code != 2 {
			t.Errorf("llbuild %v: exit %d, want 2 (usage)\n%s", args, code, stderr)
		}
	}
}

// TestServeAnArchive: serve takes a bundle archive as the documents say (bundle --archive's
// .tar.zst): it is checked and unpacked into a temporary directory, served, and the directory is
// gone once serve has stopped.
func TestServeAnArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "bundle.tar.zst")
	if code, _, stderr := runCLI(t, "bundle", "--target", "cpu-v3", "--artifacts", sidArtifacts(t, "cpu-v3"), "--model", model,
		"--ctx-size", "512", "--threads", "2", "--parallel", "1", "-o", filepath.Join(dir, "bundle"), "--archive", archive, "--quiet"); code != exitOK {
		t.Fatalf("bundle --archive: exit %d\n%s", code, stderr)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	srv := startServe(t, archive)
	unpacked, _ := filepath.Glob(filepath.Join(tmp, "llbuild-bundle-*"))
	if len(unpacked) != 1 {
		t.Errorf("while serving, %d unpacked bundles in TMPDIR (%v), want 1", len(unpacked), unpacked)
	}
	if st, body := srv.post(t, "", map[string]any{"prompt": "the quick brown fox", "max_tokens": 2}); st != http.StatusOK {
		t.Errorf("a completion through the served archive: status %d: %s", st, body)
	}
	if c := srv.stop(t); c != 0 {
		t.Errorf("serve exited %d, want 0:\n%s", c, srv.stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "llbuild-bundle-*")); len(left) != 0 {
		t.Errorf("after serve stopped, %v is still there", left)
	}
}
