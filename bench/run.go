package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/llamaserver"
)

// Options configure a bench invocation.
type Options struct {
	Protocol Protocol
	// Dir is the campaign directory: runs/<label>/ per run and records.json.
	Dir string
	// Rounds is how many times each bundle runs; with several bundles the runs interleave
	// (A B A B ...). 0 means 1 for one bundle, and for several the fewest rounds with which the
	// judge can decide at its alpha (RoundsNeeded: 6 at 0.05).
	Rounds int
	// Judge decides every comparison and promotion; the zero value is DefaultJudge.
	Judge Judge
	// GPUs, when set, run bundles in parallel, one per device, each on its own port; bundle i
	// runs on GPUs[(i+round) mod N], rotating from round to round.
	GPUs []string
	// Control, with GPUs, runs on every device in every round: the table then says how much the
	// devices differ.
	Control *Bundle
	// Log receives the servers' supervision messages; Progress a line per step.
	Log      *slog.Logger
	Progress io.Writer
	// Status is stderr's status line on a terminal (nil elsewhere): each run in progress shows
	// its part there (the canaries or the row it is at, the elapsed time), beside the lines
	// Progress gets.
	Status *progress.Term
	// ReadyTimeout bounds a server's start; 0 means 10 minutes.
	ReadyTimeout time.Duration
	// Invocation is the command line that asked for the runs, kept in each record.
	Invocation []string
	// Name, when set, heads every run's label (--label); Note is kept in every record and in
	// records.json (--note).
	Name, Note string

	// start starts a bundle's server; tests put a fake llama-server here (it stands for one
	// that answers a different token). nil means startBundle.
	start func(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error)
	// computeApps lists the processes that hold a GPU (nvidia-smi's query); nil runs
	// nvidia-smi when it is on PATH.
	computeApps func(ctx context.Context) ([]computeApp, error)
	// sysRoot is where /sys is read for SYCL devices: "" for the machine's own, a test's tree.
	sysRoot string
	// crashed holds the bundles whose server crashed at load, by directory: their later rounds
	// are not started (Run sets it).
	crashed *crashes
	now     func() time.Time
	// holding says the caller holds the campaign (holdCampaign) for this Run: a sweep's two.
	holding bool
}

// server is a started llama-server.
type server interface {
	ready(ctx context.Context) (llamaserver.Endpoint, error)
	restarts() int
	// pid is the server's process id (0 for none), to find its GPUs.
	pid() int
	stop()
}

type process struct {
	p *llamaserver.Process[struct{}]
}

func (p process) ready(ctx context.Context) (llamaserver.Endpoint, error) { return p.p.Ready(ctx) }
func (p process) restarts() int                                           { return p.p.Restarts() }
func (p process) stop()                                                   { p.p.Stop() }
func (p process) pid() int                                                { return p.p.PID() }

// startBundle starts b's llama-server exactly as llbuild serve does (llamaserver.Start with
// the manifest's launch), with env added to the environment.
func (o *Options) startBundle(ctx context.Context, b *Bundle, env []string, log io.Writer) (server, error) {
	l := b.Launch
	p, err := llamaserver.Start(ctx, llamaserver.Options[struct{}]{
		Path: l.Path,
		Args: l.Args,
		// /metrics on (it changes no computation), for the spec-decode counters; the bundle's
		// own --metrics or environment wins
		Env:          append(append(append(os.Environ(), "LLAMA_ARG_ENDPOINT_METRICS=1"), l.Env...), env...),
		Dir:          l.Dir,
		Output:       log,
		ReadyTimeout: o.ReadyTimeout,
		// a crash at load that repeats is not retried: the run says crashed
		GiveUpOnSameCrash: true,
	}, o.Log)
	if err != nil {
		return nil, err
	}
	return process{p}, nil
}

// smi is the query of nvidia-smi's compute processes for a CUDA bundle's server, nil when there
// is none to ask.
func (o *Options) smi(b *Bundle, pid int) func(context.Context) ([]computeApp, error) {
	if b.Manifest.Target.Backend != "cuda" || pid == 0 {
		return nil
	}
	if o.computeApps != nil {
		return o.computeApps
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return nil
	}
	return nvidiaSMI
}

// devices are the GPUs a CUDA bundle's ready server holds, as nvidia-smi sees them, and the
// memory it uses then; a failed query is said and leaves none.
func (o *Options) devices(ctx context.Context, b *Bundle, rec *Record, pid int) ([]Device, int) {
	if b.Manifest.Target.Backend == "sycl" {
		return syclDevices(o.sysRoot, rec.Identity.GPU), 0
	}
	query := o.smi(b, pid)
	if query == nil {
		return nil, 0
	}
	apps, err := query(ctx)
	if err != nil {
		o.progress("%s: which GPU its server runs on is not known: %v", rec.Identity.Label, err)
		return nil, 0
	}
	return devicesOf(apps, pid), memoryOf(apps, pid)
}

// gpuMemoryEvery is how often a CUDA run's GPU memory is sampled.
var gpuMemoryEvery = 250 * time.Millisecond

// sampleGPUMemory samples the server's GPU memory until the returned stop is called, which
// gives the peak (MiB, at least from). Samples that fail are skipped: the figure is support,
// not a reason to fail a run.
func (o *Options) sampleGPUMemory(ctx context.Context, b *Bundle, pid, from int) (stop func() int) {
	query := o.smi(b, pid)
	if query == nil {
		return func() int { return from }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		peak := from
		t := time.NewTicker(gpuMemoryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- peak
				return
			case <-t.C:
				if apps, err := query(ctx); err == nil {
					peak = max(peak, memoryOf(apps, pid))
				}
			}
		}
	}()
	return func() int { cancel(); return <-done }
}

// status shows where rec's run is on the status line, when there is one.
func (o *Options) status(rec *Record, format string, args ...any) {
	if rec.status != nil {
		rec.status.Set(fmt.Sprintf(format, args...) + "  " + progress.Elapsed(time.Since(rec.Started)))
	}
}

// keepPending writes what the run has measured so far into its pending record, for a bench that
// adopts it if this one is killed; a failure to write it is said, and the run goes on.
func (o *Options) keepPending(rec *Record) {
	if rec.tmp == "" {
		return
	}
	if err := writePending(rec.tmp, rec); err != nil {
		o.progress("%s: keeping the rows so far for a later bench to adopt: %v", rec.Identity.Label, err)
	}
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "bench: "+format+"\n", args...)
	}
}

// crashes are the crashes of one invocation's bundles, by bundle directory.
type crashes struct {
	mu sync.Mutex
	by map[string]*Crash
}

func (c *crashes) get(dir string) *Crash {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[dir]
}

func (c *crashes) put(dir string, cr *Crash) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[dir] = cr
}

// runOne measures b once: it starts its server, runs the canaries and the rows, stops the
// server and returns the record, complete or not. The record's directory holds server.log.
func (o *Options) runOne(ctx context.Context, b *Bundle, round int, gpu string) *Record {
	started := o.now()
	id := newIdentity(b, o.Protocol, gpu, started)
	if o.Name != "" || o.Note != "" {
		id.Name, id.Note = o.Name, o.Note
		id.Label = id.label()
	}
	rec := &Record{SchemaVersion: RecordSchema, Identity: id, Bundle: b.Name,
		Invocation: o.Invocation, Protocol: o.Protocol, Round: round, Started: started.UTC()}
	rec.Patches = keepPatches(o.Dir, b, o.Log)
	// What reaches llama-server besides the manifest's environment: the bench's own (the
	// device) and the shell's. The shell's variables that change what it computes are part of
	// the identity and the label (a lab's LLAMA_*/GGML_* switches set in the shell changed runs
	// and appeared nowhere); every other variable is recorded by name only, values being the
	// shell's business (tokens, paths).
	inherited, names := computeEnv(os.Environ(), b.Manifest.Server.Env)
	rec.EnvNames = names
	if env := append(inherited, deviceEnv(b.Manifest.Target.Backend, gpu)...); len(env) > 0 {
		rec.Identity.Env = mergeEnv(rec.Identity.Env, env)
		rec.Identity.Label = rec.Identity.label()
	}
	name := rec.Identity.Label
	if round > 0 {
		name += "-r" + strconv.Itoa(round)
	}
	rec.Dir = filepath.Join(o.Dir, "runs", dirName(name))
	err := os.MkdirAll(filepath.Join(o.Dir, "runs"), 0o755)
	var tmp string
	if err == nil {
		tmp, err = os.MkdirTemp(filepath.Join(o.Dir, "runs"), tmpPrefix())
	}
	if err == nil {
		rec.tmp = tmp
		err = writePending(tmp, rec)
	}
	if prev := o.crashed.get(b.Name + "\x00" + b.Dir); prev != nil && err == nil {
		// the same crash at every start: an earlier round saw it twice; not started again
		rec.Crash = &Crash{Line: prev.Line}
		err = fmt.Errorf("not started: its server exited at each start in an earlier round before it was ready: %s", prev.Line)
	} else if err == nil {
		err = o.measure(ctx, b, rec, gpu, tmp)
	}
	rec.tmp = tmp
	if crash := (*llamaserver.CrashError)(nil); errors.As(err, &crash) {
		rec.Crash = &Crash{Line: crash.Line, Signal: crash.Signal, Starts: crash.Exits}
		o.crashed.put(b.Name+"\x00"+b.Dir, rec.Crash)
	}
	if err != nil {
		rec.Error = err.Error()
		if ctx.Err() != nil {
			rec.Error = "interrupted: " + rec.Error
		}
	} else {
		rec.Complete = true
	}
	rec.Finished = o.now().UTC()
	rec.Summary = summarize(rec.Rows)
	rec.Valid, rec.Invalid = validity(b, rec)
	return rec
}

// computePrefixes are the families of variables that change what llama-server computes or how
// fast: llama.cpp's and ggml's own switches, the GPU runtimes' (CUDA, NVIDIA's TF32 override,
// oneAPI, Level Zero, SYCL) and the OpenMP runtimes' thread and spin settings (OMP_NUM_THREADS,
// GOMP_SPINCOUNT, KMP_BLOCKTIME), the knobs bundle --env sets.
var computePrefixes = []string{"LLAMA_", "GGML_", "CUDA_", "NVIDIA_TF32", "ONEAPI_", "ZE_", "SYCL_", "OMP_", "GOMP_", "KMP_"}

// secret says a variable's value is nobody's business but the shell's: its name says key,
// token, secret, password or credential. A record keeps such a variable by name only, whatever
// its family.
func secret(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"} {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// computeEnv splits the environment a server inherits: the variables that change computation
// and that the manifest does not set (KEY=VALUE, sorted), by value unless secret, and the names
// of all it inherits (every other variable is recorded by name only).
func computeEnv(environ []string, manifest map[string]string) (compute, names []string) {
	for _, kv := range environ {
		k, _, _ := cutEq(kv)
		names = append(names, k)
		if _, set := manifest[k]; set || secret(k) {
			continue
		}
		for _, p := range computePrefixes {
			if strings.HasPrefix(k, p) {
				compute = append(compute, kv)
				break
			}
		}
	}
	slices.Sort(compute)
	slices.Sort(names)
	return compute, slices.Compact(names)
}

func mergeEnv(env map[string]string, add []string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for _, kv := range add {
		k, v, _ := cutEq(kv)
		out[k] = v
	}
	return out
}

func cutEq(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// validity says whether a run's figures count and why not.
func validity(b *Bundle, r *Record) (bool, []string) {
	var why []string
	if !r.Complete {
		why = append(why, "incomplete")
	}
	if r.Canary.Mismatch != nil {
		why = append(why, fmt.Sprintf("canary mismatch at check %d (%s)", r.Canary.Mismatch.Check, r.Canary.summary()))
	}
	for _, row := range r.Rows {
		if row.CachedTokens > 0 {
			what := "repeated"
			if row.Fresh {
				what = "fresh"
			}
			why = append(why, fmt.Sprintf("cached tokens: row %d (%s) reused %d prompt tokens", row.Index, what, row.CachedTokens))
		}
	}
	for _, p := range reuseProblems(b.Manifest.Settings()) {
		why = append(why, "prompt reuse allowed: "+p)
	}
	if r.Server.Restarts > 0 {
		why = append(why, fmt.Sprintf("llama-server restarted %d times during the run", r.Server.Restarts))
	}
	return len(why) == 0, why
}

func (o *Options) measure(ctx context.Context, b *Bundle, rec *Record, gpu, dir string) error {
	serverLog, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return fmt.Errorf("creating the server log: %w", err)
	}
	defer serverLog.Close()
	start := o.start
	if start == nil {
		start = o.startBundle
	}
	o.progress("%s: starting llama-server", rec.Identity.Label)
	if o.Status != nil {
		rec.status = o.Status.Part()
		defer func() { rec.status.Remove(); rec.status = nil }()
		rec.statusName = filepath.Base(b.Name)
		o.status(rec, "bench %s: starting llama-server", rec.statusName)
	}
	srv, err := start(ctx, b, deviceEnv(b.Manifest.Target.Backend, gpu), serverLog)
	if err != nil {
		return err
	}
	defer func() {
		rec.Server.Restarts = srv.restarts()
		srv.stop()
	}()
	ep, err := srv.ready(ctx)
	if err != nil {
		return err
	}
	rec.Server = ServerInfo{BuildInfo: ep.BuildInfo, Series: ep.Series, Speculative: ep.Speculative, Slots: ep.TotalSlots, SlotContext: ep.NCtx}
	var used int
	rec.Server.Devices, used = o.devices(ctx, b, rec, srv.pid())
	stopSampling := o.sampleGPUMemory(ctx, b, srv.pid(), used)
	defer func() { rec.Server.GPUMemoryMiB = stopSampling() }()
	c := llamaserver.NewClient(ep.BaseURL, ep.APIKey)
	if o.now != nil {
		c.Now = o.now
	}
	// The rows' input is checked before the canaries spend any time.
	prompt, err := o.rowInput(ctx, c, ep)
	if err != nil {
		return err
	}
	if err := o.canaries(ctx, c, ep, rec); err != nil {
		return fmt.Errorf("canaries: %w", err)
	}
	if can := &rec.Canary; can.Mismatch != nil {
		for _, m := range []*Mismatch{can.Mismatch, can.Worst} {
			if m == can.Worst && m == can.Mismatch {
				break
			}
			o.progress("%s: canary %d failed at token %d: got %d %q, want %d %q", rec.Identity.Label, m.Check, m.Position, m.Got, m.GotText, m.Want, m.WantText)
			if why := m.explain(); why != "" {
				o.progress("%s: canary %d: %s", rec.Identity.Label, m.Check, why)
			}
		}
		o.progress("%s: %s", rec.Identity.Label, can.summary())
		return nil // the figures would not count: no rows
	}
	o.keepPending(rec)
	return o.rows(ctx, c, rec, prompt)
}

// canaries runs the protocol's canary checks: greedy outputs of fixed prompts compared with
// a reference. Every mismatch is counted (see Canary); the run then measures no rows.
func (o *Options) canaries(ctx context.Context, c *llamaserver.Client, ep llamaserver.Endpoint, rec *Record) error {
	n := o.Protocol.Canaries
	can := &rec.Canary
	switch {
	case ep.Speculative && ep.Series:
		can.Reference = "no-draft"
	case ep.Speculative:
		can.Reference = "repeat"
		can.Why = "this llama-server drafts but lacks llbuild's patch 0004, so speculation cannot be turned off for one request: the canaries check only that repeated greedy outputs are identical"
	default:
		can.Reference = "repeat"
	}
	if n == 0 {
		return nil
	}
	req := func(prompt string, nprobs int) llamaserver.CompletionRequest {
		r := greedy(prompt, o.Protocol.CanaryTokens)
		r.NProbs = nprobs
		return r
	}
	refs := map[int]*llamaserver.Timed{}
	for i := 0; i < n; i++ {
		k := i % len(canaryPrompts)
		prompt := canaryPrompts[k]
		if refs[k] == nil {
			nprobs := 0
			if can.Reference == "no-draft" {
				nprobs = 2 // any n_probs turns drafting off (0004); two show how close a mismatch was
			}
			r, err := c.CompleteTimed(ctx, req(prompt, nprobs))
			if err != nil {
				return err
			}
			refs[k] = r
			can.ReferenceDrafted += r.Timings.DraftN
			if can.Reference == "no-draft" && r.Timings.DraftN > 0 {
				return fmt.Errorf("the no-draft reference for %q drafted %d tokens: this llama-server does not turn drafting off for a request that asks for token probabilities (patch 0004)", prompt, r.Timings.DraftN)
			}
		}
		got, err := c.CompleteTimed(ctx, req(prompt, 0))
		if err != nil {
			return err
		}
		can.CheckDrafted += got.Timings.DraftN
		can.Checks++
		if m := firstDifference(refs[k].Tokens, got.Tokens); m >= 0 {
			mm := &Mismatch{Check: i, Prompt: prompt, Position: m, Want: at(refs[k].Tokens, m), Got: at(got.Tokens, m),
				WantText: refs[k].Text, GotText: got.Text}
			margin(mm, refs[k])
			can.add(mm)
		} else {
			can.Passed++
		}
		differ := ""
		if can.Mismatched > 0 {
			differ = fmt.Sprintf(", %d differ", can.Mismatched)
		}
		o.status(rec, "bench %s: canaries %d/%d%s", rec.statusName, i+1, n, differ)
		if (i+1)%64 == 0 || i+1 == n {
			if can.Mismatched > 0 {
				o.progress("%s: canaries %d/%d, %d differ (%d near-ties)", rec.Identity.Label, i+1, n, can.Mismatched, can.NearTies)
			} else {
				o.progress("%s: canaries %d/%d", rec.Identity.Label, i+1, n)
			}
		}
	}
	return nil
}

// margin fills in how strongly the reference preferred its token at the mismatch, from the
// probabilities a no-draft reference carries.
func margin(m *Mismatch, ref *llamaserver.Timed) {
	if m.Position >= len(ref.Probs) {
		return
	}
	p := ref.Probs[m.Position]
	want := p.Logprob
	m.WantLogprob = &want
	for _, t := range p.Top {
		if t.ID == m.Got {
			got := t.Logprob
			d := want - got
			m.GotLogprob, m.Margin = &got, &d
		}
	}
}

// greedy is a request for n greedy tokens of prompt (text or token ids), past any end of
// text, in whichever slot is free, without the prompt cache: temperature 0, top_k 1 and
// seed 0 are sent, as llama-server's defaults are other.
func greedy(prompt any, n int) llamaserver.CompletionRequest {
	temp, topK, seed := 0.0, 1, int64(0)
	return llamaserver.CompletionRequest{Prompt: prompt, NPredict: n, Temperature: &temp, TopK: &topK, Seed: &seed,
		IgnoreEOS: true, CachePrompt: false, IDSlot: -1}
}

// firstDifference is the first position where a and b differ (a length counts), or -1.
func firstDifference(a, b []int) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return -1
}

// rowPrompt returns the rows' prompt: token ids for a filled-long prompt (exactly
// PromptTokens), a llamaserver.MediaPrompt for chat messages with images, text otherwise.
func (o *Options) rowPrompt(ctx context.Context, c *llamaserver.Client, ep llamaserver.Endpoint) (any, error) {
	prompt, err := o.rawPrompt(ctx, c)
	if err != nil || !o.Protocol.Chat {
		return prompt, err
	}
	return o.chatPrompt(ctx, c, ep, prompt)
}

// chatPrompt renders the rows' prompt as a chat turn through the server's own template. The
// template renders an image part as the server's media marker; the images go beside the text,
// one per marker, for the projector to encode in every row's prefill.
func (o *Options) chatPrompt(ctx context.Context, c *llamaserver.Client, ep llamaserver.Endpoint, prompt any) (any, error) {
	var text string
	switch p := prompt.(type) {
	case []int:
		var err error
		if text, err = c.Detokenize(ctx, p); err != nil {
			return nil, fmt.Errorf("the filled-long prompt as text: %w", err)
		}
	case string:
		text = p
	}
	messages, err := json.Marshal([]map[string]string{{"role": "user", "content": text}})
	if err != nil {
		return nil, err
	}
	if t := strings.TrimSpace(text); o.Protocol.Prompt == PromptFile && strings.HasPrefix(t, "[") {
		var given []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		}
		if err := json.Unmarshal([]byte(t), &given); err != nil || len(given) == 0 {
			return nil, fmt.Errorf("prompt file %s starts with [ but is not a JSON array of chat messages ({\"role\": ..., \"content\": ...}): %v", o.Protocol.PromptFile, err)
		}
		messages = []byte(t)
	}
	rendered, err := c.ApplyTemplate(ctx, messages)
	if err != nil {
		return nil, fmt.Errorf("rendering the chat turn with the server's template (/apply-template): %w", err)
	}
	if rendered == nil || *rendered == "" {
		return nil, errors.New("the server's chat template rendered the chat turn as nothing")
	}
	if o.Protocol.Images == 0 {
		return *rendered, nil
	}
	images, err := chatImages(text)
	if err != nil {
		return nil, err
	}
	if !ep.Vision || ep.MediaMarker == "" {
		return nil, fmt.Errorf("the server takes no images (its /props says no vision modality) and the messages hold %d: bundle with --mmproj and the model's vision projector", len(images))
	}
	if n := strings.Count(*rendered, ep.MediaMarker); n != len(images) {
		return nil, fmt.Errorf("the server's chat template rendered %d of the messages' %d images: the rows would not carry them all", n, len(images))
	}
	return llamaserver.MediaPrompt{Text: *rendered, Media: images}, nil
}

// rawPrompt is the protocol's prompt: token ids for filled-long, else text.
func (o *Options) rawPrompt(ctx context.Context, c *llamaserver.Client) (any, error) {
	p := o.Protocol
	switch p.Prompt {
	case PromptFilledLong:
		ids, err := c.Tokenize(ctx, llamaserver.TokenizeRequest{Content: fillerText(p.PromptTokens), AddSpecial: true})
		if err != nil {
			return nil, fmt.Errorf("tokenizing the filled-long prompt: %w", err)
		}
		if len(ids) < p.PromptTokens {
			return nil, fmt.Errorf("the filler text gives only %d tokens, fewer than --prompt-tokens %d", len(ids), p.PromptTokens)
		}
		return ids[:p.PromptTokens], nil
	case PromptFile:
		return p.PromptText, nil
	}
	return shortPrompt, nil
}

// rows measures the protocol's rows: row 0 is the first time this server process sees the
// prompt, rows 1..N-1 repeat it. Every row is a full prefill (cache_prompt off), so a row
// that still reports cached tokens shows the server reused work it was told not to.
// rowInput is the rows' prompt, refused when a row would not fit the bundle's slot.
func (o *Options) rowInput(ctx context.Context, c *llamaserver.Client, ep llamaserver.Endpoint) (any, error) {
	prompt, err := o.rowPrompt(ctx, c, ep)
	if err != nil {
		return nil, err
	}
	text := ""
	n := 0
	switch p := prompt.(type) {
	case []int:
		n = len(p)
	case string:
		text = p
	case llamaserver.MediaPrompt:
		// only the text's tokens: an image's count is known once the projector has encoded
		// it, so this check is a lower bound and the server refuses a row that does not fit
		text = strings.ReplaceAll(p.Text, ep.MediaMarker, "")
	}
	if text != "" {
		ids, err := c.Tokenize(ctx, llamaserver.TokenizeRequest{Content: text, AddSpecial: true})
		if err != nil {
			return nil, fmt.Errorf("tokenizing the prompt: %w", err)
		}
		n = len(ids)
	}
	if need := n + o.Protocol.Generate; ep.NCtx > 0 && need > ep.NCtx {
		return nil, fmt.Errorf("a row needs %d tokens of context (%d prompt + %d generated) and the bundle's slot has %d: bundle with --ctx-size %d or more (times --parallel), or lower --generate",
			need, n, o.Protocol.Generate, ep.NCtx, need)
	}
	return prompt, nil
}

func (o *Options) rows(ctx context.Context, c *llamaserver.Client, rec *Record, prompt any) error {
	before, counted, err := c.SpecMetrics(ctx)
	if err != nil {
		o.progress("%s: llama-server's /metrics: %v; its spec-decode counters are left out", rec.Identity.Label, err)
	}
	for i := 0; i < o.Protocol.Rows; i++ {
		last := ""
		if i > 0 {
			last = fmt.Sprintf(" (row %d: %.2f tok/s)", i-1, rec.Rows[i-1].DecodeTPS)
		}
		o.status(rec, "bench %s: rows %d/%d%s", rec.statusName, i, o.Protocol.Rows, last)
		r, err := c.CompleteTimed(ctx, greedy(prompt, o.Protocol.Generate))
		if err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		row := rowOf(i, r)
		rec.Rows = append(rec.Rows, row)
		o.keepPending(rec)
		o.progress("%s: row %d: %.2f tok/s decode (client %.2f), %d tokens, ttft %.1f ms", rec.Identity.Label, i,
			row.DecodeTPS, row.ClientTPS, row.Generated, row.TTFTMS)
	}
	if counted {
		// a slot adds its counts to the server's when it is released, right after its final
		// answer: by now every row's are in
		after, ok, err := c.SpecMetrics(ctx)
		if err != nil || !ok {
			o.progress("%s: llama-server's /metrics could not be read after the rows (%v); its spec-decode counters are left out", rec.Identity.Label, err)
			return nil
		}
		sc := &ServerCounters{Drafted: after.Drafted - before.Drafted, Accepted: after.Accepted - before.Accepted, Drafts: after.Drafts - before.Drafts}
		for _, r := range rec.Rows {
			sc.RowsDrafted += r.DraftProposed
			sc.RowsAccepted += r.DraftAccepted
		}
		sc.Agree = sc.Drafted == float64(sc.RowsDrafted) && sc.Accepted == float64(sc.RowsAccepted)
		rec.ServerCounters = sc
		if !sc.Agree {
			o.progress("%s: llama-server's /metrics counted %.0f drafted and %.0f accepted tokens over the rows, their timings %d and %d: one of the two counts wrong",
				rec.Identity.Label, sc.Drafted, sc.Accepted, sc.RowsDrafted, sc.RowsAccepted)
		}
	}
	return nil
}

func rowOf(i int, r *llamaserver.Timed) Row {
	t := r.Timings
	row := Row{Index: i, Fresh: i == 0, PromptTokens: t.PromptN, CachedTokens: t.CacheN, PromptMS: t.PromptMS,
		PromptTPS: t.PromptPerSecond, Generated: t.PredictedN, DecodeMS: t.PredictedMS, DecodeTPS: t.PredictedPerSecond,
		TTFTMS: ms(r.First.Sub(r.Sent)), DraftProposed: t.DraftN, DraftAccepted: t.DraftNAccepted, Loop: loopOf(r.Tokens)}
	if d := r.Last.Sub(r.First); d > 0 && r.LastN > r.FirstN {
		row.ClientTPS = float64(r.LastN-r.FirstN) / d.Seconds()
	}
	if t.DraftN > 0 {
		a := float64(t.DraftNAccepted) / float64(t.DraftN)
		row.Acceptance = &a
	}
	return row
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
