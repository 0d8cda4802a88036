package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestValueEnds(t *testing.T) {
	for _, c := range []struct {
		in   string
		at   int
		want int
	}{
		{`"a\"b",`, 0, 6},
		{`{"k":[1,{"x":"}"}]} `, 0, 19},
		{`[1, 2]]`, 0, 6},
		{`12.5e3,`, 0, 6},
		{`true}`, 0, 4},
		{`null `, 0, 4},
		{`x: -3]`, 3, 5},
		{`"open`, 0, -1},
		{`{"a":1`, 0, -1},
		{`[{"a":"]"`, 0, -1},
		{`12`, 0, -1}, // a scalar that ends the data has no delimiter
		{`,`, 0, -1},
		{``, 0, -1},
		{`1,`, 5, -1},
	} {
		if got := Value([]byte(c.in), c.at); got != c.want {
			t.Errorf("Value(%q, %d) = %d, want %d", c.in, c.at, got, c.want)
		}
	}
	if got := Space([]byte(" \t\r\n x"), 0); got != 5 {
		t.Errorf("Space = %d, want 5", got)
	}
	if got := Space([]byte("   "), 1); got != 3 {
		t.Errorf("Space at the end = %d, want 3", got)
	}
}

// FuzzValueAgreesWithTheDecoder: in an array that json.Valid takes, Value steps from element
// to element exactly where json.Decoder's tokens end them.
func FuzzValueAgreesWithTheDecoder(f *testing.F) {
	for _, s := range []string{`[1,"a",{"b":[true,null]},-2.5e-3]`, `[ "\u00e9\\" , [ ] , { } ]`, `["\"]"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		data := []byte(s)
		if !json.Valid(data) {
			return
		}
		i := Space(data, 0)
		if data[i] != '[' {
			return
		}
		var want []json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("json.Valid took %q but Unmarshal did not: %v", s, err)
		}
		var got []json.RawMessage
		i = Space(data, i+1)
		for data[i] != ']' {
			end := Value(data, i)
			if end < 0 {
				t.Fatalf("Value(%q, %d) = -1 in valid JSON", s, i)
			}
			got = append(got, data[i:end])
			if i = Space(data, end); data[i] == ',' {
				i = Space(data, i+1)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d elements, the decoder %d", s, len(got), len(want))
		}
		for k := range got {
			if !bytes.Equal(got[k], bytes.TrimSpace(want[k])) {
				t.Fatalf("%q element %d: %q, the decoder %q", s, k, got[k], want[k])
			}
		}
	})
}
