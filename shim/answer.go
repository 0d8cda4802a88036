package shim

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The completion answer is written by hand rather than through encoding/json's
// reflection: an echoed 512-token prompt has 2,000 values in its logprobs and
// a top object per row, and reflection, MarshalJSON per row and the check of
// what each returns took longer than decoding llama-server's answer. The bytes
// are those encoding/json writes for the same values
// (TestAnswerWriterMatchesEncodingJSON).

func (r *completionResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, r.ID)
	b = append(b, `,"object":`...)
	b = appendJSONString(b, r.Object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, r.Created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, r.Model)
	if r.SystemFingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = appendJSONString(b, r.SystemFingerprint)
	}
	b = append(b, `,"choices":`...)
	b = appendArray(b, r.Choices, func(b []byte, c completionChoice) []byte { return c.appendJSON(b) })
	b = append(b, `,"usage":`...)
	if r.Usage == nil {
		b = append(b, "null"...)
	} else {
		b = r.Usage.appendJSON(b)
	}
	return append(b, '}')
}

// sizeHint is about the length of the answer's JSON, so that writing it
// does not grow the buffer a dozen times: an echoed 512-token prompt's
// answer is about 30 KB.
func (r *completionResponse) sizeHint() int {
	n := 1024
	for _, c := range r.Choices {
		n += 2 * len(c.Text)
		if l := c.Logprobs; l != nil {
			for _, t := range l.Tokens {
				n += len(t) + 32 // the token, its logprob and offset
			}
			for _, t := range l.TopLogprobs {
				if t != nil {
					for _, k := range t.keys {
						n += len(k) + 28
					}
				}
			}
		}
	}
	return n
}

func (c *completionChoice) appendJSON(b []byte) []byte {
	b = append(b, `{"text":`...)
	b = appendJSONString(b, c.Text)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(c.Index), 10)
	b = append(b, `,"logprobs":`...)
	if c.Logprobs == nil {
		b = append(b, "null"...)
	} else {
		b = c.Logprobs.appendJSON(b)
	}
	b = append(b, `,"finish_reason":`...)
	if c.FinishReason == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *c.FinishReason)
	}
	return append(b, '}')
}

func (u *usage) appendJSON(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = append(b, `,"prompt_tokens_details":`...)
	if u.PromptTokensDetails == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CachedTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// MarshalJSON writes l as appendJSON does, for the streamed chunks that
// encoding/json writes: every logprob as a float there too.
func (l *legacyLogprobs) MarshalJSON() ([]byte, error) { return l.appendJSON(nil), nil }

func (l *legacyLogprobs) appendJSON(b []byte) []byte {
	b = append(b, `{"tokens":`...)
	b = appendArray(b, l.Tokens, appendJSONString)
	b = append(b, `,"token_logprobs":`...)
	// where each row's logprob was written: its top object holds the same
	// value, which is written the same way unless it is tiny or huge
	// (sameAsG), and copied from there instead of formatted again
	written := make([][2]int32, len(l.TokenLogprobs))
	b = appendArrayIndexed(b, l.TokenLogprobs, func(b []byte, i int, v *float64) []byte {
		if v == nil {
			return append(b, "null"...)
		}
		start := len(b)
		b = appendJSONFloat(b, *v)
		if sameAsG(*v) {
			written[i] = [2]int32{int32(start), int32(len(b))}
		}
		return b
	})
	b = append(b, `,"top_logprobs":`...)
	b = appendArrayIndexed(b, l.TopLogprobs, func(b []byte, i int, t *topObject) []byte {
		if t == nil {
			return append(b, "null"...)
		}
		same := math.NaN()
		var w [2]int32
		if i < len(written) && written[i][1] > 0 {
			same, w = *l.TokenLogprobs[i], written[i]
		}
		return t.appendJSONReusing(b, same, w)
	})
	b = append(b, `,"text_offset":`...)
	b = appendArray(b, l.TextOffset, func(b []byte, o int) []byte { return strconv.AppendInt(b, int64(o), 10) })
	return append(b, '}')
}

// sameAsG says whether appendJSONFloat writes f as strconv's shortest 'g'
// format does (the top objects' format, topObject.MarshalJSON): for
// magnitudes from 1e-4 up to 1e6 both write plain decimals, and zero.
func sameAsG(f float64) bool {
	a := math.Abs(f)
	return a == 0 || (a >= 1e-4 && a < 1e6)
}

// appendArray appends xs as a JSON array, each element written by elem, or null
// for a nil slice, as encoding/json does.
func appendArray[T any](b []byte, xs []T, elem func([]byte, T) []byte) []byte {
	return appendArrayIndexed(b, xs, func(b []byte, _ int, x T) []byte { return elem(b, x) })
}

// appendArrayIndexed is appendArray with each element's index.
func appendArrayIndexed[T any](b []byte, xs []T, elem func([]byte, int, T) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i, x)
	}
	return append(b, ']')
}

// appendJSONReusing writes t, copying the bytes b[w[0]:w[1]] for a value
// equal to same instead of formatting it again (same NaN: none).
func (t *topObject) appendJSONReusing(b []byte, same float64, w [2]int32) []byte {
	b = append(b, '{')
	for i, k := range t.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		if v := t.vals[i]; v == same && math.Signbit(v) == math.Signbit(same) {
			b = append(b, b[w[0]:w[1]]...)
		} else {
			b = appendFloatG(b, v)
		}
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes a string (its
// appendString with HTML escaping, as json.Marshal does): \" \\ \b \f \n \r \t,
// other control characters and < > & as \u00XX, invalid UTF-8 as \ufffd and
// U+2028 and U+2029 escaped. Written here rather than through json.Marshal,
// which a piece that is not plain ASCII (byte tokens, most non-English
// pieces) took with reflection and an allocation per string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// jsonSafe says which ASCII bytes encoding/json copies into a string as they
// are: printable ones and DEL, but not " \\ < > &.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// asFloat makes the number written at b[start:] read as a float: an integral
// value gets ".0" (-21.0, not -21), so that clients in typed languages decode
// every logprob as a floating-point number, as OpenAI and vLLM write them.
func asFloat(b []byte, start int) []byte {
	for _, c := range b[start:] {
		if c == '.' || c == 'e' || c == 'E' {
			return b
		}
	}
	return append(b, '.', '0')
}

// floatBits is the precision a number is written in: 32 for a value that is
// a float32, as every logprob llama-server computes is, so that it is written
// in the shortest form that reads back as that float32 (-2.3025851, not the
// float64 digits of the same value, -2.3025851249694824: no digits the scorer
// never had, an echo answer a quarter shorter and quicker to write); 64 for any
// other value (one the shim computes in float64).
func floatBits(f float64) int {
	if float64(float32(f)) == f {
		return 32
	}
	return 64
}

// appendFloatG appends f in strconv's shortest 'g' form at its precision
// (floatBits), as a float.
func appendFloatG(b []byte, f float64) []byte {
	start := len(b)
	return asFloat(strconv.AppendFloat(b, f, 'g', -1, floatBits(f)), start)
}

// appendJSONFloat appends f as encoding/json writes it at its precision
// (floatBits: a float32's value as a float32, any other as a float64; 'f', or
// 'e' below 1e-6 and from 1e21, compared at that precision as encoding/json
// does, so that float32(1e-6) is 0.000001), always as a float (asFloat); f is
// finite: logprobs are clamped, NaN refused.
func appendJSONFloat(b []byte, f float64) []byte { return appendJSONFloatBits(b, f, floatBits(f)) }

// appendJSONFloatBits is appendJSONFloat at the precision bits (32 or 64; f a
// float32's value for 32).
func appendJSONFloatBits(b []byte, f float64, bits int) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 {
		if bits == 64 && (a < 1e-6 || a >= 1e21) || bits == 32 && (float32(a) < 1e-6 || float32(a) >= 1e21) {
			format = 'e'
		}
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, bits)
	b = asFloat(b, start)
	if format == 'e' {
		// e-09 as e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
