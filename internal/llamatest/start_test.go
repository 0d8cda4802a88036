package llamatest_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
)

func TestStartServesUntilStopped(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	srv := llamatest.Start(t, model, "-c", "256", "-t", "1")
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health = %d, want 200", resp.StatusCode)
	}
	srv.Stop()
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("server still running after Stop")
	}
	if _, err := http.Get(srv.URL + "/health"); err == nil {
		t.Error("GET /health after Stop succeeded, want a connection error")
	}
}
