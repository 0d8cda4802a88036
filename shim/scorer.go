package shim

import (
	"context"
	"fmt"

	"github.com/llbuild/llbuild/llamaserver"
)

// Row is the log probability of one token given the tokens before it,
// with the most likely tokens at that position.
type Row struct {
	ID      int
	Logprob float64
	Top     []Alt // most likely first
}

// Alt is one candidate token at a position and its log probability.
type Alt struct {
	ID      int
	Logprob float64
}

// PromptScorer computes the logprob rows of tokens that llama-server did
// not sample itself: the prompt's tokens for echo, and generated tokens
// whose probabilities llama-server leaves out.
type PromptScorer interface {
	// Score returns, for each position p of positions (1 <= p < len(seq),
	// ascending), the row of seq[p] given seq[:p] with top alternatives.
	// It runs on llama-server's slot, which the caller holds.
	Score(ctx context.Context, slot int, seq []int, positions []int, top int) ([]Row, error)
	// Name says which method the scorer uses, for logs and benchmarks.
	Name() string
}

// forcingBias is the logit bias that makes the forced token win under
// greedy sampling; raw logits are many orders of magnitude smaller.
const forcingBias = 1e9

// forcingScorer computes exact prompt logprobs with an unmodified
// llama-server by teacher forcing: for position p it asks /completion for
// one token after seq[:p] with a logit bias that forces seq[p] and reads
// the raw-logit logprob llama-server reports for it. With
// post_sampling_probs off those numbers are a softmax of the model's
// logits, which a logit bias does not change; with the prompt cache and
// the same slot each position costs one single-token decode.
type forcingScorer struct {
	u *upstream
}

func (f *forcingScorer) Name() string { return "teacher-forcing" }

func (f *forcingScorer) Score(ctx context.Context, slot int, seq []int, positions []int, top int) ([]Row, error) {
	rows := make([]Row, len(positions))
	topK := 1
	for i, p := range positions {
		if p < 1 || p >= len(seq) {
			return nil, fmt.Errorf("scoring position %d of a %d-token sequence", p, len(seq))
		}
		want := seq[p]
		forced, nProbs := want, max(top, 1)
		if !f.u.vocab.forceable(want) {
			// llama-server returns no probabilities for a token that ends in
			// an incomplete UTF-8 sequence, so force a harmless token instead
			// and find want in the full distribution, which does not depend
			// on the token forced.
			forced, nProbs = f.u.vocab.safe, f.u.vocab.size()
		}
		req := &llamaserver.CompletionRequest{
			Prompt:         seq[:p],
			NPredict:       1,
			NProbs:         nProbs,
			Temperature:    new(float64),
			TopK:           &topK,
			Samplers:       []string{"top_k"},
			LogitBias:      [][2]float64{{float64(forced), forcingBias}},
			CachePrompt:    true,
			IDSlot:         slot,
			ReturnTokens:   true,
			ResponseFields: []string{"tokens", "completion_probabilities"},
		}
		resp, err := f.u.complete(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("scoring position %d: %w", p, err)
		}
		if len(resp.Probs) != 1 || resp.Probs[0].ID != forced {
			return nil, upstreamError("scoring position %d: llama-server did not generate the forced token %d (got tokens %v, %d probability entries)", p, forced, resp.Tokens, len(resp.Probs))
		}
		pr := resp.Probs[0]
		row := Row{ID: want, Logprob: pr.Logprob}
		if forced != want {
			found := false
			for _, a := range pr.Top {
				if a.ID == want {
					row.Logprob, found = a.Logprob, true
					break
				}
			}
			if !found {
				return nil, upstreamError("scoring position %d: token %d missing from the full distribution", p, want)
			}
		}
		n := min(top, len(pr.Top))
		row.Top = make([]Alt, n)
		for j := range n {
			row.Top[j] = Alt{ID: pr.Top[j].ID, Logprob: pr.Top[j].Logprob}
		}
		rows[i] = row
	}
	return rows, nil
}

// chooseScorer picks the fastest exact scorer the server offers: native
// prompt logprobs when it advertises them (prompt_logprobs in /props, a
// llama-server with llbuild's patch), teacher forcing otherwise.
func chooseScorer(u *upstream) PromptScorer {
	if u.info.PromptLogprobs {
		return newNativeScorer(u)
	}
	return &forcingScorer{u: u}
}
