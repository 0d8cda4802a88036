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
		{"main: loading model\nllama_model_load: error loading model: tensor 'blk.0.attn_q.weight' has wrong shape\nsrv    load_model: failed to load model, 'm.gguf'\nmain: exiting due to model loading error\n", "main: exiting due to model loading error"},
		{"a\nlast words at 0xdeadbeef\n\n", "last words at 0x?"},
		{"0.00.021.369 E srv    load_model: failed to load model, 'm.gguf'\n0.00.022.017 E srv  llama_server: exiting due to model loading error\n", "srv  llama_server: exiting due to model loading error"},
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
