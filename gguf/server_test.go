package gguf_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
)

func post(t *testing.T, url string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: status %d: %s", url, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("POST %s: decoding %s: %v", url, raw, err)
	}
}

func writeModel(t *testing.T, name string, o gguf.TinyOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := gguf.WriteTinyLlamaFile(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRealServerRunsTinyModel proves the tiny model is a real model: sid's
// llama-server loads it, generates with it and tokenizes with its
// vocabulary.
func TestRealServerRunsTinyModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts gguf.TinyOptions
	}{
		{"f16 v3", gguf.DefaultTiny()},
		{"f32 v2", func() gguf.TinyOptions { o := gguf.DefaultTiny(); o.F32, o.Version = true, 2; return o }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := writeModel(t, "tiny.gguf", tc.opts)
			srv := llamatest.Start(t, model, "-c", "512", "-t", "2")

			var comp struct {
				Content         string `json:"content"`
				TokensPredicted int    `json:"tokens_predicted"`
				TokensEvaluated int    `json:"tokens_evaluated"`
			}
			post(t, srv.URL+"/completion", map[string]any{"prompt": "the quick brown", "n_predict": 8, "temperature": 0}, &comp)
			// <s> ▁the ▁quick ▁brown: four prompt tokens, eight generated.
			if comp.TokensPredicted != 8 || comp.TokensEvaluated != 4 || comp.Content == "" {
				t.Errorf("/completion predicted %d evaluated %d content %q, want 8, 4 and text", comp.TokensPredicted, comp.TokensEvaluated, comp.Content)
			}
			var again struct {
				Content string `json:"content"`
			}
			post(t, srv.URL+"/completion", map[string]any{"prompt": "the quick brown", "n_predict": 8, "temperature": 0}, &again)
			if again.Content != comp.Content {
				t.Errorf("greedy completion changed between runs: %q then %q", comp.Content, again.Content)
			}

			for _, text := range []string{"hello world the model", "The Quick Brown Fox", "café ☕\nline two", "zzz qqq 12345"} {
				var tok struct {
					Tokens []int `json:"tokens"`
				}
				post(t, srv.URL+"/tokenize", map[string]any{"content": text}, &tok)
				if len(tok.Tokens) == 0 {
					t.Fatalf("/tokenize %q gave no tokens", text)
				}
				var detok struct {
					Content string `json:"content"`
				}
				post(t, srv.URL+"/detokenize", map[string]any{"tokens": tok.Tokens}, &detok)
				// SentencePiece adds a space before the text.
				if got := strings.TrimPrefix(detok.Content, " "); got != text {
					t.Errorf("detokenize(tokenize(%q)) = %q", text, detok.Content)
				}
			}
			var chat struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
					Logprobs struct {
						Content []struct {
							Logprob     float64 `json:"logprob"`
							TopLogprobs []any   `json:"top_logprobs"`
						} `json:"content"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			post(t, srv.URL+"/v1/chat/completions", map[string]any{
				"messages":   []map[string]string{{"role": "user", "content": "hello"}},
				"max_tokens": 4, "temperature": 0, "logprobs": true, "top_logprobs": 3,
			}, &chat)
			if len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" || len(chat.Choices[0].Logprobs.Content) != 4 || len(chat.Choices[0].Logprobs.Content[0].TopLogprobs) != 3 {
				t.Errorf("/v1/chat/completions = %+v, want one choice with text and 4 tokens of 3 top logprobs (the chat template renders)", chat)
			}

			var pieces struct {
				Tokens []struct {
					ID    int `json:"id"`
					Piece any `json:"piece"`
				} `json:"tokens"`
			}
			post(t, srv.URL+"/tokenize", map[string]any{"content": "hello world", "with_pieces": true}, &pieces)
			var got []any
			for _, p := range pieces.Tokens {
				got = append(got, p.Piece)
			}
			if len(got) != 2 || got[0] != " hello" || got[1] != " world" {
				t.Errorf("/tokenize pieces of %q = %v, want [\" hello\" \" world\"]", "hello world", got)
			}
		})
	}
}

// TestRealServerRunsWithTinyDraft starts the tiny model with DraftTiny as
// its speculative draft, the pairing bundle tests rely on.
func TestRealServerRunsWithTinyDraft(t *testing.T) {
	model := writeModel(t, "tiny.gguf", gguf.DefaultTiny())
	draft := writeModel(t, "draft.gguf", gguf.DraftTiny())
	srv := llamatest.Start(t, model, "-c", "512", "-t", "2", "--model-draft", draft, "--spec-draft-n-max", "4")
	var comp struct {
		TokensPredicted int `json:"tokens_predicted"`
	}
	post(t, srv.URL+"/completion", map[string]any{"prompt": "hello world", "n_predict": 16, "temperature": 0}, &comp)
	if comp.TokensPredicted != 16 {
		t.Errorf("/completion with a draft predicted %d tokens, want 16", comp.TokensPredicted)
	}
}
