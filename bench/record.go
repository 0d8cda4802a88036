package bench

import (
	"fmt"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
)

// RecordSchema is the version of record.json and records.json.
const RecordSchema = 1

// Record is one run: a bundle measured once, from its server's start to its stop. It is
// written as record.json in the run's directory, beside server.log.
type Record struct {
	SchemaVersion int      `json:"schemaVersion"`
	Identity      Identity `json:"identity"`
	// Bundle is the bundle as the user named it.
	Bundle string `json:"bundle"`
	// Invocation is the bench's own command line, to run the measurement again.
	Invocation []string `json:"invocation,omitempty"`
	// EnvNames are the names of every variable llama-server inherited from the bench's
	// environment; those that change computation are in Identity.Env with their values.
	EnvNames []string `json:"envNames,omitempty"`
	Protocol Protocol `json:"protocol"`
	// Patches are the server's patches, in order, each kept in the campaign by its sha256
	// where the bundle carried its bytes: a rejected run keeps what it tried.
	Patches []KeptPatch `json:"patches,omitempty"`
	// Round counts the runs of this bundle in one invocation (A/B rounds), from 0.
	Round    int        `json:"round"`
	Server   ServerInfo `json:"server"`
	Started  time.Time  `json:"started"`
	Finished time.Time  `json:"finished"`
	// Complete is false when the run stopped early (interrupted, or an error); its rows are
	// the ones measured.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
	// Crash is set when the server exited at each of two starts before it was ready
	// (its server.log holds the output).
	Crash  *Crash `json:"crash,omitempty"`
	Canary Canary `json:"canary"`
	// Valid says the figures count: canaries passed, nothing reused, one process throughout.
	// Invalid says why not.
	Valid   bool     `json:"valid"`
	Invalid []string `json:"invalid,omitempty"`
	Rows    []Row    `json:"rows"`
	// ServerCounters are llama-server's own speculative-decoding counters over the rows, where
	// its /metrics offers them (34af94cd9 and later), beside the rows' timings.
	ServerCounters *ServerCounters `json:"serverCounters,omitempty"`
	Summary        Summary         `json:"summary"`
	// Decision is what the campaign made of the run (Decide).
	Decision string `json:"decision"`
	// Dir is the run's directory.
	Dir string `json:"dir"`

	tmp        string         // the run's directory while it is written
	status     *progress.Part // the run's part of a terminal's status line, or nil
	statusName string         // the bundle's name there
}

// Crash is how a server crashed before it was ever ready.
type Crash struct {
	// Line is the cause its output gave (llamaserver.CrashLine: an assertion, the first error).
	Line string `json:"line"`
	// Signal is the signal that ended it ("SIGSEGV"), absent for an exit status.
	Signal string `json:"signal,omitempty"`
	// Starts is how many times it was started.
	Starts int `json:"starts"`
}

// ServerInfo is what the run's llama-server said about itself.
type ServerInfo struct {
	BuildInfo   string `json:"buildInfo"`
	Series      bool   `json:"series"`
	Speculative bool   `json:"speculative"`
	Slots       int    `json:"slots"`
	// SlotContext is a slot's context size, tokens (/props n_ctx): two servers measured against
	// each other must have the same.
	SlotContext int `json:"slotContext,omitempty"`
	Restarts    int `json:"restarts"`
	// Devices are the GPUs the server held a CUDA context on once it was ready, as nvidia-smi
	// sees them: the physical device, whatever CUDA_VISIBLE_DEVICES numbered it. None for a
	// CPU or SYCL run, or where nvidia-smi is not on PATH.
	Devices []Device `json:"devices,omitempty"`
	// GPUMemoryMiB is the most GPU memory the server's processes used at once, MiB, as
	// nvidia-smi's compute processes said, sampled from ready to the last row (CUDA runs; 0
	// where nvidia-smi does not say).
	GPUMemoryMiB int `json:"gpuMemoryMiB,omitempty"`
}

// Device is one GPU a run's llama-server used.
type Device struct {
	Description string `json:"description"`
	// ID is the device's PCI bus id ("00000000:18:00.0"); UUID nvidia-smi's GPU-… id.
	ID   string `json:"id"`
	UUID string `json:"uuid,omitempty"`
}

// Canary is the outcome of a run's canary checks.
type Canary struct {
	Checks int `json:"checks"`
	Passed int `json:"passed"`
	// Reference is how the expected output was made: "no-draft" (the same server, the
	// request asking for token probabilities, which patch 0004 makes generate without
	// drafting) or "repeat" (the first output of the prompt: repeated greedy outputs must be
	// identical). Why says why "repeat" was used for a server that drafts.
	Reference string `json:"reference"`
	Why       string `json:"why,omitempty"`
	// ReferenceDrafted and CheckDrafted are the draft tokens llama-server proposed for the
	// references and for the checks: a "no-draft" reference must have none, and checks of a
	// drafting server that proposed none would not have tested speculation.
	ReferenceDrafted int `json:"referenceDrafted"`
	CheckDrafted     int `json:"checkDrafted"`
	// Mismatch is the first check that differed. The checks go on after it (a failed run
	// measures no rows, so they cost little), so that Mismatched counts every check that
	// differed, NearTies those of them that were near-ties, and Worst is the one least like a
	// near-tie: a run whose every mismatch is a near-tie shows numerical noise, one far
	// mismatch a broken speculation path.
	Mismatch   *Mismatch `json:"mismatch,omitempty"`
	Mismatched int       `json:"mismatched,omitempty"`
	NearTies   int       `json:"nearTies,omitempty"`
	Worst      *Mismatch `json:"worst,omitempty"`
}

// worst is the mismatch that decides the run: Worst, or the first for records written
// before the checks went on after it.
func (c *Canary) worst() *Mismatch {
	if c.Worst != nil {
		return c.Worst
	}
	return c.Mismatch
}

// add records a check that differed.
func (c *Canary) add(m *Mismatch) {
	c.Mismatched++
	if m.NearTie() {
		c.NearTies++
	}
	if c.Mismatch == nil {
		c.Mismatch = m
	}
	if c.Worst == nil || m.worseThan(c.Worst) {
		c.Worst = m
	}
}

// summary says how many checks differed and what kind of mismatch they were.
func (c *Canary) summary() string {
	n := max(c.Mismatched, 1) // records written before the checks went on after the first
	s := fmt.Sprintf("%d of %d checks differ", n, c.Checks)
	switch {
	case c.Mismatched == 0:
	case c.NearTies == c.Mismatched:
		s += ", every one a near-tie"
	default:
		s += fmt.Sprintf(", %d near-ties", c.NearTies)
	}
	return s
}

// worseThan says m is less like a near-tie than o: a token outside the reference's top
// alternatives (no margin) is the worst, then the larger margin.
func (m *Mismatch) worseThan(o *Mismatch) bool {
	switch {
	case m.Margin == nil:
		return o.Margin != nil
	case o.Margin == nil:
		return false
	}
	return *m.Margin > *o.Margin
}

// Mismatch is a canary output that differed from its reference.
type Mismatch struct {
	Check    int    `json:"check"`
	Prompt   string `json:"prompt"`
	Position int    `json:"position"`
	Want     int    `json:"wantToken"`
	Got      int    `json:"gotToken"`
	WantText string `json:"wantText"`
	GotText  string `json:"gotText"`
	// With a no-draft reference, the reference's log probabilities at Position of the token it
	// chose (WantLogprob) and of the token the drafted output chose (GotLogprob, when that was
	// among the reference's top alternatives), and the difference: a margin of a few
	// thousandths of a nat is a near-tie that a batched verification step resolved the other
	// way (speculation is lossless only up to the backend's rounding), a large one a real bug.
	WantLogprob *float64 `json:"wantLogprob,omitempty"`
	GotLogprob  *float64 `json:"gotLogprob,omitempty"`
	Margin      *float64 `json:"margin,omitempty"`
}

// explain says what a mismatch's margin suggests, or "" without one.
// NearTieNats is the margin under which a canary mismatch is a near-tie: the reference's
// top two tokens closer than this many nats. With the bigram pair (issue 29) no canary
// mismatched at all (128 checks on CPU, 6 runs of 384 on the H200); with random-weight models
// every drafting run on the H200 stopped at its seventh check.
const NearTieNats = 0.01

// NearTie reports whether the mismatch is a near-tie (see NearTieNats).
func (m *Mismatch) NearTie() bool { return m.Margin != nil && *m.Margin < NearTieNats }

func (m *Mismatch) explain() string {
	switch {
	case m.Margin == nil && m.WantLogprob != nil:
		return "the drafted token was not among the reference's top alternatives: not a near-tie"
	case m.Margin == nil:
		return ""
	case m.NearTie():
		return fmt.Sprintf("a near-tie: the reference's top two differ by %.4g nats, and the batched verification of drafted tokens rounds differently from one-token decoding", *m.Margin)
	}
	return fmt.Sprintf("the reference preferred its token by %.4g nats: not a near-tie, look for a bug in speculative decoding", *m.Margin)
}

// Row is one measured response.
type Row struct {
	Index int `json:"index"`
	// Fresh says the prompt was new to the server process (row 0).
	Fresh        bool    `json:"fresh"`
	PromptTokens int     `json:"promptTokens"`
	CachedTokens int     `json:"cachedTokens"`
	PromptMS     float64 `json:"promptMs"`
	PromptTPS    float64 `json:"promptTokPerSec"`
	Generated    int     `json:"generated"`
	DecodeMS     float64 `json:"decodeMs"`
	// DecodeTPS is llama-server's own decode tok/s (timings.predicted_per_second).
	DecodeTPS float64 `json:"decodeTokPerSec"`
	// ClientTPS is decode tok/s on the bench's clock: tokens between the first and the last
	// streamed token over the time between them.
	ClientTPS float64 `json:"clientTokPerSec"`
	// TTFTMS is the time from sending the request to the first generated token.
	TTFTMS        float64  `json:"ttftMs"`
	DraftProposed int      `json:"draftProposed"`
	DraftAccepted int      `json:"draftAccepted"`
	Acceptance    *float64 `json:"acceptance,omitempty"`
	// Loop says the row's output fell into a cycle (loopOf); nil when it did not.
	Loop *Loop `json:"loop,omitempty"`
}

// Loop is a cycle that greedy output fell into: from token From (0-based, of the generated
// ones) to the end, each token is the one Period tokens before it. A draft is then accepted on
// the cycle, not on text: its acceptance and the speed measure the cycle's length against
// the draft's (a bigram model's greedy output always ends in one; a real model's can).
type Loop struct {
	Period int `json:"period"`
	From   int `json:"from"`
}

// maxLoopPeriod is the longest cycle loopOf looks for.
const maxLoopPeriod = 64

// loopOf is the shortest cycle (of at most maxLoopPeriod tokens) that tokens end in, when it
// covers at least half of them and repeats at least four times; nil otherwise.
func loopOf(tokens []int) *Loop {
	n := len(tokens)
	for p := 1; p <= maxLoopPeriod && 4*p <= n; p++ {
		from := n - p
		for from > 0 && tokens[from-1] == tokens[from-1+p] {
			from--
		}
		if n-from >= max(n/2, 4*p) {
			return &Loop{Period: p, From: from}
		}
	}
	return nil
}

// ServerCounters cross-check the rows' draft figures: GET /metrics's
// llamacpp:spec_decode_num_{draft_tokens,accepted_tokens,drafts}_total after the rows minus
// before them, and the rows' timings summed (draft_n, draft_n_accepted). Agree says both count
// the same drafted and accepted tokens; where they do not, one of the two is wrong (as upstream's
// accepted count was on draft replay before #26320).
type ServerCounters struct {
	Drafted      float64 `json:"drafted"`
	Accepted     float64 `json:"accepted"`
	Drafts       float64 `json:"drafts"`
	RowsDrafted  int     `json:"rowsDrafted"`
	RowsAccepted int     `json:"rowsAccepted"`
	Agree        bool    `json:"agree"`
}

// Summary is a run's headline figures.
type Summary struct {
	// Row0TPS is row 0's decode tok/s by llama-server's timings: the headline.
	Row0TPS       float64 `json:"row0TokPerSec"`
	Row0ClientTPS float64 `json:"row0ClientTokPerSec"`
	// ClientOverServer is Row0ClientTPS over Row0TPS: what the bench's own clock sees against
	// llama-server's timings (streaming, HTTP and the bench's parsing in between).
	ClientOverServer float64 `json:"clientOverServer,omitempty"`
	// RepeatedMeanTPS is the mean over rows 1..N-1 (stability support, never the headline).
	RepeatedMeanTPS *float64 `json:"repeatedMeanTokPerSec,omitempty"`
	// Acceptance is accepted over proposed draft tokens over all rows.
	Acceptance *float64 `json:"acceptance,omitempty"`
	// Loop is row 0's (Row.Loop): the headline measured a cycle, not text.
	Loop *Loop `json:"loop,omitempty"`
}

func summarize(rows []Row) Summary {
	var s Summary
	if len(rows) == 0 {
		return s
	}
	s.Row0TPS, s.Row0ClientTPS, s.Loop = rows[0].DecodeTPS, rows[0].ClientTPS, rows[0].Loop
	if s.Row0TPS > 0 {
		s.ClientOverServer = s.Row0ClientTPS / s.Row0TPS
	}
	if len(rows) > 1 {
		var sum float64
		for _, r := range rows[1:] {
			sum += r.DecodeTPS
		}
		m := sum / float64(len(rows)-1)
		s.RepeatedMeanTPS = &m
	}
	var prop, acc int
	for _, r := range rows {
		prop, acc = prop+r.DraftProposed, acc+r.DraftAccepted
	}
	if prop > 0 {
		a := float64(acc) / float64(prop)
		s.Acceptance = &a
	}
	return s
}

// canaryCell is the table's Canary column: passed/checks, or "-" with none.
func (r *Record) canaryCell() string {
	if r.Canary.Checks == 0 && r.Protocol.Canaries == 0 {
		return "-"
	}
	return itoa(r.Canary.Passed) + "/" + itoa(r.Protocol.Canaries)
}
