package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/llbuild/llbuild/gguf"
)

// vocab is the model's vocabulary as llama-server renders it: each
// token's piece as bytes, and which tokens are control tokens that
// generated text leaves out (BOS, EOS).
type vocab struct {
	pieces  [][]byte
	control []bool
	// fragments maps the pieces that are not complete UTF-8 on their own
	// (byte-fallback tokens) to their ids, to recover tokens that a stream
	// from llama-server leaves out.
	fragments map[string]int
	// safe is a token with a complete, visible piece, which the scorer
	// forces when the token it scores is an incomplete UTF-8 fragment.
	safe int
	// spacePrefix says the tokenizer puts a space before the first word
	// (SentencePiece's add_dummy_prefix, llama.cpp's add_space_prefix), so
	// that the pieces of a text's tokens spell it with one more space in
	// front.
	spacePrefix bool
	// names holds tokenString of every id, made on first use (an echoed
	// 512-token prompt asks for 1,500 of them): id i's is
	// names[nameEnds[i-1]:nameEnds[i]], one string and no pointer per token
	// for the garbage collector to follow.
	names     string
	nameEnds  []uint32
	namesOnce sync.Once
}

// tokenTypeControl is llama.cpp's LLAMA_TOKEN_TYPE_CONTROL.
const tokenTypeControl = 3

// loadVocab asks llama-server for the piece of every token id and reads
// the token types from the model file when it can be opened.
func loadVocab(ctx context.Context, u *upstream, dir string) (*vocab, error) {
	n := u.info.NVocab
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	pieces, err := u.ls.TokenPieces(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the vocabulary: %w", upstreamFailure(ctx, err))
	}
	if len(pieces) != n {
		return nil, fmt.Errorf("reading the vocabulary: llama-server gave %d pieces for %d ids", len(pieces), n)
	}
	v := &vocab{pieces: make([][]byte, n), control: make([]bool, n), fragments: map[string]int{}, safe: -1}
	for i, t := range pieces {
		if t.ID != i {
			return nil, fmt.Errorf("reading the vocabulary: piece %d is for token %d", i, t.ID)
		}
		p, err := decodePiece(t.Piece)
		if err != nil {
			return nil, fmt.Errorf("reading the vocabulary: token %d: %w", i, err)
		}
		v.pieces[i] = p
	}
	if types := modelTokenTypes(u.info.ModelPath, dir, n); types != nil {
		for i, t := range types {
			v.control[i] = t == tokenTypeControl
		}
	}
	// Without token types, BOS and EOS are the control tokens that matter:
	// they open string prompts and close generations.
	for i, p := range v.pieces {
		if s := string(p); s != "" && (s == u.info.BOS || s == u.info.EOS) {
			v.control[i] = true
		}
	}
	v.index()
	// The tokenizer's own answer rather than the model's metadata: the
	// option's default differs between tokenizer types and llama.cpp
	// versions.
	probe, err := u.tokenize(ctx, "a", false)
	if err != nil {
		return nil, fmt.Errorf("reading the vocabulary: %w", err)
	}
	var spelled []byte
	for _, id := range probe {
		spelled = append(spelled, v.text(id)...)
	}
	v.spacePrefix = string(spelled) == " a"
	return v, nil
}

func (v *vocab) index() {
	for i, p := range v.pieces {
		if v.control[i] {
			continue
		}
		if incompleteUTF8(p) || !utf8.Valid(p) {
			if _, ok := v.fragments[string(p)]; !ok {
				v.fragments[string(p)] = i
			}
			continue
		}
		if v.safe < 0 && len(p) == 1 && (p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z') {
			v.safe = i
		}
	}
	if v.safe < 0 {
		for i, p := range v.pieces {
			if !v.control[i] && len(p) > 0 && utf8.Valid(p) {
				v.safe = i
				break
			}
		}
	}
}

// modelTokenTypes reads tokenizer.ggml.token_type from the model file, or
// returns nil when the file cannot be read or does not match.
func modelTokenTypes(path, dir string, n int) []int64 {
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil
	}
	val, ok := f.Get("tokenizer.ggml.token_type")
	if !ok || val.Len() != n {
		return nil
	}
	out := make([]int64, n)
	switch a := val.Interface().(type) {
	case []int32:
		for i, x := range a {
			out[i] = int64(x)
		}
	case []uint32:
		for i, x := range a {
			out[i] = int64(x)
		}
	default:
		return nil
	}
	return out
}

// decodePiece reads a piece as /tokenize with_pieces gives it: a string,
// or an array of byte values when it is not valid UTF-8.
func decodePiece(raw json.RawMessage) ([]byte, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []byte(s), nil
	}
	var bs []int
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("piece %s is neither a string nor bytes", raw)
	}
	out := make([]byte, len(bs))
	for i, b := range bs {
		if b < 0 || b > 255 {
			return nil, fmt.Errorf("piece byte %d out of range", b)
		}
		out[i] = byte(b)
	}
	return out, nil
}

func (v *vocab) size() int { return len(v.pieces) }

func (v *vocab) valid(id int) bool { return id >= 0 && id < len(v.pieces) }

// text is what the token adds to generated or echoed text.
func (v *vocab) text(id int) []byte {
	if !v.valid(id) || v.control[id] {
		return nil
	}
	return v.pieces[id]
}

// tokenString is the token as the legacy logprobs object names it: its
// piece, or for a piece that is not valid UTF-8 OpenAI's "bytes:\xNN"
// spelling, so that distinct byte tokens keep distinct names.
func (v *vocab) tokenString(id int) string {
	if !v.valid(id) {
		return ""
	}
	v.namesOnce.Do(func() {
		var b strings.Builder
		v.nameEnds = make([]uint32, len(v.pieces))
		for i := range v.pieces {
			b.WriteString(v.name(i))
			v.nameEnds[i] = uint32(b.Len())
		}
		v.names = b.String()
	})
	start := uint32(0)
	if id > 0 {
		start = v.nameEnds[id-1]
	}
	return v.names[start:v.nameEnds[id]]
}

// name is the token's piece as a string, or its bytes escaped when they are
// not valid UTF-8.
func (v *vocab) name(id int) string {
	p := v.pieces[id]
	if utf8.Valid(p) {
		return string(p)
	}
	var b strings.Builder
	b.WriteString("bytes:")
	for _, c := range p {
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	return b.String()
}

// forceable reports whether the scorer can force id and read its
// probabilities from the token llama-server generates: only when its text
// is valid UTF-8 on its own. llama-server holds back a token that ends in
// an incomplete UTF-8 sequence and returns no probabilities for it; newer
// builds also fail the whole request (HTTP 500, "does not match the
// expected Content-only format") when the generated text is not valid
// UTF-8, such as a lone continuation byte (fixed in llbuild's builds by
// patches/0003-common-chat-raw-content.patch; other builds still fail).
func (v *vocab) forceable(id int) bool {
	t := v.text(id)
	return utf8.Valid(t) && !incompleteUTF8(t)
}

// incompleteUTF8 mirrors llama-server's validate_utf8: text ends with the
// start of a multi-byte sequence that lacks its continuation bytes.
func incompleteUTF8(b []byte) bool {
	n := len(b)
	for i := 1; i <= 4 && i <= n; i++ {
		c := b[n-i]
		switch {
		case c&0xE0 == 0xC0:
			if i < 2 {
				return true
			}
		case c&0xF0 == 0xE0:
			if i < 3 {
				return true
			}
		case c&0xF8 == 0xF0:
			if i < 4 {
				return true
			}
		}
	}
	return false
}

// splitFragments spells bytes with the vocabulary's fragment tokens,
// longest first; bytes it cannot spell are dropped.
func (v *vocab) splitFragments(b []byte) []int {
	var ids []int
	for len(b) > 0 {
		matched := false
		for l := min(len(b), 8); l >= 1; l-- {
			if id, ok := v.fragments[string(b[:l])]; ok {
				ids = append(ids, id)
				b = b[l:]
				matched = true
				break
			}
		}
		if !matched {
			b = b[1:]
		}
	}
	return ids
}

func rawBytes(b []int) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = byte(c)
	}
	return out
}
