package shim

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/llbuild/llbuild/llamaserver"
)

// minLogprob is where the shim clamps logprobs, as vLLM and OpenAI do:
// llama-server reports the lowest float32 (about -3.4e38) when a
// probability underflows to zero, and -inf for a token masked out.
const minLogprob = -9999.0

// clampLogprob clamps x at minLogprob. NaN is not a logprob: the caller
// refuses it (nanError) instead of hiding a broken scorer behind -9999.
func clampLogprob(x float64) float64 {
	if x < minLogprob {
		return minLogprob
	}
	return x
}

// nanError says where llama-server gave a NaN logprob.
func nanError(row, id int, alt bool) error {
	what := "the logprob"
	if alt {
		what = "an alternative's logprob"
	}
	return upstreamError("llama-server returned NaN as %s of row %d (token %d): the model or the build computes NaN there, and the shim does not pass it off as a number", what, row, id)
}

// legacyLogprobs is the logprobs object of a legacy completion choice:
// four parallel arrays, one entry per row.
type legacyLogprobs struct {
	Tokens        []string     `json:"tokens"`
	TokenLogprobs []*float64   `json:"token_logprobs"`
	TopLogprobs   []*topObject `json:"top_logprobs"`
	TextOffset    []int        `json:"text_offset"`
}

// topObject is one row's {piece: logprob} object, written in the order the
// alternatives come (most likely first); it always holds the chosen token,
// with the same value as token_logprobs.
type topObject struct {
	keys []string
	vals []float64
}

func (t *topObject) set(key string, v float64, override bool) {
	for i, k := range t.keys {
		if k == key {
			// Two tokens can share a piece (a byte token and the character
			// it spells); the chosen one must keep its own value.
			if override || v > t.vals[i] {
				t.vals[i] = v
			}
			return
		}
	}
	t.keys = append(t.keys, key)
	t.vals = append(t.vals, v)
}

func (t *topObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range t.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(appendFloatG(nil, t.vals[i]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// rowEntry is one row before rendering: a token, its byte offset in the
// choice's text, and its logprobs unless it is the first echoed token.
type rowEntry struct {
	ID    int
	Start int // byte offset in the choice's text
	Row   *Row
}

// render builds the legacy object for rows over the text whose characters
// ro counts, keeping top alternatives (top may be 0: only the chosen
// token).
func render(v *vocab, ro *runeOffsets, rows []rowEntry, top int, asIDs bool) (*legacyLogprobs, error) {
	name := v.tokenString
	if asIDs {
		name = func(id int) string { return "token_id:" + strconv.Itoa(id) }
	}
	out := &legacyLogprobs{
		Tokens:        make([]string, len(rows)),
		TokenLogprobs: make([]*float64, len(rows)),
		TopLogprobs:   make([]*topObject, len(rows)),
		TextOffset:    make([]int, len(rows)),
	}
	// one allocation each for all rows' values, objects and their entries
	// (up to top alternatives and the chosen token per row)
	lps := make([]float64, len(rows))
	tops := make([]topObject, len(rows))
	per := max(top, 0) + 1
	keys, vals := make([]string, len(rows)*per), make([]float64, len(rows)*per)
	for i, r := range rows {
		out.Tokens[i] = name(r.ID)
		out.TextOffset[i] = ro.at(r.Start)
		if r.Row == nil {
			continue
		}
		if math.IsNaN(r.Row.Logprob) {
			return nil, nanError(i, r.ID, false)
		}
		lps[i] = clampLogprob(r.Row.Logprob)
		out.TokenLogprobs[i] = &lps[i]
		t := &tops[i]
		t.keys, t.vals = keys[i*per:i*per:(i+1)*per], vals[i*per:i*per:(i+1)*per]
		for j, a := range r.Row.Top {
			if j >= top {
				break
			}
			if math.IsNaN(a.Logprob) {
				return nil, nanError(i, a.ID, true)
			}
			t.set(name(a.ID), clampLogprob(a.Logprob), false)
		}
		t.set(out.Tokens[i], lps[i], true)
		out.TopLogprobs[i] = t
	}
	return out, nil
}

// probRow is the row of a generated token's probabilities, its top alternatives cut at top.
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

// runeOffsets maps byte offsets in text to offsets in characters, as a
// client counts them in the JSON string it receives: every valid UTF-8
// sequence is one character and every invalid byte one U+FFFD. A byte
// offset inside a character maps to that character's start.
type runeOffsets struct {
	// ascii is the length of the text's leading run of ASCII bytes, one
	// character each (often the whole text); ends holds the byte offset where
	// each character after it ends.
	ascii int
	ends  []int
}

func newRuneOffsets(text []byte) *runeOffsets {
	r := &runeOffsets{}
	r.extend(text)
	return r
}

// extend adds the characters of text past the ones already counted; text
// must begin with the text counted so far, and that text must end on a
// character boundary (llama-server never sends half a character).
func (r *runeOffsets) extend(text []byte) {
	i := r.ascii
	if n := len(r.ends); n > 0 {
		i = r.ends[n-1]
	} else {
		for i < len(text) && text[i] < utf8.RuneSelf {
			i++
		}
		r.ascii = i
	}
	for i < len(text) {
		_, w := utf8.DecodeRune(text[i:])
		i += w
		r.ends = append(r.ends, i)
	}
}

// at is the number of characters that end at or before byte offset b.
func (r *runeOffsets) at(b int) int {
	if b <= r.ascii {
		return max(b, 0)
	}
	lo, hi := 0, len(r.ends)
	for lo < hi {
		m := (lo + hi) / 2
		if r.ends[m] <= b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return r.ascii + lo
}
