package shim

import (
	"strings"
	"testing"
)

// A server that keeps no prompt-logprob contract (a plain build's bundle) refuses echo with
// logprobs, saying why, instead of computing them token by token; echo without logprobs and
// ordinary completions still work.
func TestEchoRefusedWhereThereIsNoPromptLogprobContract(t *testing.T) {
	shared := sharedShim(t) // for its model
	const why = "built with the plain series: rebuild with --series scoring"
	ts, err := startShim(llamaServer(t), sharedModel, Options{NoPromptLogprobs: why})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.stop()
	var e struct {
		Error struct{ Message, Param string }
	}
	if code := ts.post(t, "/v1/completions", map[string]any{"prompt": "the gauge", "echo": true, "logprobs": 1, "max_tokens": 0}, &e); code != 400 ||
		e.Error.Message != why || e.Error.Param != "echo" {
		t.Errorf("echo with logprobs: %d %+v, want 400 saying %q", code, e, why)
	}
	var ok struct {
		Choices []struct{ Text string }
	}
	if code := ts.post(t, "/v1/completions", map[string]any{"prompt": "the gauge", "echo": true, "max_tokens": 2, "temperature": 0}, &ok); code != 200 ||
		len(ok.Choices) != 1 || !strings.HasPrefix(ok.Choices[0].Text, "the gauge") {
		t.Errorf("echo without logprobs: %d %+v, want 200 with the prompt echoed", code, ok)
	}
	// the same request to a server with the contract is answered
	if code := shared.post(t, "/v1/completions", map[string]any{"prompt": "the gauge", "echo": true, "logprobs": 1, "max_tokens": 0}, nil); code != 200 {
		t.Errorf("echo with logprobs on the shared shim: %d, want 200", code)
	}
}
