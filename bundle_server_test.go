package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/manifest"
)

// sidArtifacts writes an artifact directory holding Debian sid's llama-server with every
// library it loads, sid's C library and dynamic loader among them, flattened the way the
// server recipe's outputs are (bin/llama-server, bin/*.so*). A bundle of it runs through
// its own loader on this older host, as a bundle with its own libc would anywhere.
func sidArtifacts(t testing.TB, target string) string {
	t.Helper()
	root := llamatest.Server(t).Root
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	files := []artifacts.InputFile{{Path: "bin/llama-server", From: filepath.Join(root, "usr/bin/llama-server"), Kind: artifacts.KindExecutable}}
	var libs []string
	for _, pattern := range []string{"*.so*", "llama/*.so*", "ggml/backends0/libggml-*.so"} {
		m, _ := filepath.Glob(filepath.Join(lib, pattern))
		libs = append(libs, m...)
	}
	seen := map[string]bool{}
	for _, p := range libs {
		base := filepath.Base(p)
		if target, err := os.Readlink(p); err == nil && strings.Contains(target, "/") {
			continue // only links to siblings travel
		}
		if seen[base] {
			t.Fatalf("two libraries named %s in sid's sysroot", base)
		}
		seen[base] = true
		files = append(files, artifacts.InputFile{Path: "bin/" + base, From: p, Kind: artifacts.KindLibrary})
	}
	if !seen["ld-linux-x86-64.so.2"] {
		t.Fatalf("no dynamic loader in %s", lib)
	}
	return writeTestArtifacts(t, t.TempDir(), target, files)
}

// realServerBundle bundles sid's llama-server with a tiny model and a plain draft, and
// returns the bundle directory. Tests that serve a bundle (llbuild serve) can use it.
func realServerBundle(t testing.TB) string {
	t.Helper()
	arts := sidArtifacts(t, "cpu-v3")
	dir := t.TempDir()
	model, draft := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "tiny-draft.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteTinyLlamaFile(draft, gguf.DraftTiny()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"llbuild", "bundle", "--target", "cpu-v3", "--artifacts", arts,
		"--model", model, "--draft", draft, "--ctx-size", "512", "--threads", "2", "--parallel", "1",
		"--spec-draft-n-max", "4", "-o", out, "--quiet"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("bundling sid's llama-server: exit %d\n%s", code, stderr.String())
	}
	return out
}

// TestBundledServerRuns starts the llama-server of a bundle exactly as its manifest says
// (manifest.Launch, the mapping llbuild serve uses) and asks it for a completion.
func TestBundledServerRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	dir := realServerBundle(t)
	if ps := manifest.Verify(dir); len(ps) != 0 {
		t.Fatalf("bundle does not verify: %v", ps)
	}
	m, err := manifest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Server.Loader != "lib/ld-linux-x86-64.so.2" {
		t.Fatalf("loader = %q, want the bundle's own", m.Server.Loader)
	}
	l, err := m.Launch(dir)
	if err != nil {
		t.Fatal(err)
	}
	port, err := llamatest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "llama-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	serverLog := func() string { b, _ := os.ReadFile(logPath); return tailOf(string(b)) }
	cmd := exec.Command(l.Path, append(l.Args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))...)
	// A bare environment: nothing from the host's library path may help it start.
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, l.Env...)
	cmd.Dir = l.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("bundled llama-server exited: %v\n%s", err, serverLog())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("bundled llama-server not healthy after a minute\n%s", serverLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Post(base+"/completion", "application/json", strings.NewReader(`{"prompt": "the quick brown", "n_predict": 8, "temperature": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct {
		Content   string `json:"content"`
		Predicted int    `json:"tokens_predicted"`
	}
	if err := json.Unmarshal(body, &got); resp.StatusCode != 200 || err != nil || got.Predicted == 0 {
		t.Fatalf("/completion: %d %v %s", resp.StatusCode, err, body)
	}
	t.Logf("bundled llama-server completed %q (%d tokens)", got.Content, got.Predicted)
	if !strings.Contains(serverLog(), "tiny-draft.gguf") {
		t.Errorf("llama-server's log does not mention the draft model:\n%s", serverLog())
	}
}

func tailOf(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}
