package shim

import (
	"bytes"
	"encoding/json"
)

// decode reads llama-server's /completion answer as json.Unmarshal does, but
// takes the flat prompt logprobs (thousands of numbers) out of the answer
// before encoding/json sees it: encoding/json scans its whole input to check
// it before decoding and scans a value with its own UnmarshalJSON once more to
// find its end, which made three passes over the numbers. The rest of the
// answer goes through encoding/json; anything unexpected, the whole of it.
func (r *nativeResponse) decode(data []byte) error {
	flat, rest, ok := cutTopLevelMember(data, "prompt_logprobs_flat")
	if !ok || bytes.Equal(flat, []byte("null")) {
		return json.Unmarshal(data, r)
	}
	var f flatLogprobs
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
	i := skipJSONSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, nil, false
	}
	i++
	prevComma := -1 // the comma before the member being read
	for {
		i = skipJSONSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return nil, nil, false
		}
		keyStart := i
		keyEnd := skipJSONString(data, i)
		if keyEnd < 0 {
			return nil, nil, false
		}
		i = skipJSONSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, nil, false
		}
		valStart := skipJSONSpace(data, i+1)
		valEnd := skipJSONValue(data, valStart)
		if valEnd < 0 {
			return nil, nil, false
		}
		i = skipJSONSpace(data, valEnd)
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

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipJSONString returns the index after the string that starts at data[i]
// ('"'), or -1.
func skipJSONString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipJSONValue returns the index after the value that starts at data[i], or
// -1: strings and nesting are followed, scalars end at a delimiter.
func skipJSONValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipJSONString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = skipJSONString(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	start := i
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if i == start {
				return -1
			}
			return i
		}
		i++
	}
	return -1
}
