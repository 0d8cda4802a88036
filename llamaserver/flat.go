package llamaserver

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"unsafe"

	"github.com/llbuild/llbuild/internal/jsonscan"
)

// FlatLogprobs is prompt_logprobs_flat (patch 0008): Logprobs[k] is token k+1 given tokens
// 0..k, and TopIDs and TopLogprobs hold NTop alternatives per position, the
// most probable first.
type FlatLogprobs struct {
	NTop        int       `json:"n_top"`
	Logprobs    []float64 `json:"logprobs"`
	TopIDs      []int     `json:"top_ids"`
	TopLogprobs []float64 `json:"top_logprobs"`
}

// UnmarshalJSON reads the flat form's number arrays without reflection over
// every element (they hold thousands of numbers); anything but the shapes
// patches 0008 and 0009 write goes through encoding/json, which reports what
// is wrong with number arrays (and refuses base64 ones it cannot read).
func (f *FlatLogprobs) UnmarshalJSON(data []byte) error {
	if f.fastUnmarshal(data) {
		return nil
	}
	type plain FlatLogprobs
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*f = FlatLogprobs(p)
	return nil
}

// fastUnmarshal parses {"n_top":K,"logprobs":[..],"top_ids":[..],"top_logprobs":[..]},
// or with "encoding":"base64" the three arrays as base64 strings of their
// little-endian float32 / int32 values (0009), in any key order, with
// whitespace, and says whether data had that shape.
func (f *FlatLogprobs) fastUnmarshal(data []byte) bool {
	var out FlatLogprobs
	i := 0
	ws := func() { i = jsonscan.Space(data, i) }
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

// Decode reads llama-server's /completion answer as json.Unmarshal does, but
// takes the flat prompt logprobs (thousands of numbers) out of the answer
// before encoding/json sees it: encoding/json scans its whole input to check
// it before decoding and scans a value with its own UnmarshalJSON once more to
// find its end, which made three passes over the numbers. The rest of the
// answer goes through encoding/json; anything unexpected, the whole of it.
func (r *Completion) Decode(data []byte) error {
	flat, rest, ok := cutTopLevelMember(data, "prompt_logprobs_flat")
	if !ok || bytes.Equal(flat, []byte("null")) {
		return json.Unmarshal(data, r)
	}
	var f FlatLogprobs
	if !f.fastUnmarshal(flat) {
		return json.Unmarshal(data, r)
	}
	if err := json.Unmarshal(rest, r); err != nil {
		return err
	}
	r.PromptFlat = &f
	return nil
}

// cutTopLevelMember finds the member key (a key without escapes) of the JSON
// object data and returns its value and data without the member; ok is false
// when data is not an object with that key, or not one this scanner follows.
// It checks no more than it must to find the member's bounds: the returned
// value and rest are to be decoded by parsers that check them.
func cutTopLevelMember(data []byte, key string) (value, rest []byte, ok bool) {
	i := jsonscan.Space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, nil, false
	}
	i++
	prevComma := -1 // the comma before the member being read
	for {
		i = jsonscan.Space(data, i)
		if i >= len(data) || data[i] != '"' {
			return nil, nil, false
		}
		keyStart := i
		keyEnd := jsonscan.String(data, i)
		if keyEnd < 0 {
			return nil, nil, false
		}
		i = jsonscan.Space(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, nil, false
		}
		valStart := jsonscan.Space(data, i+1)
		valEnd := jsonscan.Value(data, valStart)
		if valEnd < 0 {
			return nil, nil, false
		}
		i = jsonscan.Space(data, valEnd)
		if i >= len(data) || (data[i] != ',' && data[i] != '}') {
			return nil, nil, false
		}
		if string(data[keyStart+1:keyEnd-1]) == key {
			value = data[valStart:valEnd]
			switch {
			case data[i] == ',': // drop the member and the comma after it
				rest = append(append(make([]byte, 0, len(data)), data[:keyStart]...), data[i+1:]...)
			case prevComma >= 0: // the last member: drop the comma before it
				rest = append(append(make([]byte, 0, len(data)), data[:prevComma]...), data[i:]...)
			default: // the only member
				rest = append(append(make([]byte, 0, len(data)), data[:keyStart]...), data[i:]...)
			}
			return value, rest, true
		}
		if data[i] == '}' {
			return nil, nil, false
		}
		prevComma = i
		i++
	}
}
