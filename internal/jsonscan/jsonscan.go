// Package jsonscan finds where JSON values end without decoding them: the one scanner behind
// the shim's request splitting and llamaserver's reading of llama-server's answers. It uses
// only the standard library, so that the shim's rule on what it imports admits it.
package jsonscan

// Space returns the index of the first byte at or after i that is not JSON white space.
func Space(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// String returns the index after the string that starts at data[i] ('"'), or -1 where it is
// not closed.
func String(data []byte, i int) int {
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

// Value returns the index after the value that starts at data[i], or -1: strings and nesting
// are followed, a number, true, false or null ends at a delimiter (',', '}', ']' or white
// space), so a scalar that ends the data is -1. It does not check the value: in data that
// json.Valid took, it is where json.Decoder would end it.
func Value(data []byte, i int) int {
	if i < 0 || i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return String(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = String(data, i); i < 0 {
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
