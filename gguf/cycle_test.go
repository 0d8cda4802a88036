package gguf

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// pseudoText is a text of made-up words with enough distinct pieces for a walk of several
// hundred tokens.
func pseudoText(words int) string {
	rng := rand.New(rand.NewPCG(3, 4))
	syl := []string{"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "bra", "fle", "gro", "pli", "str", "ond", "ex", "ish", "um", "ar"}
	var b strings.Builder
	for i := 0; i < words; i++ {
		for j := 0; j < 1+rng.IntN(3); j++ {
			b.WriteString(syl[rng.IntN(len(syl))])
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// argmaxNext is each token's most likely next token under m: the final RMS norm (weight one)
// leaves an embedding of squared norm n as it is, so the logits are its products with the
// output rows.
func argmaxNext(m *bigramModel, n int) []int {
	V := len(m.tokens)
	next := make([]int, V)
	for t := 0; t < V; t++ {
		e := m.embd[t*n : (t+1)*n]
		best, arg := -1e30, -1
		for s := 0; s < V; s++ {
			o := m.out[s*n : (s+1)*n]
			var v float64
			for i := range e {
				v += float64(e[i]) * float64(o[i])
			}
			if v > best {
				best, arg = v, s
			}
		}
		next[t] = arg
	}
	return next
}

// With Cycle the target's greedy output is one walk through Cycle tokens, from any token: it
// repeats only after Cycle tokens. Its draft (the same factorization blurred) agrees on most
// steps of the walk but not all, so a draft's acceptance falls with its length.
func TestBigramCycleIsOneLongWalk(t *testing.T) {
	text := pseudoText(20000)
	const cycle = 600
	target := BigramShapes["target"]
	target.Cycle = cycle
	tm, err := bigramMatrices(text, target, target.Model.Embd)
	if err != nil {
		t.Fatal(err)
	}
	if tm.stats.Explained < 0.999 {
		t.Errorf("rank %d keeps %.4f of the walk's logits, want all (it is rank %d)", target.Rank, tm.stats.Explained, target.Rank)
	}
	next := argmaxNext(tm, target.Model.Embd)
	// from the text's most frequent piece, and from a byte token off the walk
	for _, start := range []int{3, len(tm.tokens) - 1} {
		seen := map[int]int{}
		tok := start
		for i := 0; i < 2*cycle; i++ {
			tok = next[tok]
			if j, ok := seen[tok]; ok {
				if period := i - j; period != cycle {
					t.Fatalf("from token %d the greedy walk repeats after %d tokens, want %d", start, period, cycle)
				}
				break
			}
			seen[tok] = i
		}
		if len(seen) != cycle {
			t.Errorf("from token %d the walk visits %d tokens, want %d", start, len(seen), cycle)
		}
	}
	draft := BigramShapes["draft"]
	draft.Cycle, draft.Noise = cycle, CycleDraftNoise
	dm, err := bigramMatrices(text, draft, draft.Model.Embd)
	if err != nil {
		t.Fatal(err)
	}
	dnext := argmaxNext(dm, draft.Model.Embd)
	agree, on := 0, 0
	for tok, i := next[3], 0; i < cycle; tok, i = next[tok], i+1 {
		on++
		if dnext[tok] == next[tok] {
			agree++
		}
	}
	rate := float64(agree) / float64(on)
	if rate < 0.8 || rate > 0.98 {
		t.Errorf("the draft agrees on %d of the walk's %d steps (%.2f), want most but not all", agree, on, rate)
	}
	t.Logf("draft (noise %.1f) agrees on %d of %d steps of the walk (%.3f)", draft.Noise, agree, on, rate)
	if _, err := bigramMatrices(text, BigramOptions{Model: target.Model, Rank: 64, Cycle: 100}, 128); err == nil || !strings.Contains(err.Error(), "a cycle of 100 tokens") {
		t.Errorf("a cycle of 100: %v, want a refusal (bench would take it for a loop)", err)
	}
	if _, err := bigramMatrices(text, BigramOptions{Model: target.Model, Rank: 64, Cycle: len(tm.tokens)}, 128); err == nil || !strings.Contains(err.Error(), "the pieces the text has") {
		t.Errorf("a cycle through every token: %v, want a refusal (control and byte tokens are not text)", err)
	}
	for tok, i := next[3], 0; i < cycle; tok, i = next[tok], i+1 {
		if tm.types[tok] != tokenNormal {
			t.Fatalf("the walk goes through token %d (%q), type %d: want only the text's pieces", tok, tm.tokens[tok], tm.types[tok])
		}
	}
}
