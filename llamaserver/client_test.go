package llamaserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The client's typed errors and its reading of /completion streams, against a stand-in
// llama-server.
func TestClientErrorsAndStreams(t *testing.T) {
	var stream string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"code":401,"message":"Invalid API Key"}}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/tokenize":
			fmt.Fprint(w, `{"tokens":[1,2,3]}`)
		case "/detokenize":
			fmt.Fprint(w, `{"content":"not json`)
		case "/completion":
			fmt.Fprint(w, stream)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := NewClient(srv.URL, "k", WithPool(2))

	var wire time.Duration
	ids, err := c.Tokenize(WithWireTime(ctx, &wire), TokenizeRequest{Content: "x"})
	if err != nil || len(ids) != 3 || wire <= 0 {
		t.Errorf("Tokenize = %v, %v (wire %v), want 3 ids and a wire time", ids, err, wire)
	}
	var se *StatusError
	if _, err := NewClient(srv.URL, "").Tokenize(ctx, TokenizeRequest{}); !errors.As(err, &se) || se.Status != 401 || se.Path != "/tokenize" || se.Message() != "Invalid API Key" {
		t.Errorf("Tokenize without the key = %v, want a 401 StatusError with its message", err)
	}
	var de *DecodeError
	if _, err := c.Detokenize(ctx, []int{1}); !errors.As(err, &de) || de.Path != "/detokenize" {
		t.Errorf("Detokenize of a bad answer = %v, want a DecodeError", err)
	}

	var got []string
	collect := func(ch *Completion) error { got = append(got, ch.Content); return nil }
	stream = "data: {\"content\":\"a\"}\n\n: ping\n\ndata: {\"content\":\"b\",\"stop\":true}\n\n"
	if err := c.CompleteStream(ctx, &CompletionRequest{}, collect); err != nil || fmt.Sprint(got) != "[a b]" {
		t.Errorf("CompleteStream = %v, %v; want [a b]", got, err)
	}
	stream = "data: {\"content\":\"a\"}\n\n"
	if err := c.CompleteStream(ctx, &CompletionRequest{}, collect); !errors.Is(err, ErrStreamEnded) {
		t.Errorf("CompleteStream without a final chunk = %v, want ErrStreamEnded", err)
	}
	stream = "data: {\"error\":{\"message\":\"boom\"}}\n\n"
	var st *StreamError
	if err := c.CompleteStream(ctx, &CompletionRequest{}, collect); !errors.As(err, &st) || st.Err.Message != "boom" {
		t.Errorf("CompleteStream of an error chunk = %v, want a StreamError", err)
	}
	mine := errors.New("mine")
	stream = "data: {\"content\":\"a\"}\n\n"
	if err := c.CompleteStream(ctx, &CompletionRequest{}, func(*Completion) error { return mine }); err != mine {
		t.Errorf("CompleteStream with fn failing = %v, want fn's error as it is", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var ce *ConnError
	if _, err := NewClient("http://"+addr, "").Complete(ctx, &CompletionRequest{}); !errors.As(err, &ce) || ce.Path != "/completion" {
		t.Errorf("Complete of a closed port = %v, want a ConnError", err)
	}
}
