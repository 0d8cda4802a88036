package llamaserver

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
)

// Against a real llama-server (Debian sid's): its HTTP library closes a kept-alive connection
// after 100 requests (saying Connection: close) and after 5 idle seconds (saying nothing). A
// pooled client's 250 calls in a row (over 3 connections) and a call after its 5-second idle close all
// get their answers, the last on a new connection after finding its kept one closed.
func TestRawPoolAgainstLlamaServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts llama-server and waits 5 s")
	}
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	srv := llamatest.Start(t, model, "-np", "1", "-t", "1")
	c := NewClient(srv.URL, "", WithPool(1))
	ctx := context.Background()
	for i := 0; i < 250; i++ {
		if ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "hello"}); err != nil || len(ids) == 0 {
			t.Fatalf("call %d: %v %v", i, ids, err)
		}
	}
	if n := c.raw.dials.Load(); n != 3 {
		t.Errorf("250 calls opened %d connections, want 3 (llama-server closes one after 100 requests)", n)
	}
	time.Sleep(5 * time.Second)
	c.raw.mu.Lock()
	kept := append([]*rawConn(nil), c.raw.idle...)
	c.raw.mu.Unlock()
	if len(kept) != 1 {
		t.Fatalf("%d connections kept after the calls, want 1", len(kept))
	}
	// llama-server closes it 5 s after its last answer; a loaded machine may take a while more
	kept[0].c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := kept[0].br.Peek(1)
	kept[0].c.SetReadDeadline(time.Time{})
	if !errors.Is(err, io.EOF) {
		t.Errorf("the kept connection after 5-10 idle seconds: %v, want it closed by llama-server (EOF), which the call below must then survive", err)
	}
	if ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "hello"}); err != nil || len(ids) == 0 {
		t.Fatalf("after llama-server closed the kept connection: %v %v", ids, err)
	}
	if n := c.raw.dials.Load(); n != 4 {
		t.Errorf("%d connections in all, want 4: the closed one replaced", n)
	}
}
