package shim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/llamaserver"
)

// While llama-server restarts, a request finds its connection closed or refused. The 503
// the client gets says so without the private loopback address and ports the shim talks
// to llama-server on. The peers here are real TCP sockets standing for a llama-server that
// dies mid-request (accepts, then closes) and one not yet listening (refuses).
func TestUnavailableHidesThePrivateUpstreamAddress(t *testing.T) {
	closing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer closing.Close()
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			c.Read(buf)
			c.(*net.TCPConn).SetLinger(0) // a reset, as from a killed process
			c.Close()
		}
	}()
	refusing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refusing.Addr().String()
	refusing.Close()

	for _, tc := range []struct {
		name, addr string
	}{
		{"connection reset mid-request", closing.Addr().String()},
		{"connection refused while restarting", refusedAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &upstream{base: "http://" + tc.addr, ls: llamaserver.NewClient("http://"+tc.addr, "", llamaserver.WithPool(1))}
			var out map[string]any
			err := u.postJSON(context.Background(), "/completion", map[string]any{"prompt": "x"}, &out)
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
				t.Fatalf("postJSON() = %v, want a 503", err)
			}
			_, port, _ := net.SplitHostPort(tc.addr)
			if strings.Contains(ae.Message, "127.0.0.1") || strings.Contains(ae.Message, port) || strings.Contains(ae.Message, "tcp") {
				t.Errorf("503 message %q exposes the upstream address %s", ae.Message, tc.addr)
			}
			if !strings.Contains(ae.Message, "llama-server") || !strings.Contains(ae.Message, "retry") {
				t.Errorf("503 message %q, want it to say llama-server is not answering and to retry", ae.Message)
			}
		})
	}
}
