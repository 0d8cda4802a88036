package shim

import (
	"context"
	"fmt"

	"github.com/llbuild/llbuild/llamaserver"
)

// nativeScorer reads prompt logprobs that a patched llama-server (llbuild's
// patch 0002-server-prompt-logprobs, advertised as prompt_logprobs in
// /props) computes while it processes the prompt: one request and about
// one prefill for all positions, instead of one decode per position. The
// server takes them from the raw logits exactly as it reports the
// probabilities of generated tokens with post_sampling_probs off.
type nativeScorer struct {
	u *upstream
	// few scores a handful of positions deep in a long sequence (the
	// generated tokens llama-server gave no probabilities for), where one
	// cached single-token decode per position beats a full prefill: the
	// native path reprocesses the whole sequence, as prompt positions
	// served from the prompt cache have no logits.
	few PromptScorer
}

func newNativeScorer(u *upstream) *nativeScorer {
	return &nativeScorer{u: u, few: &forcingScorer{u: u}}
}

func (n *nativeScorer) Name() string { return "native prompt logprobs" }

// forcingCostInPrefillTokens is about how many prompt tokens one prefill
// processes in the time of one teacher-forced position (a single-token
// decode, an HTTP round trip and a sort of the vocabulary): 15 to 25 on
// an H200 with a 1B-class model, fewer on a CPU.
const forcingCostInPrefillTokens = 16

// promptLogprobsFields are the response fields that carry prompt logprobs: the
// flat form where the server has it (patch 0008), else the full one.
func promptLogprobsFields(u *upstream) []string {
	if u.info.PromptLogprobsFlat {
		return []string{"prompt_logprobs_flat"}
	}
	return []string{"prompt_probabilities"}
}

func (n *nativeScorer) Score(ctx context.Context, slot int, seq []int, positions []int, top int) ([]Row, error) {
	if len(positions) == 0 {
		return nil, nil
	}
	for i, p := range positions {
		if p < 1 || p >= len(seq) || (i > 0 && p <= positions[i-1]) {
			return nil, fmt.Errorf("scoring position %d of a %d-token sequence (positions must ascend)", p, len(seq))
		}
	}
	last := positions[len(positions)-1]
	if len(positions)*forcingCostInPrefillTokens < last {
		return n.few.Score(ctx, slot, seq, positions, top)
	}
	req := &llamaserver.PromptLogprobsRequest{
		Prompt:         seq[:last+1],
		NPredict:       1,
		PromptLogprobs: max(top, 0),
		TopK:           1,
		Samplers:       []string{"top_k"},
		CachePrompt:    true,
		IDSlot:         slot,
		ResponseFields: promptLogprobsFields(n.u),
		Flat:           n.u.info.PromptLogprobsFlat,
		Base64:         n.u.info.PromptLogprobsBase64,
	}
	if n.u.vocab != nil && n.u.vocab.safe >= 0 {
		// The token generated after the prompt is discarded; force one
		// whose text is valid UTF-8 so that no llama-server fails on it.
		req.LogitBias = [][2]float64{{float64(n.u.vocab.safe), forcingBias}}
	}
	resp, err := n.u.ls.PromptLogprobs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reading prompt logprobs: %w", upstreamFailure(ctx, err))
	}
	return promptOf(resp).rows(seq[:last+1], positions, top)
}

// promptLogprobs are a patched llama-server's prompt logprobs: the full form
// (prompt_probabilities, patch 0002: an object per position with pieces and
// bytes) or the flat one (prompt_logprobs_flat, patch 0008: number arrays),
// whichever the answer has. Both carry the same floats.
type promptLogprobs struct {
	Full *[]llamaserver.TokenProb
	Flat *llamaserver.FlatLogprobs
}

// promptOf is the prompt logprobs of an answer, in whichever form the server sent them.
func promptOf(r *llamaserver.Completion) promptLogprobs {
	return promptLogprobs{Full: r.PromptProbs, Flat: r.PromptFlat}
}

// rows reads the rows at positions (ascending, within 1..len(seq)-1) for the
// prompt seq.
func (pl promptLogprobs) rows(seq []int, positions []int, top int) ([]Row, error) {
	if pl.Flat != nil {
		return flatRows(pl.Flat, seq, positions, top)
	}
	if pl.Full == nil {
		return nil, upstreamError("llama-server advertises prompt_logprobs but sent no prompt_probabilities")
	}
	probs := *pl.Full
	if len(probs) != len(seq)-1 {
		return nil, upstreamError("llama-server sent %d prompt probabilities for a %d-token prompt, want %d", len(probs), len(seq), len(seq)-1)
	}
	rows := make([]Row, len(positions))
	for i, p := range positions {
		pr := probs[p-1] // entry k is token k+1 given tokens 0..k
		if pr.ID != seq[p] {
			return nil, upstreamError("prompt probability %d is for token %d, want %d", p, pr.ID, seq[p])
		}
		row := Row{ID: pr.ID, Logprob: pr.Logprob, Top: make([]Alt, min(top, len(pr.Top)))}
		for j := range row.Top {
			row.Top[j] = Alt{ID: pr.Top[j].ID, Logprob: pr.Top[j].Logprob}
		}
		rows[i] = row
	}
	return rows, nil
}

// flatRows reads the rows at positions for the prompt seq from the flat form.
func flatRows(f *llamaserver.FlatLogprobs, seq []int, positions []int, top int) ([]Row, error) {
	n := len(seq) - 1
	if len(f.Logprobs) != n {
		return nil, upstreamError("llama-server sent %d flat prompt logprobs for a %d-token prompt, want %d", len(f.Logprobs), len(seq), n)
	}
	if f.NTop < 0 || len(f.TopIDs) != n*f.NTop || len(f.TopLogprobs) != n*f.NTop {
		return nil, upstreamError("llama-server sent %d top ids and %d top logprobs for %d positions with n_top %d, want %d of each", len(f.TopIDs), len(f.TopLogprobs), n, f.NTop, n*f.NTop)
	}
	k := min(top, f.NTop)
	rows := make([]Row, len(positions))
	alts := make([]Alt, len(positions)*k) // one allocation for every row's alternatives
	for i, p := range positions {
		row := Row{ID: seq[p], Logprob: f.Logprobs[p-1], Top: alts[i*k : (i+1)*k : (i+1)*k]}
		base := (p - 1) * f.NTop
		for j := range row.Top {
			row.Top[j] = Alt{ID: f.TopIDs[base+j], Logprob: f.TopLogprobs[base+j]}
		}
		rows[i] = row
	}
	return rows, nil
}
