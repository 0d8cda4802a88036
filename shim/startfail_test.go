package shim

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestServerThatNeverStartsStopsTheShim checks that a llama-server that exits before it
// was ever ready (a bad argument, a model it cannot load, SIGILL) makes Run return its
// last output after a few attempts, instead of restarting it forever behind 503s.
func TestServerThatNeverStartsStopsTheShim(t *testing.T) {
	serverPath := llamaServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := Options{ServerPath: serverPath, ServerArgs: []string{"--no-such-llama-server-flag"}, Listener: l,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	err = Run(ctx, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if ctx.Err() != nil {
		t.Fatalf("Run kept restarting a llama-server that never started until the test's deadline (returned %v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "--no-such-llama-server-flag") {
		t.Errorf("Run = %v, want an error carrying llama-server's last output", err)
	}
}
