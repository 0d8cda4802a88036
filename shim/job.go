package shim

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// job is one prompt of a completion request being worked on.
type job struct {
	s     *Server
	u     *upstream
	req   *completionRequest
	p     prompt
	index int
	slot  int

	ids        []int  // prompt token ids, when known
	promptText []byte // the prompt as echoed text
	starts     []int  // byte offset of each prompt token in promptText
	rows       []rowEntry
	usage      usage
	// slotWait is the time spent waiting for a free slot; calls, where its
	// calls to llama-server spent theirs.
	slotWait time.Duration
	calls    callTimes
}

// slotKey is the prompt as the slot pool compares it: the ids llama-server
// gets, or the text it tokenizes.
func (j *job) slotKey() []byte {
	switch {
	case j.ids != nil:
		return slotKey(j.ids, "")
	case j.p.IsText:
		return slotKey(nil, j.p.Text)
	default:
		return slotKey(j.p.IDs, "")
	}
}

// promptIDs tokenizes a text prompt the way /completion would.
func (j *job) promptIDs(ctx context.Context) ([]int, error) {
	if j.ids != nil {
		return j.ids, nil
	}
	if !j.p.IsText {
		j.ids = j.p.IDs
		return j.ids, nil
	}
	ids, err := j.u.tokenize(ctx, j.p.Text, !j.req.NoSpecialTokens)
	if err != nil {
		return nil, fmt.Errorf("tokenizing prompt %d: %w", j.index, err)
	}
	if len(ids) == 0 {
		if j.req.NoSpecialTokens {
			return nil, badRequest("prompt", "prompt %d is empty after tokenization, and \"add_special_tokens\": false adds no BOS token", j.index)
		}
		return nil, badRequest("prompt", "prompt %d is empty after tokenization and the model adds no BOS token", j.index)
	}
	j.ids = ids
	return ids, nil
}

// ownTokens tokenizes a text prompt here when llama-server must not (add_special_tokens
// false: its /completion always adds the model's BOS to a text prompt), so that the ids go.
func (j *job) ownTokens(ctx context.Context) error {
	if !j.req.NoSpecialTokens || !j.p.IsText {
		return nil
	}
	_, err := j.promptIDs(ctx)
	return err
}

// layoutPrompt fixes the echoed text and where each prompt token starts
// in it. A text prompt echoes as sent; SentencePiece tokenizers add a
// space before the first word, which then starts at offset 0. When the
// pieces do not spell the prompt (normalization), the pieces are the text.
func (j *job) layoutPrompt() {
	v := j.u.vocab
	var c []byte
	j.starts = make([]int, len(j.ids))
	for i, id := range j.ids {
		j.starts[i] = len(c)
		c = append(c, v.text(id)...)
	}
	j.promptText = c
	if !j.p.IsText {
		return
	}
	pt := []byte(j.p.Text)
	switch {
	case bytes.Equal(c, pt):
	case len(c) == len(pt)+1 && c[0] == ' ' && bytes.Equal(c[1:], pt):
		for i := range j.starts {
			j.starts[i] = max(j.starts[i]-1, 0)
		}
		j.promptText = pt
	}
}

// echoRows lays out the prompt's rows and, with score, scores them: row 0
// has no logprob, row i is token i given the tokens before it. Without
// score the logprobs come later from the generation request
// (fillEchoRows).
func (j *job) echoRows(ctx context.Context, score bool) error {
	ids, err := j.promptIDs(ctx)
	if err != nil {
		return err
	}
	if n := j.u.info.NCtx; n > 0 && len(ids) >= n {
		return badRequest("prompt", "prompt %d has %d tokens; llama-server's context holds %d per slot", j.index, len(ids), n)
	}
	// a streamed batch sends each prompt's rows as they come: only a whole answer is bounded
	if c := j.req.echoEntries; c != nil && j.req.Logprobs >= 0 && !j.req.Stream {
		if n, most := c.Add(int64(len(ids))*int64(j.req.Logprobs+1)), j.s.opts.MaxEchoEntries; n > most {
			return badRequest("prompt", "the echoed prompts ask for more than %d prompt logprob entries (tokens × (1 + logprobs)) in one request: send the batch in smaller requests, or ask for fewer logprobs", most)
		}
	}
	j.layoutPrompt()
	j.rows = make([]rowEntry, len(ids))
	for i, id := range ids {
		j.rows[i] = rowEntry{ID: id, Start: j.starts[i]}
	}
	if j.req.Logprobs < 0 || len(ids) < 2 || !score {
		return nil
	}
	var scored []Row
	scored, err = j.u.scorer.Score(ctx, j.slot, ids, echoPositions(len(ids)), j.req.Logprobs)
	if err != nil {
		return err
	}
	j.setEchoScores(scored)
	return nil
}

// setEchoScores gives echoed rows 1.. the scores of positions 1.. (row 0 has none).
func (j *job) setEchoScores(scored []Row) {
	for i := range scored {
		j.rows[i+1].Row = &scored[i]
	}
}

// echoPositions are the prompt positions echo scores: all but the first.
func echoPositions(n int) []int {
	positions := make([]int, max(n-1, 0))
	for i := range positions {
		positions[i] = i + 1
	}
	return positions
}

// echoInOneRequest says whether the prompt's logprobs can come with the
// generated tokens in one request: the server computes them natively
// (prompt_logprobs) and there is something to generate, so the one prefill
// serves both instead of a scoring request and then a generation request.
func (j *job) echoInOneRequest() bool {
	_, native := j.u.scorer.(*nativeScorer)
	return native && j.req.Echo && j.req.Logprobs >= 0 && j.req.MaxTokens > 0
}

// fillEchoRows puts the prompt logprobs of a generation request's answer
// into the echoed rows.
func (j *job) fillEchoRows(sent promptLogprobs) error {
	if len(j.ids) < 2 {
		return nil
	}
	scored, err := sent.rows(j.ids, echoPositions(len(j.ids)), j.req.Logprobs)
	if err != nil {
		return err
	}
	j.setEchoScores(scored)
	return nil
}

func (j *job) nativeRequest(stream bool) *llamaserver.CompletionRequest {
	r := j.req
	nr := &llamaserver.CompletionRequest{
		NPredict:         r.MaxTokens,
		Temperature:      r.Temperature,
		TopP:             r.TopP,
		Seed:             r.Seed,
		Stop:             r.Stop,
		LogitBias:        r.LogitBias,
		PresencePenalty:  r.PresencePenalty,
		FrequencyPenalty: r.FrequencyPenalty,
		TopK:             r.TopK,
		MinP:             r.MinP,
		TypicalP:         r.TypicalP,
		RepeatPenalty:    r.RepeatPenalty,
		IgnoreEOS:        r.IgnoreEOS,
		CachePrompt:      true,
		IDSlot:           j.slot,
		ReturnTokens:     true,
		Stream:           stream,
	}
	if r.Logprobs >= 0 {
		nr.NProbs = max(r.Logprobs, 1)
	}
	if !stream {
		// Leave out generation_settings and the echoed prompt, which
		// llama-server would otherwise serialize into every answer.
		nr.ResponseFields = []string{"content", "tokens", "stop", "stop_type", "tokens_predicted", "tokens_evaluated", "timings", "completion_probabilities"}
	}
	if j.ids != nil {
		nr.Prompt = j.ids
	} else if j.p.IsText {
		nr.Prompt = j.p.Text
	} else {
		nr.Prompt = j.p.IDs
	}
	return nr
}

// generationRequest is the non-streamed request that generates the choice's
// tokens, asking for the prompt's logprobs too when they come in one request.
func (j *job) generationRequest(oneRequest bool) *llamaserver.CompletionRequest {
	nr := j.nativeRequest(false)
	if oneRequest {
		top := j.req.Logprobs
		nr.PromptLogprobs = &top
		nr.PromptLogprobsFlat = j.u.info.PromptLogprobsFlat
		nr.PromptLogprobsBase64 = j.u.info.PromptLogprobsBase64
		nr.ResponseFields = append(nr.ResponseFields, promptLogprobsFields(j.u)...)
	}
	return nr
}

// zeroTokenUsage is the usage of max_tokens 0: the prompt is counted but
// nothing is generated (llama-server's n_predict 0 would still generate
// one token, so the shim does not ask it).
func (j *job) zeroTokenUsage(ctx context.Context) error {
	ids, err := j.promptIDs(ctx)
	if err != nil {
		return err
	}
	j.usage = usage{PromptTokens: len(ids), TotalTokens: len(ids), PromptTokensDetails: &promptDetail{}}
	return nil
}

// genState follows llama-server's generation token by token: which tokens
// it holds back as incomplete UTF-8 (and gives no probabilities for), and
// where each token starts in the generated text.
type genState struct {
	v      *vocab
	ids    []int
	starts []int
	text   []byte // all generated pieces
	probs  []*llamaserver.TokenProb
}

// add appends a generated token; p is its probabilities, if llama-server
// gave them.
func (g *genState) add(id int, p *llamaserver.TokenProb) {
	g.ids = append(g.ids, id)
	g.starts = append(g.starts, len(g.text))
	g.text = append(g.text, g.v.text(id)...)
	g.probs = append(g.probs, p)
}

// alignProbs pairs llama-server's probability entries with the generated
// tokens: a token whose text leaves the output ending in an incomplete
// UTF-8 sequence gets none, as in llama-server's process_token.
func alignProbs(v *vocab, ids []int, probs []llamaserver.TokenProb) *genState {
	g := &genState{v: v}
	k := 0
	for _, id := range ids {
		var p *llamaserver.TokenProb
		text := append(g.text[:len(g.text):len(g.text)], v.text(id)...)
		if !incompleteUTF8(text) && k < len(probs) && probs[k].ID == id {
			p = &probs[k]
			k++
		}
		g.add(id, p)
	}
	return g
}

// keep is how many generated tokens belong to the returned text, which
// is textLen bytes long: all of them, except after a stop string, which
// llama-server cuts from the text.
func (g *genState) keep(stopType string, textLen int) int {
	if stopType != "word" {
		return len(g.ids)
	}
	n := 0
	for n < len(g.ids) && g.starts[n] < textLen {
		n++
	}
	return n
}

// stopCut is where llama-server cuts generated text at a stop string:
// the earliest occurrence of any of them.
func stopCut(text []byte, stops []string) int {
	cut := len(text)
	for _, s := range stops {
		if i := bytes.Index(text, []byte(s)); i >= 0 && i < cut {
			cut = i
		}
	}
	return cut
}

// fillMissing scores the kept generated tokens that llama-server gave no
// probabilities for.
func (j *job) fillMissing(ctx context.Context, g *genState, n int) error {
	var positions []int
	for i := 0; i < n; i++ {
		if g.probs[i] == nil {
			positions = append(positions, i)
		}
	}
	if len(positions) == 0 {
		return nil
	}
	ids, err := j.promptIDs(ctx)
	if err != nil {
		return err
	}
	seq := append(append([]int{}, ids...), g.ids[:n]...)
	abs := make([]int, len(positions))
	for i, p := range positions {
		abs[i] = len(ids) + p
	}
	var rows []Row
	rows, err = j.u.scorer.Score(ctx, j.slot, seq, abs, j.req.Logprobs)
	if err != nil {
		return fmt.Errorf("scoring generated tokens llama-server gave no probabilities for: %w", err)
	}
	for i, p := range positions {
		r := rows[i]
		alts := make([]llamaserver.TopProb, len(r.Top))
		for k, a := range r.Top {
			alts[k] = llamaserver.TopProb{ID: a.ID, Logprob: a.Logprob}
		}
		g.probs[p] = &llamaserver.TokenProb{ID: r.ID, Logprob: r.Logprob, Top: alts}
	}
	return nil
}

// run computes one choice without streaming.
func (j *job) run(ctx context.Context) (completionChoice, error) {
	ctx = withCallTimes(ctx, &j.calls)
	t0 := time.Now()
	key := j.slotKey()
	slot, err := j.u.acquire(ctx, j.s.opts.SlotWait, key)
	j.slotWait = time.Since(t0)
	if err != nil {
		return completionChoice{}, err
	}
	defer j.u.release(slot, key)
	j.slot = slot
	if err := j.ownTokens(ctx); err != nil {
		return completionChoice{}, err
	}
	oneRequest := j.echoInOneRequest()
	if j.req.Echo {
		if err := j.echoRows(ctx, !oneRequest); err != nil {
			return completionChoice{}, err
		}
	}
	ch := completionChoice{Index: j.index}
	var content []byte
	var g *genState
	finish := "length"
	kept := 0
	if j.req.MaxTokens == 0 {
		if err := j.zeroTokenUsage(ctx); err != nil {
			return ch, err
		}
	} else {
		var resp *llamaserver.Completion
		resp, err = j.u.complete(ctx, j.generationRequest(oneRequest))
		if err != nil {
			return ch, err
		}
		if oneRequest {
			if err := j.fillEchoRows(promptOf(resp)); err != nil {
				return ch, err
			}
		}
		j.usage = usageOf(resp)
		content = []byte(resp.Content)
		finish = finishReason(resp.StopType)
		if j.req.Logprobs >= 0 {
			// llama-server's content replaces invalid UTF-8 with U+FFFD;
			// the pieces are the exact bytes that the offsets count.
			g = alignProbs(j.u.vocab, resp.Tokens, resp.Probs)
			content = g.text
			if resp.StopType == "word" {
				content = g.text[:stopCut(g.text, j.req.Stop)]
			}
			kept = g.keep(resp.StopType, len(content))
			if err := j.fillMissing(ctx, g, kept); err != nil {
				return ch, err
			}
		}
	}
	text := append(append([]byte{}, j.promptText...), content...)
	if !j.req.Echo {
		text = content
	}
	ch.Text = string(text)
	ch.FinishReason = &finish
	if j.req.Logprobs >= 0 {
		rows := j.rows
		base := 0
		if j.req.Echo {
			base = len(j.promptText)
		}
		for i := 0; i < kept; i++ {
			rows = append(rows, rowEntry{ID: g.ids[i], Start: base + min(g.starts[i], len(content)), Row: probRow(g.probs[i], j.req.Logprobs)})
		}
		lp, err := render(j.u.vocab, newRuneOffsets(text), rows, j.req.Logprobs, j.req.TokenIDs)
		if err != nil {
			return ch, err
		}
		ch.Logprobs, ch.rows = lp, rows
	}
	return ch, nil
}

// stream computes one choice and emits it as it is generated.
func (j *job) stream(ctx context.Context, emit func(completionChoice) error) error {
	key := j.slotKey()
	slot, err := j.u.acquire(ctx, j.s.opts.SlotWait, key)
	if err != nil {
		return err
	}
	defer j.u.release(slot, key)
	j.slot = slot
	if err := j.ownTokens(ctx); err != nil {
		return err
	}
	v, lp := j.u.vocab, j.req.Logprobs
	var text []byte // the choice's text so far
	if j.req.Echo {
		if err := j.echoRows(ctx, true); err != nil {
			return err
		}
		text = append(text, j.promptText...)
		c := completionChoice{Index: j.index, Text: string(j.promptText)}
		if lp >= 0 {
			if c.Logprobs, err = render(v, newRuneOffsets(text), j.rows, lp, j.req.TokenIDs); err != nil {
				return err
			}
		}
		if err := emit(c); err != nil {
			return err
		}
	}
	base := len(text)
	ro := newRuneOffsets(text) // characters of the choice's text so far
	if j.req.MaxTokens == 0 {
		if err := j.zeroTokenUsage(ctx); err != nil {
			return err
		}
		finish := "length"
		return emit(completionChoice{Index: j.index, FinishReason: &finish})
	}
	g := &genState{v: v}
	var sent []byte  // generated text received from llama-server
	emittedText := 0 // bytes of sent already emitted
	emittedRows := 0 // generated rows already emitted
	holding := false // a row lacks probabilities: emit the rest at the end
	var final *llamaserver.Completion
	flush := func(upto int, finish *string) error {
		c := completionChoice{Index: j.index, Text: string(sent[emittedText:]), FinishReason: finish}
		emittedText = len(sent)
		if lp >= 0 {
			rows := make([]rowEntry, 0, upto-emittedRows)
			for k := emittedRows; k < upto; k++ {
				rows = append(rows, rowEntry{ID: g.ids[k], Start: base + min(g.starts[k], len(sent)), Row: probRow(g.probs[k], lp)})
			}
			emittedRows = upto
			text = append(text, sent[len(text)-base:]...)
			ro.extend(text)
			var err error
			if c.Logprobs, err = render(v, ro, rows, lp, j.req.TokenIDs); err != nil {
				return err
			}
			c.rows = rows
		}
		if c.Text == "" && c.FinishReason == nil && (c.Logprobs == nil || len(c.Logprobs.Tokens) == 0) {
			return nil
		}
		return emit(c)
	}
	err = j.u.completeStream(ctx, j.nativeRequest(true), func(c *llamaserver.Completion) error {
		if c.Stop {
			final = c
			return nil
		}
		chunk := []byte(c.Content)
		if len(c.Probs) > 0 && c.Probs[0].Bytes != nil {
			chunk = rawBytes(c.Probs[0].Bytes)
		}
		// Without logprobs the content is the only text there is; it is
		// exact unless the model writes invalid UTF-8, which llama-server
		// replaces with U+FFFD, and then only the recovery of a held-back
		// tail (below) can be off.
		for _, t := range c.Tokens {
			// llama-server streams no chunk for a token it holds back as
			// incomplete UTF-8; its bytes arrive in front of the next token's.
			gap := len(sent) + len(chunk) - len(g.text) - len(v.text(t))
			if gap > 0 {
				all := append(sent[:len(sent):len(sent)], chunk...)
				for _, id := range v.splitFragments(all[len(g.text) : len(g.text)+gap]) {
					g.add(id, nil)
				}
			}
			var p *llamaserver.TokenProb
			if len(c.Probs) > 0 && c.Probs[0].ID == t {
				p = &c.Probs[0]
			}
			g.add(t, p)
		}
		sent = append(sent, chunk...)
		if lp < 0 {
			return flush(0, nil)
		}
		confirmed := emittedRows
		for confirmed < len(g.ids) && g.starts[confirmed] < len(sent) {
			if lp >= 0 && g.probs[confirmed] == nil {
				holding = true
			}
			confirmed++
		}
		if holding {
			return nil
		}
		return flush(confirmed, nil)
	})
	if err != nil {
		return err
	}
	j.usage = usageOf(final)
	stopType := final.StopType
	if lost := final.TokensPredicted - len(g.ids); lost > 0 {
		// llama-server's stream ends without the tokens it held back as an
		// incomplete UTF-8 sequence: their ids and text are never sent.
		// Generate that many tokens again after what was sent: with greedy
		// decoding the same ones, otherwise a fresh sample of the same
		// length from the same distribution.
		st, err := j.recoverTail(ctx, g, &sent, lost)
		if err != nil {
			return err
		}
		stopType = st
	}
	kept := g.keep(stopType, len(sent))
	if kept < emittedRows {
		kept = emittedRows
	}
	if lp >= 0 {
		if err := j.fillMissing(ctx, g, kept); err != nil {
			return err
		}
	}
	finish := finishReason(stopType)
	return flush(kept, &finish)
}

// recoverTail generates the n tokens a stream left out, appends them to g
// and sent, and returns the new stop type.
func (j *job) recoverTail(ctx context.Context, g *genState, sent *[]byte, n int) (string, error) {
	ids, err := j.promptIDs(ctx)
	if err != nil {
		return "", err
	}
	nr := j.nativeRequest(false)
	nr.Prompt = append(append([]int{}, ids...), g.ids...)
	nr.NPredict = n
	resp, err := j.u.complete(ctx, nr)
	if err != nil {
		return "", fmt.Errorf("generating the tail the stream left out: %w", err)
	}
	tail := alignProbs(j.u.vocab, resp.Tokens, resp.Probs)
	for i, id := range tail.ids {
		g.add(id, tail.probs[i])
	}
	if j.req.Logprobs >= 0 {
		*sent = append(*sent, tail.text...)
	} else {
		*sent = append(*sent, resp.Content...)
	}
	return resp.StopType, nil
}
