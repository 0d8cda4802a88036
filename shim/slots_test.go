package shim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSlotPoolPrefersTheSlotHoldingThePrefix: a prompt goes to the free slot
// whose last prompt shares the longest prefix with it (at least
// minSharedPrefix bytes), else to the least recently used one.
func TestSlotPoolPrefersTheSlotHoldingThePrefix(t *testing.T) {
	p := newSlotPool(3)
	ctx := context.Background()
	take := func(key string) int {
		t.Helper()
		s, err := p.acquire(ctx, time.Second, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	story := strings.Repeat("once upon a time ", 4)
	a := take(story + "a fox")
	p.release(a, []byte(story+"a fox"))
	if got := take(story + "a dog"); got != a {
		t.Errorf("a prompt sharing %d bytes went to slot %d, want %d, which holds them", len(story), got, a)
	} else {
		p.release(got, []byte(story+"a dog"))
	}
	// unrelated prompts take the least recently used slots and leave a's cache alone
	b := take("the capital of france is paris, and of spain madrid")
	c := take("two plus two is four, and three plus three is six")
	if b == a || c == a || b == c {
		t.Errorf("unrelated prompts took slots %d and %d with %d holding a shared prefix: want the two others", b, c, a)
	}
	p.release(b, []byte("the capital of france is paris, and of spain madrid"))
	p.release(c, []byte("two plus two is four, and three plus three is six"))
	if got := take(story + "a cat"); got != a {
		t.Errorf("after unrelated traffic the prompt went to slot %d, want %d", got, a)
	} else {
		p.release(got, nil)
	}
	// a short shared prefix ("the ") is no reason to pass over the least recently used slot
	if got := take("the end"); got != b {
		t.Errorf(`"the end" went to slot %d, want the least recently used %d`, got, b)
	}
}

// TestSlotPoolWaitsThenAnswers503: with every slot busy, acquire waits for a
// release, and past its wait says all slots stayed busy.
func TestSlotPoolWaitsThenAnswers503(t *testing.T) {
	p := newSlotPool(1)
	ctx := context.Background()
	s, err := p.acquire(ctx, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.acquire(ctx, 50*time.Millisecond, nil)
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("acquire with the only slot busy: %v, want a 503", err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		p.release(s, nil)
	}()
	if got, err := p.acquire(ctx, 10*time.Second, nil); err != nil || got != s {
		t.Fatalf("acquire after a release: slot %d, %v; want %d", got, err, s)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.acquire(cctx, time.Minute, nil); !errors.Is(err, errCanceled) {
		t.Fatalf("acquire with the client gone: %v, want errCanceled", err)
	}
}

// TestNextTurnReusesItsSlotsCache: through a real llama-server with two slots
// (no prompt cache in host memory, as bundles run it), a prompt that extends
// the previous one reuses its KV cache; handing slots out in turn sent it to
// the other slot, which re-read the whole prefix. Unrelated traffic in between
// takes the other slot.
func TestNextTurnReusesItsSlotsCache(t *testing.T) {
	sharedShim(t) // writes the model
	ts, err := startShim(llamaServer(t), sharedModel, Options{ServerArgs: []string{"--cache-ram", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.stop)
	story := strings.Repeat("the quick brown fox jumps over the lazy dog and ", 6)
	n := len(ts.tokenize(t, story, true))
	cached := func(prompt string) int {
		t.Helper()
		out := ts.complete(t, map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0})
		if out.Usage == nil || out.Usage.PromptTokensDetails == nil {
			t.Fatalf("no prompt_tokens_details in the usage of %q", prompt)
		}
		return out.Usage.PromptTokensDetails.CachedTokens
	}
	cached(story + "first")
	if got := cached(story + "second"); got < n-1 {
		t.Errorf("the second turn reused %d cached tokens, want the %d-token shared prefix (at least %d)", got, n, n-1)
	}
	cached("an unrelated prompt about the capital of france and of spain")
	if got := cached(story + "third"); got < n-1 {
		t.Errorf("after unrelated traffic the third turn reused %d cached tokens, want at least %d", got, n-1)
	}

	// a conversation through /v1/chat/completions: the next turn repeats the messages so far
	chat := func(msgs []map[string]string) (int, string) {
		t.Helper()
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				Details      *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if st := ts.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 3, "temperature": 0}, &out); st != 200 || len(out.Choices) == 0 {
			t.Fatalf("chat: status %d", st)
		}
		if out.Usage.Details == nil {
			t.Skip("this llama-server's chat usage has no prompt_tokens_details")
		}
		return out.Usage.Details.CachedTokens, out.Choices[0].Message.Content
	}
	msgs := []map[string]string{{"role": "user", "content": story}}
	_, reply := chat(msgs)
	msgs = append(msgs, map[string]string{"role": "assistant", "content": reply}, map[string]string{"role": "user", "content": "and then?"})
	if got, _ := chat(msgs); got < n/2 {
		t.Errorf("the conversation's second turn reused %d cached tokens, want most of its first turn's (about %d)", got, n)
	}
}
