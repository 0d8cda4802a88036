package shim

import (
	"bytes"
	"net/http"
	"testing"
)

// TestPrivateServerAnswersOnlyTheShim: llama-server listens on a loopback port any local user
// can reach, so the shim starts it with a key of its own; without that key the port refuses
// completions, while requests through the shim work.
func TestPrivateServerAnswersOnlyTheShim(t *testing.T) {
	ts := sharedShim(t)
	u := ts.upstream(t)
	if u.key == "" {
		t.Fatal("llama-server was started without an API key")
	}
	body := []byte(`{"prompt":"hello","n_predict":1}`)
	resp, err := http.Post(u.base+"/completion", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST %s/completion without the key = %d, want 401", u.base, resp.StatusCode)
	}
	var out completionResponse
	if st := ts.post(t, "/v1/completions", map[string]any{"prompt": "hello", "max_tokens": 1}, &out); st != 200 {
		t.Errorf("POST /v1/completions through the shim = %d, want 200", st)
	}
}
