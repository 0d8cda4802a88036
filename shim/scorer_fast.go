package shim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unsafe"
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

// promptLogprobsRequest is a native /completion body asking for the
// prompt's logprobs; the one generated token is forced to a harmless one.
type promptLogprobsRequest struct {
	Prompt         []int        `json:"prompt"`
	NPredict       int          `json:"n_predict"`
	PromptLogprobs int          `json:"prompt_logprobs"`
	Temperature    float64      `json:"temperature"`
	TopK           int          `json:"top_k"`
	Samplers       []string     `json:"samplers"`
	LogitBias      [][2]float64 `json:"logit_bias,omitempty"`
	CachePrompt    bool         `json:"cache_prompt"`
	IDSlot         int          `json:"id_slot"`
	ResponseFields []string     `json:"response_fields"`
	Flat           bool         `json:"prompt_logprobs_flat,omitempty"`
	Base64         bool         `json:"prompt_logprobs_base64,omitempty"`
}

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
	req := &promptLogprobsRequest{
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
	var resp nativeResponse
	if err := n.u.postJSON(ctx, "/completion", req, &resp); err != nil {
		return nil, fmt.Errorf("reading prompt logprobs: %w", err)
	}
	return resp.prompt().rows(seq[:last+1], positions, top)
}

// promptLogprobs are a patched llama-server's prompt logprobs: the full form
// (prompt_probabilities, patch 0002: an object per position with pieces and
// bytes) or the flat one (prompt_logprobs_flat, patch 0008: number arrays),
// whichever the answer has. Both carry the same floats.
type promptLogprobs struct {
	Full *[]nativeProb
	Flat *flatLogprobs
}

// flatLogprobs is prompt_logprobs_flat: Logprobs[k] is token k+1 given tokens
// 0..k, and TopIDs and TopLogprobs hold NTop alternatives per position, the
// most probable first.
type flatLogprobs struct {
	NTop        int       `json:"n_top"`
	Logprobs    []float64 `json:"logprobs"`
	TopIDs      []int     `json:"top_ids"`
	TopLogprobs []float64 `json:"top_logprobs"`
}

// rows reads the rows at positions (ascending, within 1..len(seq)-1) for the
// prompt seq.
func (pl promptLogprobs) rows(seq []int, positions []int, top int) ([]Row, error) {
	if pl.Flat != nil {
		return pl.Flat.rows(seq, positions, top)
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

func (f *flatLogprobs) rows(seq []int, positions []int, top int) ([]Row, error) {
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

// UnmarshalJSON reads the flat form's number arrays without reflection over
// every element (they hold thousands of numbers); anything but the shapes
// patches 0008 and 0009 write goes through encoding/json, which reports what
// is wrong with number arrays (and refuses base64 ones it cannot read).
func (f *flatLogprobs) UnmarshalJSON(data []byte) error {
	if f.fastUnmarshal(data) {
		return nil
	}
	type plain flatLogprobs
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*f = flatLogprobs(p)
	return nil
}

// fastUnmarshal parses {"n_top":K,"logprobs":[..],"top_ids":[..],"top_logprobs":[..]},
// or with "encoding":"base64" the three arrays as base64 strings of their
// little-endian float32 / int32 values (0009), in any key order, with
// whitespace, and says whether data had that shape.
func (f *flatLogprobs) fastUnmarshal(data []byte) bool {
	var out flatLogprobs
	i := 0
	ws := func() { i = skipJSONSpace(data, i) }
	// number reads one JSON number (no strings, no null) as a float64
	number := func() (float64, bool) {
		n := jsonNumberLen(data[i:])
		if n == 0 {
			return 0, false
		}
		v, ok := parseJSONNumber(data[i : i+n])
		i += n
		return v, ok
	}
	array := func(add func(float64) bool) bool {
		ws()
		if i >= len(data) || data[i] != '[' {
			return false
		}
		i++
		ws()
		if i < len(data) && data[i] == ']' {
			i++
			return true
		}
		for {
			ws()
			v, ok := number()
			if !ok || !add(v) {
				return false
			}
			ws()
			if i >= len(data) {
				return false
			}
			if data[i] == ']' {
				i++
				return true
			}
			if data[i] != ',' {
				return false
			}
			i++
		}
	}
	// about 20 bytes a float, 6 an id: fewer reallocations while appending
	floats := func(dst *[]float64) bool {
		*dst = make([]float64, 0, len(data)/40)
		return array(func(v float64) bool { *dst = append(*dst, v); return true })
	}
	ints := func(dst *[]int) bool {
		*dst = make([]int, 0, len(data)/80)
		return array(func(v float64) bool {
			n := int(v)
			*dst = append(*dst, n)
			return float64(n) == v
		})
	}
	// plainString reads a string without escapes (base64 and "base64" have none)
	plainString := func() ([]byte, bool) {
		end := bytes.IndexByte(data[i+1:], '"')
		if end < 0 || bytes.IndexByte(data[i+1:i+1+end], '\\') >= 0 {
			return nil, false
		}
		str := data[i+1 : i+1+end]
		i += end + 2
		return str, true
	}
	base64String := func() ([]byte, bool) {
		str, ok := plainString()
		if !ok {
			return nil, false
		}
		raw := make([]byte, base64.StdEncoding.DecodedLen(len(str)))
		n, err := base64.StdEncoding.Decode(raw, str)
		return raw[:n], err == nil && n%4 == 0
	}
	packed, encoded := 0, false // arrays as base64, and "encoding": "base64" seen
	ws()
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	seen := 0
	for {
		ws()
		if i < len(data) && data[i] == '}' && seen == 0 {
			break
		}
		if i >= len(data) || data[i] != '"' {
			return false
		}
		rawKey, ok := plainString() // a key with escapes is none of these
		if !ok {
			return false
		}
		key := string(rawKey)
		ws()
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i++
		ws()
		ok = false
		if i < len(data) && data[i] == '"' && key != "encoding" {
			// an array as base64 of its little-endian float32 / int32 values (patch 0009)
			var raw []byte
			if raw, ok = base64String(); ok {
				switch key {
				case "logprobs":
					out.Logprobs = float32s(raw)
				case "top_ids":
					out.TopIDs = int32s(raw)
				case "top_logprobs":
					out.TopLogprobs = float32s(raw)
				default:
					ok = false
				}
			}
			packed++
		} else {
			switch key {
			case "n_top":
				var v float64
				v, ok = number()
				out.NTop = int(v)
				ok = ok && float64(out.NTop) == v
			case "encoding":
				var enc []byte
				enc, ok = plainString()
				ok = ok && string(enc) == "base64"
				encoded = true
			case "logprobs":
				ok = floats(&out.Logprobs)
			case "top_ids":
				ok = ints(&out.TopIDs)
			case "top_logprobs":
				ok = floats(&out.TopLogprobs)
			}
		}
		if !ok {
			return false
		}
		seen++
		ws()
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return false
		}
		i++
	}
	i++
	ws()
	// base64 arrays only with "encoding": "base64", and then all three
	if i != len(data) || (encoded && packed != 3) || (!encoded && packed > 0) {
		return false
	}
	*f = out
	return true
}

// float32s reads little-endian float32 values as the float64s they are.
func float32s(raw []byte) []float64 {
	out := make([]float64, len(raw)/4)
	for k := range out {
		out[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:])))
	}
	return out
}

// int32s reads little-endian int32 values.
func int32s(raw []byte) []int {
	out := make([]int, len(raw)/4)
	for k := range out {
		out[k] = int(int32(binary.LittleEndian.Uint32(raw[4*k:])))
	}
	return out
}

// jsonNumberLen is the length of the JSON number that b starts with
// (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), 0 if it starts with none.
func jsonNumberLen(b []byte) int {
	i := 0
	digits := func() int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return 0
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0
		}
	}
	return i
}

// parseJSONNumber converts a JSON number (jsonNumberLen's) to the float64
// that strconv.ParseFloat gives: integers of up to 15 digits directly (exact),
// others through ParseFloat, without copying b to a string.
func parseJSONNumber(b []byte) (float64, bool) {
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) <= 15 {
		var n int64
		plain := true
		for _, c := range d {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if plain {
			if neg {
				if n == 0 {
					return math.Copysign(0, -1), true
				}
				return float64(-n), true
			}
			return float64(n), true
		}
	}
	// the string does not outlive the call: ParseFloat's error, which would
	// keep it, is dropped
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
	return v, err == nil
}
