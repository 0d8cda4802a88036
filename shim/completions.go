package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *promptDetail `json:"prompt_tokens_details"`
}

type promptDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

func (u *usage) add(o usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if u.PromptTokensDetails == nil {
		u.PromptTokensDetails = &promptDetail{}
	}
	if o.PromptTokensDetails != nil {
		u.PromptTokensDetails.CachedTokens += o.PromptTokensDetails.CachedTokens
	}
}

type completionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *legacyLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	// rows are the rows Logprobs was rendered from, for chat, which writes
	// them in its own format.
	rows []rowEntry
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage"`
}

func finishReason(stopType string) string {
	switch stopType {
	case "eos", "word":
		return "stop"
	default:
		return "length"
	}
}

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

func usageOf(resp *llamaserver.Completion) usage {
	u := usage{
		PromptTokens:        resp.TokensEvaluated,
		CompletionTokens:    resp.TokensPredicted,
		PromptTokensDetails: &promptDetail{},
	}
	if resp.Timings != nil {
		u.PromptTokensDetails.CachedTokens = resp.Timings.CacheN
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
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

func probRow(p *llamaserver.TokenProb, top int) *Row {
	r := &Row{ID: p.ID, Logprob: p.Logprob, Top: make([]Alt, 0, min(top, len(p.Top)))}
	for i, a := range p.Top {
		if i >= top {
			break
		}
		r.Top = append(r.Top, Alt{ID: a.ID, Logprob: a.Logprob})
	}
	return r
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

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := parseCompletionRequest(body)
	if err != nil {
		writeError(w, err)
		return
	}
	u, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	for i, p := range req.Prompts {
		for _, id := range p.IDs {
			if !u.vocab.valid(id) {
				writeError(w, badRequest("prompt", "prompt %d has token id %d; the vocabulary has %d tokens", i, id, u.vocab.size()))
				return
			}
		}
	}
	if err := s.checkRequest(u, req.Model, req.LogitBias); err != nil {
		writeError(w, err)
		return
	}
	if req.Logprobs >= 0 {
		if err := u.draftedLogprobs("logprobs", req.MaxTokens); err != nil {
			writeError(w, err)
			return
		}
	}
	id, created := s.newID("cmpl"), time.Now().Unix()
	if req.Stream {
		s.streamCompletions(w, r, u, req, id, created)
		return
	}
	jobs := make([]*job, len(req.Prompts))
	for i, p := range req.Prompts {
		jobs[i] = &job{s: s, u: u, req: req, p: p, index: i}
	}
	choices := make([]completionChoice, len(jobs))
	errs := make([]error, len(jobs))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if len(jobs) == 1 {
		// one prompt (lm-eval's requests): run here rather than hand it to a worker and wake that
		choices[0], errs[0] = jobs[0].run(ctx)
	} else {
		// As many workers as slots, so that a long batch never waits on the
		// slot timeout behind its own prompts.
		next := make(chan int, len(jobs))
		for i := range jobs {
			next <- i
		}
		close(next)
		var wg sync.WaitGroup
		for range min(u.info.TotalSlots, len(jobs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if ctx.Err() != nil {
						errs[i] = ctx.Err()
						continue
					}
					choices[i], errs[i] = jobs[i].run(ctx)
					if errs[i] != nil {
						cancel()
					}
				}
			}()
		}
		wg.Wait()
	}
	if err := firstError(errs); err != nil {
		s.requestFailed(r, err)
		writeError(w, err)
		return
	}
	total := usage{PromptTokensDetails: &promptDetail{}}
	var slotWait time.Duration
	var calls callTimes
	for _, j := range jobs {
		total.add(j.usage)
		slotWait += j.slotWait
		calls.add(j.calls)
	}
	resp := &completionResponse{
		ID: id, Object: "text_completion", Created: created, Model: s.modelName(u),
		SystemFingerprint: u.info.BuildInfo, Choices: choices, Usage: &total,
	}
	data := resp.appendJSON(make([]byte, 0, resp.sizeHint()))
	w.Header().Set("Server-Timing", serverTiming(slotWait, calls, time.Since(start)))
	writeBody(w, http.StatusOK, data)
}

// serverTiming is the Server-Timing header of an answer that took total
// (summed over its prompts, which may run at once; milliseconds): "slot" is
// the wait for a free slot, "llama" the calls to llama-server, from sending
// each to the last byte of its answer, and "shim" the rest, the shim's own
// work (decoding llama-server's answers included).
func serverTiming(slotWait time.Duration, calls callTimes, total time.Duration) string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
	}
	return "slot;dur=" + ms(slotWait) + ";desc=\"waiting for a free slot\", llama;dur=" + ms(calls.wire) +
		";desc=\"llama-server\", shim;dur=" + ms(max(total-slotWait-calls.wire, 0))
}

// firstError prefers a real error over the cancellations it caused.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, errCanceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}
