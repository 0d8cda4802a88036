package llamaserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCrashLineIsTheAssertion(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"load_tensors: loading model\n/src/ggml/src/ggml-backend.cpp:1692: GGML_ASSERT(n_backends > 0) failed\n#0 0x7f3a2b 0x55aa\nAborted\n", "/src/ggml/src/ggml-backend.cpp:1692: GGML_ASSERT(n_backends > 0) failed"},
		{"main: loading model\nllama_model_load: error loading model: tensor 'blk.0.attn_q.weight' has wrong shape\nsrv    load_model: failed to load model, 'm.gguf'\nmain: exiting due to model loading error\n", "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' has wrong shape"},
		{"llama_model_load: loading\nllama_model_load: tensor 'blk.2.attn_norm.weight' not found\nmain: exiting due to model loading error\n", "llama_model_load: tensor 'blk.2.attn_norm.weight' not found"},
		{"a\nlast words at 0xdeadbeef\n\n", "last words at 0x?"},
		{"0.00.021.369 E srv    load_model: failed to load model, 'm.gguf'\n0.00.022.017 E srv  llama_server: exiting due to model loading error\n", "srv    load_model: failed to load model, 'm.gguf'"},
		{"", ""},
	} {
		if got := CrashLine(tc.out); got != tc.want {
			t.Errorf("CrashLine(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

// A server that asserts at every start (a script standing for llama-server aborting in the
// scheduler's reserve, as the lab's did) is started twice, not five times, with
// GiveUpOnSameCrash; without it supervision tries five times.
func TestSameCrashTwiceIsNotStartedAgain(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho start >> "+count+"\necho 'ggml-backend.cpp:1692: GGML_ASSERT(n_backends > 0) failed'\necho \"pid $$ at 0x$$\"\nexit 134\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		give   bool
		starts int
	}{{true, 2}, {false, 5}} {
		os.Remove(count)
		p, err := Start(context.Background(), Options[struct{}]{Path: script, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, GiveUpOnSameCrash: tc.give}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Ready(context.Background())
		p.Stop()
		b, _ := os.ReadFile(count)
		if n := strings.Count(string(b), "start"); n != tc.starts {
			t.Errorf("GiveUpOnSameCrash %v: %d starts, want %d", tc.give, n, tc.starts)
		}
		var crash *CrashError
		if got := errors.As(err, &crash); got != tc.give {
			t.Errorf("GiveUpOnSameCrash %v: Ready() = %v, a *CrashError: %v", tc.give, err, got)
		} else if got && (crash.Exits != 2 || !strings.Contains(crash.Line, "GGML_ASSERT(n_backends > 0) failed")) {
			t.Errorf("crash %+v", crash)
		}
	}
}

// A server that fails with another line at each start (a counter in its message) is started
// twice too, not five times; one that dies of a signal has the signal named.
func TestNeverReadyIsStartedTwiceWhateverItSays(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "starts")
	for _, tc := range []struct {
		name, body, line, signal string
	}{
		{"a different line each time", "echo \"error: attempt $(wc -l < " + count + ")\"\nexit 1\n", "error: attempt", ""},
		{"a segmentation fault", "echo 'llama_model_load: tensor blk.2.attn_norm.weight not found'\nkill -SEGV $$\n", "not found", "SIGSEGV"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(count)
			script := filepath.Join(dir, "llama-server")
			if err := os.WriteFile(script, []byte("#!/bin/sh\necho start >> "+count+"\n"+tc.body), 0o755); err != nil {
				t.Fatal(err)
			}
			p, err := Start(context.Background(), Options[struct{}]{Path: script, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, GiveUpOnSameCrash: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Ready(context.Background())
			p.Stop()
			b, _ := os.ReadFile(count)
			var crash *CrashError
			if n := strings.Count(string(b), "start"); n != 2 || !errors.As(err, &crash) {
				t.Fatalf("%d starts, error %v: want 2 and a *CrashError", n, err)
			}
			if !strings.Contains(crash.Line, tc.line) || crash.Signal != tc.signal || (tc.signal != "" && !strings.Contains(crash.Error(), tc.signal)) {
				t.Errorf("crash %+v (%v), want the line with %q and signal %q", crash, crash, tc.line, tc.signal)
			}
		})
	}
}
