package gguf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// BigramOptions describe a llama model that predicts the next token from the last one, as a
// low-rank bigram model of a text written into its weights: a model whose distributions look
// like a language model's (peaked where the text is predictable, spread where it is not), for
// measuring speculation and sanity-checking scores, where random weights cannot serve.
type BigramOptions struct {
	// Model is the shape; Embd must be at least Rank+2, Merges sets the vocabulary (the text's
	// characters and that many merged pieces), and a target and its draft need the same Merges.
	Model TinyOptions
	// Rank is the rank of the bigram log-probabilities the model carries: a draft with a lower
	// rank is a cruder copy of its target.
	Rank int
	// Smoothing is the count added to every bigram (default 0.05).
	Smoothing float64
	// Floor is the least log-probability the model is made from (default -9).
	Floor float64
	// Noise, for a draft, adds Gaussian noise of Noise times the output weights' RMS to them
	// (seeded by Model.Seed): the same factorization as its target's, blurred, so that the two
	// disagree where the target's choice is close, as a smaller trained model does.
	Noise float64
	// Cycle, when not 0, replaces the text's bigrams by a walk through that many of its most
	// frequent pieces (in a seeded order; every other token leads into the walk): each is
	// followed by the next, the last by the first, written as Rank/2 cosines of the walk's
	// order (rank Rank exactly), so that the next-most likely tokens are the walk's near
	// neighbours. Greedy output goes round the walk and repeats only after Cycle tokens, where
	// a bigram of text falls into a cycle of a few (bench's loop warning), and a Noise-blurred
	// draft misses some steps of it: its acceptance falls with a draft's length as a trained
	// draft's does, where on a text's short cycle it is all or nothing at fixed places.
	Cycle int
	// Vocab, when above the text's vocabulary, pads it to that many tokens (as a real model's
	// 32,000 or 262,144) that the model never gives: each padded token's logit is PadLogit,
	// whatever the input, so the text's tokens, their logits and greedy output are the
	// unpadded model's, while the output layer, the logits and their sampling cost what a
	// real vocabulary's do.
	Vocab int
}

// PadLogit is a padded token's logit (BigramOptions.Vocab): far below any of the text's.
const PadLogit = -1000.0

// CycleDraftNoise is the Noise of a draft of a walk (BigramOptions.Cycle) that agrees with its
// target on about nine steps of the walk in ten (546 of 600 in the test's): a walk's next
// tokens are closer than a text's, so the text's draft noise (0.8) would miss two in three.
const CycleDraftNoise = 0.1

// cyclePeak is the walk's next token's log-probability above the row's mean: about a text
// bigram's where the text is predictable.
const cyclePeak = 12.0

// cycleLogits writes L (V×V) for BigramOptions.Cycle: the walk through the cycle most frequent
// of the tokens counted in uni, each followed by the next.
func cycleLogits(L, uni []float64, V, cycle, rank int, floor float64) error {
	seen := 0 // the pieces of the text: a walk through control or byte tokens would not be text
	for _, c := range uni {
		if c > 0 {
			seen++
		}
	}
	if cycle < 2*maxLoopPeriodHint || cycle > seen {
		return fmt.Errorf("bigram model: a cycle of %d tokens: want %d to %d (the pieces the text has)", cycle, 2*maxLoopPeriodHint, seen)
	}
	order := make([]int, V)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return uni[order[a]] > uni[order[b]] })
	walk := order[:cycle]
	rand.New(rand.NewPCG(1, 0x6379636c65)).Shuffle(len(walk), func(i, j int) { walk[i], walk[j] = walk[j], walk[i] }) // "cycle"
	pos := make([]int, V)
	for i := range pos {
		pos[i] = -1
	}
	for i, t := range walk {
		pos[t] = i
	}
	K := rank / 2
	a := cyclePeak / float64(K)
	for t := 0; t < V; t++ {
		from := pos[t]
		if from < 0 {
			from = pos[walk[t%cycle]] // a token off the walk leads to where walk[t%cycle] does
		}
		row := L[t*V : (t+1)*V]
		for s := range row {
			row[s] = floor
			if pos[s] < 0 {
				continue
			}
			var v float64
			d := 2 * math.Pi * float64(pos[s]-from-1) / float64(cycle)
			for k := 1; k <= K; k++ {
				v += math.Cos(float64(k) * d)
			}
			row[s] = a * v
		}
	}
	return nil
}

// maxLoopPeriodHint is bench's longest loop (maxLoopPeriod there): a walk of at least twice
// that is never taken for one.
const maxLoopPeriodHint = 64

// BigramStats describe what a bigram model was made from.
type BigramStats struct {
	// Vocab is the text's vocabulary; Padded the model's (BigramOptions.Vocab, or Vocab).
	Vocab, Padded, Tokens int
	// Explained is the share of the centred log-probability matrix's squared norm that the
	// rank keeps.
	Explained float64
}

// BigramLlama builds the model of text. The blocks' attention and feed-forward outputs are
// zero, so the residual stream is the token's embedding; the final RMS norm sees embeddings
// of one norm, and the output matrix turns them into the text's bigram log-probabilities
// (rank Rank, plus a per-token bias). The other weights are random, so the model costs what a
// model of its shape costs. The same text and options give the same bytes.
func BigramLlama(text string, o BigramOptions) (*Builder, *BigramStats, error) {
	m := o.Model.withDefaults()
	if m.Embd%m.Heads != 0 || (m.Embd/m.Heads)%2 != 0 || m.Heads%m.HeadsKV != 0 {
		return nil, nil, fmt.Errorf("bigram llama: n_embd %d, n_head %d, n_head_kv %d do not divide into even heads", m.Embd, m.Heads, m.HeadsKV)
	}
	bm, err := bigramMatrices(text, o, m.Embd)
	if err != nil {
		return nil, nil, err
	}
	b := llamaModel(m, bm.tokens, bm.scores, bm.types)
	n, V := uint64(m.Embd), uint64(len(bm.tokens))
	zero := func(name string, in, outDim uint64) {
		b.Replace(Tensor{Name: name, Type: TensorF32, Dims: []uint64{in, outDim}, Data: make([]byte, 4*in*outDim)})
	}
	b.Replace(Tensor{Name: "token_embd.weight", Type: TensorF32, Dims: []uint64{n, V}, Data: f32Slice(bm.embd)})
	b.Replace(Tensor{Name: "output.weight", Type: TensorF32, Dims: []uint64{n, V}, Data: f32Slice(bm.out)})
	for i := 0; i < m.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		zero(p+"attn_output.weight", n, n)
		zero(p+"ffn_down.weight", uint64(m.FF), n)
	}
	if !m.F32 {
		b.Set("general.file_type", Uint32(1)) // MOSTLY_F16: the random blocks; the embedding and output stay F32
	}
	b.Set("llama.attention.layer_norm_rms_epsilon", Float32(1e-6))
	return b, &bm.stats, nil
}

// bigramModel is a bigram factorization of a text: the vocabulary, the embeddings (V×n,
// squared norm n each) and the output rows (V×n) whose products are the logits.
type bigramModel struct {
	tokens    []string
	scores    []float32
	types     []int32
	embd, out []float32
	stats     BigramStats
}

// bigramMatrices factors text's bigrams for models of hidden size n.
func bigramMatrices(text string, o BigramOptions, n int) (*bigramModel, error) {
	m := o.Model.withDefaults()
	if o.Smoothing == 0 {
		o.Smoothing = 0.05
	}
	if o.Floor == 0 {
		o.Floor = -9
	}
	if o.Rank < 1 || n < o.Rank+2 {
		return nil, fmt.Errorf("bigram model: rank %d needs 1 <= rank <= n_embd-2 (n_embd %d)", o.Rank, n)
	}
	tokens, scores, types, seq := CorpusVocab(text, m.Merges)
	V, r := len(tokens), o.Rank

	counts := make([]float64, V*V)
	uni := make([]float64, V)
	rowN := make([]float64, V)
	prev := 1 // BOS
	for _, s := range seq {
		counts[prev*V+s]++
		rowN[prev]++
		uni[s]++
		prev = s
	}
	var total float64
	for _, c := range uni {
		total += c
	}
	// L[t][s] = max(log P(s | t), Floor), smoothed; the row of a token never seen before
	// another (a byte, a control token) and of BOS is the unigram distribution. The floor puts
	// the rank where the text is: without it a factorization of log-probabilities spends its
	// rank on the many pairs the text never has.
	L := make([]float64, V*V)
	for t := 0; t < V && o.Cycle == 0; t++ {
		row := L[t*V : (t+1)*V]
		for s := range row {
			p := (uni[s] + o.Smoothing) / (total + o.Smoothing*float64(V))
			if rowN[t] > 0 && t != 1 {
				p = (counts[t*V+s] + o.Smoothing) / (rowN[t] + o.Smoothing*float64(V))
			}
			row[s] = math.Max(math.Log(p), o.Floor)
		}
	}
	if o.Cycle != 0 {
		if err := cycleLogits(L, uni, V, o.Cycle, r, o.Floor-cyclePeak); err != nil {
			return nil, err
		}
	}
	// softmax ignores a row's constant: centre the rows, then take out the column means as a
	// per-token bias, and factor what is left
	for t := 0; t < V; t++ {
		row := L[t*V : (t+1)*V]
		var mean float64
		for _, v := range row {
			mean += v
		}
		mean /= float64(V)
		for s := range row {
			row[s] -= mean
		}
	}
	bias := make([]float64, V)
	for t := 0; t < V; t++ {
		for s := 0; s < V; s++ {
			bias[s] += L[t*V+s] / float64(V)
		}
	}
	var norm2 float64
	for t := 0; t < V; t++ {
		for s := 0; s < V; s++ {
			L[t*V+s] -= bias[s]
			norm2 += L[t*V+s] * L[t*V+s]
		}
	}
	// the start is the same for every model of the text, so a draft of the target's rank has the
	// target's factorization
	Q := topSubspace(L, V, r, rand.New(rand.NewPCG(uint64(r), 0x626967726d))) // V×r, orthonormal columns
	// B = QᵀL (r×V): L ≈ Q B
	B := make([]float64, r*V)
	for t := 0; t < V; t++ {
		for k := 0; k < r; k++ {
			q := Q[t*r+k]
			if q == 0 {
				continue
			}
			row := L[t*V : (t+1)*V]
			bk := B[k*V : (k+1)*V]
			for s, v := range row {
				bk[s] += q * v
			}
		}
	}
	var kept float64
	for _, v := range B {
		kept += v * v
	}

	// embeddings e_t = [λ a_t, κ, c_t, 0…] of squared norm n (so RMS 1 and the norm weight 1);
	// output rows [b_s/λ, bias_s/κ, 0, 0…]
	var maxA float64
	for t := 0; t < V; t++ {
		var a2 float64
		for k := 0; k < r; k++ {
			a2 += Q[t*r+k] * Q[t*r+k]
		}
		maxA = math.Max(maxA, a2)
	}
	lambda := math.Sqrt(float64(n) / 2 / maxA)
	kappa := math.Sqrt(float64(n) / 4)
	embd := make([]float32, V*n)
	out := make([]float32, V*n)
	var rmsB float64
	for _, v := range B {
		rmsB += v * v
	}
	rmsB = math.Sqrt(rmsB / float64(len(B)))
	noise := rand.New(rand.NewPCG(m.Seed, 0x6e6f697365)) // "noise"
	for i := range B {
		if o.Noise > 0 {
			B[i] += o.Noise * rmsB * noise.NormFloat64()
		}
	}
	for t := 0; t < V; t++ {
		var a2 float64
		for k := 0; k < r; k++ {
			a := lambda * Q[t*r+k]
			embd[t*n+k] = float32(a)
			a2 += a * a
		}
		embd[t*n+r] = float32(kappa)
		embd[t*n+r+1] = float32(math.Sqrt(float64(n) - a2 - kappa*kappa))
		for k := 0; k < r; k++ {
			out[t*n+k] = float32(B[k*V+t] / lambda)
		}
		out[t*n+r] = float32(bias[t] / kappa)
	}
	// padded tokens: an embedding of the same norm, and an output row that reads only the
	// constant component κ, so their logit is PadLogit for every input
	for t := V; t < o.Vocab; t++ {
		tokens = append(tokens, fmt.Sprintf("\u2400pad%d", t))
		scores = append(scores, -1e9)
		types = append(types, tokenNormal)
		e := make([]float32, n)
		e[r], e[r+1] = float32(kappa), float32(math.Sqrt(float64(n)-kappa*kappa))
		embd = append(embd, e...)
		row := make([]float32, n)
		row[r] = float32(PadLogit / kappa)
		out = append(out, row...)
	}
	return &bigramModel{tokens: tokens, scores: scores, types: types, embd: embd, out: out,
		stats: BigramStats{Vocab: V, Padded: max(V, o.Vocab), Tokens: len(seq), Explained: kept / norm2}}, nil
}

// topSubspace returns an orthonormal basis (V×r, row-major) of the r leading left singular
// vectors of the V×V matrix A, by subspace iteration from a seeded start.
func topSubspace(A []float64, V, r int, rng *rand.Rand) []float64 {
	Q := make([]float64, V*r)
	for i := range Q {
		Q[i] = rng.Float64()*2 - 1
	}
	orthonormalize(Q, V, r)
	tmp := make([]float64, V*r)
	for it := 0; it < 6; it++ {
		// tmp = Aᵀ Q, then Q = A tmp
		mulT(A, Q, tmp, V, r)
		orthonormalize(tmp, V, r)
		mul(A, tmp, Q, V, r)
		orthonormalize(Q, V, r)
	}
	return Q
}

// mul sets out = A X for A V×V and X, out V×r.
func mul(A, X, out []float64, V, r int) {
	clear(out)
	for t := 0; t < V; t++ {
		row := A[t*V : (t+1)*V]
		o := out[t*r : (t+1)*r]
		for s, a := range row {
			if a == 0 {
				continue
			}
			x := X[s*r : (s+1)*r]
			for k := range o {
				o[k] += a * x[k]
			}
		}
	}
}

// mulT sets out = Aᵀ X.
func mulT(A, X, out []float64, V, r int) {
	clear(out)
	for t := 0; t < V; t++ {
		row := A[t*V : (t+1)*V]
		x := X[t*r : (t+1)*r]
		for s, a := range row {
			if a == 0 {
				continue
			}
			o := out[s*r : (s+1)*r]
			for k := range o {
				o[k] += a * x[k]
			}
		}
	}
}

// orthonormalize makes the r columns of X (V×r) orthonormal (modified Gram-Schmidt).
func orthonormalize(X []float64, V, r int) {
	for k := 0; k < r; k++ {
		for j := 0; j < k; j++ {
			var d float64
			for i := 0; i < V; i++ {
				d += X[i*r+k] * X[i*r+j]
			}
			for i := 0; i < V; i++ {
				X[i*r+k] -= d * X[i*r+j]
			}
		}
		var nn float64
		for i := 0; i < V; i++ {
			nn += X[i*r+k] * X[i*r+k]
		}
		nn = math.Sqrt(nn)
		if nn == 0 {
			continue
		}
		for i := 0; i < V; i++ {
			X[i*r+k] /= nn
		}
	}
}

func f32Slice(v []float32) []byte {
	data := make([]byte, 4*len(v))
	for i, f := range v {
		u := math.Float32bits(f)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return data
}

// CorpusVocab is TinyVocab's tokenizer made from text: control and byte tokens, the text's
// characters, then merges pieces merged from its words (each ▁-prefixed), most frequent pair
// first. It also returns the text's tokens as llama.cpp's SentencePiece tokenizer gives them
// for the vocabulary (words separated by single spaces; a character outside the vocabulary
// cannot occur, as every character of the text is in it).
func CorpusVocab(text string, merges int) (tokens []string, scores []float32, types []int32, seq []int) {
	add := func(tok string, score float32, typ int32) {
		tokens = append(tokens, tok)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, tokenUnknown)
	add("<s>", 0, tokenControl)
	add("</s>", 0, tokenControl)
	for i := 0; i < 256; i++ {
		add(fmt.Sprintf("<0x%02X>", i), 0, tokenByte)
	}
	// unique words with their frequencies, in order of first appearance
	fields := strings.Fields(text)
	index := map[string]int{}
	var words [][]string
	var freq []int
	order := make([]int, len(fields))
	charSet := map[string]bool{spaceMark: true}
	for i, w := range fields {
		j, ok := index[w]
		if !ok {
			j = len(words)
			index[w] = j
			syms := []string{spaceMark}
			for _, c := range w {
				syms = append(syms, string(c))
				charSet[string(c)] = true
			}
			words = append(words, syms)
			freq = append(freq, 0)
		}
		freq[j]++
		order[i] = j
	}
	chars := make([]string, 0, len(charSet))
	for c := range charSet {
		chars = append(chars, c)
	}
	sort.Strings(chars)
	for i, c := range chars {
		add(c, float32(-1e6-float64(i)), tokenNormal)
	}
	seen := map[string]bool{}
	for _, t := range tokens {
		seen[t] = true
	}
	// pair counts over the words (weighted by frequency) and the words each pair is in, kept
	// up to date as merges rewrite the words that hold them
	counts := map[[2]string]int{}
	where := map[[2]string]map[int]bool{}
	count := func(wi, sign int) {
		w := words[wi]
		for i := 0; i+1 < len(w); i++ {
			p := [2]string{w[i], w[i+1]}
			counts[p] += sign * freq[wi]
			if sign > 0 {
				if where[p] == nil {
					where[p] = map[int]bool{}
				}
				where[p][wi] = true
			}
		}
	}
	for wi := range words {
		count(wi, 1)
	}
	for m := 0; m < merges; m++ {
		var best [2]string
		bestN := 0
		for p, c := range counts {
			if c <= 0 || seen[p[0]+p[1]] {
				continue
			}
			if c > bestN || c == bestN && p[0]+"\x00"+p[1] < best[0]+"\x00"+best[1] {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			break
		}
		merged := best[0] + best[1]
		seen[merged] = true
		add(merged, float32(-m), tokenNormal)
		holders := make([]int, 0, len(where[best]))
		for wi := range where[best] {
			holders = append(holders, wi)
		}
		sort.Ints(holders)
		delete(where, best)
		for _, wi := range holders {
			count(wi, -1)
			w := words[wi]
			var out []string
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, merged)
					i++
					continue
				}
				out = append(out, w[i])
			}
			words[wi] = out
			count(wi, 1)
		}
	}
	id := map[string]int{}
	for i, t := range tokens {
		id[t] = i
	}
	wordIDs := make([][]int, len(words))
	for wi, w := range words {
		for _, p := range w {
			wordIDs[wi] = append(wordIDs[wi], id[p])
		}
	}
	for _, j := range order {
		seq = append(seq, wordIDs[j]...)
	}
	return tokens, scores, types, seq
}

// BigramShapes are the shapes internal/tools/bigramgguf and the tests make: a target, its
// draft (the target's factorization blurred, in one layer of 68), and a target of a 0.8B
// model's cost with the same logits as "target".
var BigramShapes = map[string]BigramOptions{
	"target": {Model: TinyOptions{Seed: 11, Name: "llbuild-bigram-target", Embd: 128, Layers: 2, Heads: 4, HeadsKV: 4, FF: 256, Context: 4096, Merges: 1000, F32: true}, Rank: 64},
	"draft":  {Model: TinyOptions{Seed: 12, Name: "llbuild-bigram-draft", Embd: 68, Layers: 1, Heads: 2, HeadsKV: 2, FF: 64, Context: 4096, Merges: 1000, F32: true}, Rank: 64, Noise: 0.8},
	"1b":     {Model: TinyOptions{Seed: 13, Name: "llbuild-bigram-1b", Embd: 2048, Layers: 16, Heads: 16, HeadsKV: 16, FF: 5632, Context: 4096, Merges: 1000}, Rank: 64},
}
