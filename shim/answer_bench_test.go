package shim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llbuild/llbuild/llamaserver"
)

// echoAnswerFixture is what the shim handles for one lm-eval loglikelihood
// request (token-id prompt, echo, logprobs 1, max_tokens 1) of n tokens with
// a vocabulary of 32,000 pieces: llama-server's answer in the full form of
// prompt probabilities (patch 0002), in the flat form (patch 0008) and with
// its arrays as base64 (0009), with the same numbers.
type echoAnswerFixture struct {
	v          *vocab
	ids        []int
	full, flat []byte
	packed     []byte // the flat form with its arrays as base64 (patch 0009)
}

func newEchoAnswerFixture(n int) echoAnswerFixture {
	return newEchoAnswerFixtureOf(n, func(i int) string { return " " + strconv.FormatInt(int64(i)*7919, 36) })
}

// mixedPiece is a vocabulary of pieces that are half not plain ASCII, as in a
// multilingual model's: accented and CJK words, and control and byte tokens.
func mixedPiece(i int) string {
	w := strconv.FormatInt(int64(i)*7919, 36)
	switch i % 6 {
	case 0:
		return " é" + w
	case 1:
		return "世" + w
	case 2:
		return string([]byte{byte(i % 256)})
	}
	return " " + w
}

// newEchoAnswerFixtureOf is newEchoAnswerFixture with the vocabulary's pieces piece(0..31999).
func newEchoAnswerFixtureOf(n int, piece func(int) string) echoAnswerFixture {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	pieces := make([]string, 32000)
	for i := range pieces {
		pieces[i] = piece(i)
	}
	f := echoAnswerFixture{v: testVocabOf(pieces), ids: make([]int, n)}
	for i := range f.ids {
		f.ids[i] = 1 + rng.IntN(len(pieces)-1)
	}
	// float32 logprobs written as the doubles llama-server's JSON gives
	lp := func() float64 { return float64(float32(-rng.Float64() * 12)) }
	type alt struct {
		ID      int     `json:"id"`
		Token   string  `json:"token"`
		Bytes   []byte  `json:"-"`
		Raw     []int   `json:"bytes"`
		Logprob float64 `json:"logprob"`
	}
	type entry struct {
		alt
		Top []alt `json:"top_logprobs"`
	}
	mk := func(id int, logprob float64) alt {
		a := alt{ID: id, Token: pieces[id], Logprob: logprob}
		for _, c := range []byte(pieces[id]) {
			a.Raw = append(a.Raw, int(c))
		}
		return a
	}
	var entries []entry
	flat := llamaserver.FlatLogprobs{NTop: 1}
	for _, id := range f.ids[1:] {
		e := entry{alt: mk(id, lp()), Top: []alt{mk(1+rng.IntN(len(pieces)-1), lp())}}
		entries = append(entries, e)
		flat.Logprobs = append(flat.Logprobs, e.Logprob)
		flat.TopIDs = append(flat.TopIDs, e.Top[0].ID)
		flat.TopLogprobs = append(flat.TopLogprobs, e.Top[0].Logprob)
	}
	gen := map[string]any{
		"content": pieces[5], "tokens": []int{5}, "stop": true, "stop_type": "limit", "tokens_predicted": 1,
		"tokens_evaluated": n, "timings": map[string]any{"prompt_n": n, "prompt_ms": 9.5, "cache_n": 0},
		"completion_probabilities": []entry{{alt: mk(5, lp()), Top: []alt{mk(5, lp())}}},
	}
	gen["prompt_probabilities"] = entries
	f.full, _ = json.Marshal(gen)
	delete(gen, "prompt_probabilities")
	gen["prompt_logprobs_flat"] = flat
	f.flat, _ = json.Marshal(gen)
	f32 := func(v []float64) string {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	var idBytes []byte
	for _, id := range flat.TopIDs {
		idBytes = binary.LittleEndian.AppendUint32(idBytes, uint32(id))
	}
	gen["prompt_logprobs_flat"] = map[string]any{"n_top": 1, "encoding": "base64", "logprobs": f32(flat.Logprobs),
		"top_ids": base64.StdEncoding.EncodeToString(idBytes), "top_logprobs": f32(flat.TopLogprobs)}
	f.packed, _ = json.Marshal(gen)
	return f
}

// answer does the shim's part of the request after llama-server's answer
// arrived: decode it, lay out and render the echoed rows and the generated
// token, and write the OpenAI answer. It returns the answer's bytes.
func (f echoAnswerFixture) answer(tb testing.TB, body []byte) []byte {
	r := f.response(tb, body)
	return r.appendJSON(make([]byte, 0, r.sizeHint()))
}

// response is the OpenAI answer that answer writes.
func (f echoAnswerFixture) response(tb testing.TB, body []byte) *completionResponse {
	var resp llamaserver.Completion
	if err := resp.Decode(body); err != nil {
		tb.Fatal(err)
	}
	u := &upstream{vocab: f.v}
	j := &job{u: u, req: &completionRequest{Echo: true, Logprobs: 1, MaxTokens: 1}, p: prompt{IDs: f.ids}, ids: f.ids}
	j.layoutPrompt()
	j.rows = make([]rowEntry, len(f.ids))
	for i, id := range f.ids {
		j.rows[i] = rowEntry{ID: id, Start: j.starts[i]}
	}
	if err := j.fillEchoRows(promptOf(&resp)); err != nil {
		tb.Fatal(err)
	}
	g := alignProbs(f.v, resp.Tokens, resp.Probs)
	rows := j.rows
	for i := range g.ids {
		rows = append(rows, rowEntry{ID: g.ids[i], Start: len(j.promptText) + g.starts[i], Row: probRow(g.probs[i], 1)})
	}
	text := append(append([]byte{}, j.promptText...), g.text...)
	finish := finishReason(resp.StopType)
	lp, err := render(f.v, newRuneOffsets(text), rows, 1, false)
	if err != nil {
		tb.Fatal(err)
	}
	ch := completionChoice{Text: string(text), FinishReason: &finish, Logprobs: lp}
	return &completionResponse{ID: "cmpl-1", Object: "text_completion", Model: "m", Choices: []completionChoice{ch}, Usage: &usage{}}
}

// TestFlatAndFullPromptLogprobsGiveTheSameAnswer: the shim's answer does not
// depend on the form in which llama-server sent the prompt logprobs.
func TestFlatAndFullPromptLogprobsGiveTheSameAnswer(t *testing.T) {
	f := newEchoAnswerFixture(64)
	full, flat, packed := f.answer(t, f.full), f.answer(t, f.flat), f.answer(t, f.packed)
	if string(full) != string(flat) {
		t.Errorf("answer from the flat form differs from the full form's:\nflat %.300s\nfull %.300s", flat, full)
	}
	if string(packed) != string(flat) {
		t.Errorf("answer from the base64 flat form differs from the arrays':\nbase64 %.300s\narrays %.300s", packed, flat)
	}
}

// BenchmarkEchoAnswer measures the shim's own work on the answer to an lm-eval
// loglikelihood request, without llama-server: decoding its answer with the
// prompt probabilities in the full form (0002), the flat form (0008) and the
// flat form with base64 arrays (0009), the rows, and writing the OpenAI answer,
// in turn, and reports each and the ratio flat/full.
func BenchmarkEchoAnswer(b *testing.B) {
	gcAsServed(b)
	for _, n := range []int{128, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			f := newEchoAnswerFixture(n)
			var full, flat, packed time.Duration
			for b.Loop() {
				t0 := time.Now()
				f.answer(b, f.full)
				full += time.Since(t0)
				t0 = time.Now()
				f.answer(b, f.flat)
				flat += time.Since(t0)
				t0 = time.Now()
				f.answer(b, f.packed)
				packed += time.Since(t0)
			}
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(us(full), "full_us")
			b.ReportMetric(us(flat), "flat_us")
			b.ReportMetric(us(packed), "base64_us")
			b.ReportMetric(float64(len(f.packed)), "base64_bytes")
			b.ReportMetric(flat.Seconds()/full.Seconds(), "flat/full")
			b.ReportMetric(float64(len(f.full)), "full_bytes")
			b.ReportMetric(float64(len(f.flat)), "flat_bytes")
		})
	}
}

// gcAsServed runs the rest of b with the garbage collector's target that
// Run sets for llbuild serve (unless GOGC is set), as the shim is measured.
func gcAsServed(b *testing.B) {
	old := debug.SetGCPercent(debug.SetGCPercent(-1)) // read it
	tuneGC()
	b.Cleanup(func() { debug.SetGCPercent(old) })
}

// TestAnswerWriterMatchesEncodingJSON: the hand-written answer is byte for byte
// what encoding/json writes for the same values, for strings that need escaping
// (quotes, control characters, HTML, invalid UTF-8, U+2028), floats in both
// notations, missing rows and nil fields.
func TestAnswerWriterMatchesEncodingJSON(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	stop := "stop"
	top := &topObject{}
	top.set("a\"b", -0.5, false)
	top.set("<&>", -1.25e-7, false)
	top.set("\xff\u2028", -9999, false)
	for _, tc := range []struct {
		name string
		resp *completionResponse
	}{
		{"empty", &completionResponse{}},
		{"every field", &completionResponse{
			ID: "cmpl-é", Object: "text_completion", Created: 1764620000, Model: "m<1>", SystemFingerprint: "b1-\t",
			Choices: []completionChoice{
				{Text: "x\n\"y\"\\\x01\x7f", Index: 0, FinishReason: &stop, Logprobs: &legacyLogprobs{
					Tokens:        []string{"x", "\n", "\xe4\xb8", "token_id:7", " 世界", "\u2029"},
					TokenLogprobs: []*float64{nil, f(-0.0), f(-1e-7), f(-123456.5), f(-3.0000001), f(-2.3025851249694824)},
					TopLogprobs:   []*topObject{nil, top, {}, top, top, top},
					TextOffset:    []int{0, 1, 2, 3, 4, 5},
				}},
				{Index: 1, Logprobs: &legacyLogprobs{}},
			},
			Usage: &usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4, PromptTokensDetails: &promptDetail{CachedTokens: 2}},
		}},
		{"no usage details", &completionResponse{Choices: []completionChoice{}, Usage: &usage{}}},
	} {
		want, err := json.Marshal(tc.resp)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.resp.appendJSON(nil); string(got) != string(want) {
			t.Errorf("%s: appendJSON =\n%s\nwant (encoding/json)\n%s", tc.name, got, want)
		}
	}
	// the echo answer of a whole request, as the benchmark writes it, with
	// plain ASCII pieces and with others (control, byte and CJK tokens)
	for _, fx := range []echoAnswerFixture{newEchoAnswerFixture(64), newEchoAnswerFixtureOf(512, mixedPiece)} {
		resp := fx.response(t, fx.flat)
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.appendJSON(nil); string(got) != string(want) {
			t.Errorf("echo answer: appendJSON =\n%.400s\nwant (encoding/json)\n%.400s", got, want)
		}
	}
}

// awkwardStrings are token texts that take every branch of appendJSONString:
// escapes with a short form and without, HTML, DEL, invalid and truncated
// UTF-8, U+FFFD itself, U+2028 and U+2029, and multi-byte characters.
var awkwardStrings = []string{
	"", "plain", " the", "a\"b\\c", "\b\f\n\r\t", "\x00\x01\x1f", "<&>", "\x7f", "\xff", "\xe4\xb8",
	"x\xe4\xb8", "\xed\xa0\x80", "\uFFFD", "\u2028\u2029", "a\u2028b", "\u2027\u202a", " 世界", "▁the", "Ġthe",
	"😀", "\xf0\x9f\x98", "é\xc3", "<0x0A>",
}

// TestAppendJSONStringMatchesEncodingJSON: every string is written as
// json.Marshal writes it, for every single byte and the awkward strings.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	in := slices.Clone(awkwardStrings)
	for c := range 256 {
		in = append(in, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	for _, s := range in {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[1:], want)
		}
	}
}

// FuzzAppendJSONString: any string is written as json.Marshal writes it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range awkwardStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

// appendJSONStringBefore is how appendJSONString wrote a string before it
// escaped one itself: plain printable ASCII copied, anything else through
// json.Marshal. BenchmarkAnswerStrings measures against it.
func appendJSONStringBefore(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// BenchmarkAnswerStrings writes the strings of an echo answer (the text, the
// tokens and the top objects' keys) with appendJSONString and with the way
// before it (appendJSONStringBefore), in turn on the same answer, for a
// vocabulary of plain ASCII pieces and one half of other pieces (mixedPiece),
// and reports both and the ratio new/old.
func BenchmarkAnswerStrings(b *testing.B) {
	gcAsServed(b)
	for _, vc := range []struct {
		name  string
		piece func(int) string
	}{{"ascii", nil}, {"mixed", mixedPiece}} {
		for _, n := range []int{128, 512} {
			b.Run(vc.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				f := newEchoAnswerFixture(n)
				if vc.piece != nil {
					f = newEchoAnswerFixtureOf(n, vc.piece)
				}
				resp := f.response(b, f.packed)
				ch := resp.Choices[0]
				write := func(buf []byte, str func([]byte, string) []byte) []byte {
					buf = str(buf[:0], ch.Text)
					for _, t := range ch.Logprobs.Tokens {
						buf = str(buf, t)
					}
					for _, t := range ch.Logprobs.TopLogprobs {
						if t != nil {
							for _, k := range t.keys {
								buf = str(buf, k)
							}
						}
					}
					return buf
				}
				buf := make([]byte, 0, resp.sizeHint())
				if string(write(nil, appendJSONString)) != string(write(nil, appendJSONStringBefore)) {
					b.Fatal("the two ways write different strings")
				}
				inTurn(b, func() { buf = write(buf, appendJSONString) }, func() { buf = write(buf, appendJSONStringBefore) })
			})
		}
	}
}

// inTurn runs now and before in turn, each b.N times, and reports each one's
// time (new_us, old_us) and the ratio new/old: a benchmark of a way of
// writing against the way before it, on the same data in one process.
func inTurn(b *testing.B, now, before func()) {
	var tNow, tBefore time.Duration
	for b.Loop() {
		t0 := time.Now()
		now()
		tNow += time.Since(t0)
		t0 = time.Now()
		before()
		tBefore += time.Since(t0)
	}
	b.ReportMetric(float64(tNow.Nanoseconds())/1e3/float64(b.N), "new_us")
	b.ReportMetric(float64(tBefore.Nanoseconds())/1e3/float64(b.N), "old_us")
	b.ReportMetric(tNow.Seconds()/tBefore.Seconds(), "new/old")
}

// TestLogprobsWriterMatchesItsParts: the logprobs object, whose top objects
// copy the token's and the logprob's bytes written before them, is what
// writing each part on its own gives: the tokens and offsets through
// encoding/json, each logprob with appendJSONFloat and each top object with
// its MarshalJSON (keys through encoding/json).
func TestLogprobsWriterMatchesItsParts(t *testing.T) {
	for _, fx := range []echoAnswerFixture{newEchoAnswerFixture(64), newEchoAnswerFixtureOf(512, mixedPiece)} {
		l := fx.response(t, fx.flat).Choices[0].Logprobs
		want := []byte(`{"tokens":`)
		tokens, _ := json.Marshal(l.Tokens)
		want = append(append(want, tokens...), `,"token_logprobs":[`...)
		for i, v := range l.TokenLogprobs {
			if i > 0 {
				want = append(want, ',')
			}
			if v == nil {
				want = append(want, "null"...)
			} else {
				want = appendJSONFloat(want, *v)
			}
		}
		want = append(want, `],"top_logprobs":[`...)
		for i, top := range l.TopLogprobs {
			if i > 0 {
				want = append(want, ',')
			}
			if top == nil {
				want = append(want, "null"...)
				continue
			}
			o, _ := top.MarshalJSON()
			want = append(want, o...)
		}
		offsets, _ := json.Marshal(l.TextOffset)
		want = append(append(append(want, `],"text_offset":`...), offsets...), '}')
		if got := l.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON =\n%.400s\nwant\n%.400s", got, want)
		}
	}
}
