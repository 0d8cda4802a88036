package shim

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/llamaserver"
)

func TestIncompleteUTF8MirrorsLlamaServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", false},
		{"ascii", "abc", false},
		{"complete three-byte character", "a世", false},
		{"lone three-byte lead", "a\xe4", true},
		{"three-byte lead and one continuation", "\xe4\xb8", true},
		{"lone continuation byte (invalid, but not held back)", "a\x96", false},
		{"two-byte lead", "\xc3", true},
		{"four-byte lead and two continuations", "\xf0\x9f\x98", true},
		{"complete emoji", "😀", false},
		{"lead followed by ascii (invalid, not held back)", "\xe4ab", false},
	} {
		if got := incompleteUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: incompleteUTF8(%q) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestRuneOffsetsCountCharactersAsJSONClientsSee(t *testing.T) {
	text := []byte("a世\x96é")
	ro := newRuneOffsets(text)
	// A client receives "a世\ufffdé": 4 characters; byte offsets inside 世
	// map to its start.
	for b, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 1, 4: 2, 5: 3, 7: 4} {
		if got := ro.at(b); got != want {
			t.Errorf("at(%d) = %d, want %d", b, got, want)
		}
	}
	var decoded string
	enc, _ := json.Marshal(string(text))
	json.Unmarshal(enc, &decoded)
	if n := len([]rune(decoded)); n != ro.at(len(text)) {
		t.Errorf("JSON round trip has %d characters, offsets count %d", n, ro.at(len(text)))
	}
	inc := newRuneOffsets(text[:4])
	inc.extend(text)
	if !slices.Equal(inc.ends, ro.ends) {
		t.Errorf("extended offsets %v, want %v", inc.ends, ro.ends)
	}
}

func TestTopObjectKeepsTheChosenTokensValue(t *testing.T) {
	top := &topObject{}
	top.set("A", -0.5, false) // a byte token spelling "A"
	top.set("B", -1, false)
	top.set("A", -2, true) // the chosen token, also "A"
	top.set("B", -3, false)
	got, _ := json.Marshal(top)
	if want := `{"A":-2.0,"B":-1.0}`; string(got) != want {
		t.Errorf("top = %s, want %s", got, want)
	}
}

// Logprobs are written as floats even when integral (-21.0), a true -inf is
// clamped to -9999.0 as vLLM does, and NaN is an error naming the row, not a
// number (issue 27, item 4).
func TestLogprobsAreHonestFloats(t *testing.T) {
	v := &vocab{pieces: [][]byte{[]byte("a"), []byte("b"), []byte("c")}}
	text := []byte("abc")
	rows := func(lp, alt float64) []rowEntry {
		return []rowEntry{
			{ID: 0, Start: 0},
			{ID: 1, Start: 1, Row: &Row{Logprob: -21, Top: []Alt{{ID: 2, Logprob: alt}}}},
			{ID: 2, Start: 2, Row: &Row{Logprob: lp, Top: []Alt{{ID: 0, Logprob: -0.5}}}},
		}
	}
	l, err := render(v, newRuneOffsets(text), rows(math.Inf(-1), 0), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	fast := string(l.appendJSON(nil))
	viaJSON, _ := json.Marshal(l)
	want := `{"tokens":["a","b","c"],"token_logprobs":[null,-21.0,-9999.0],"top_logprobs":[null,{"c":0.0,"b":-21.0},{"a":-0.5,"c":-9999.0}],"text_offset":[0,1,2]}`
	if fast != want || string(viaJSON) != want {
		t.Errorf("logprobs\n fast %s\n json %s\nwant %s", fast, viaJSON, want)
	}
	for _, tt := range []struct {
		lp, alt float64
		want    string
	}{
		{math.NaN(), -1, "NaN as the logprob of row 2 (token 2)"},
		{-1, math.NaN(), "NaN as an alternative's logprob of row 1 (token 2)"},
	} {
		_, err := render(v, newRuneOffsets(text), rows(tt.lp, tt.alt), 1, false)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, tt.want) {
			t.Errorf("render with a NaN = %v, want a 502 saying %q", err, tt.want)
		}
	}
}

func TestStopCutIsTheEarliestStop(t *testing.T) {
	for _, tc := range []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello world", []string{"world", "lo"}, 3},
		{"hello", []string{"x"}, 5},
		{"hello", nil, 5},
	} {
		if got := stopCut([]byte(tc.text), tc.stops); got != tc.want {
			t.Errorf("stopCut(%q, %q) = %d, want %d", tc.text, tc.stops, got, tc.want)
		}
	}
}

// testVocabOf builds a vocab from pieces; control marks control tokens.
func testVocabOf(pieces []string, control ...int) *vocab {
	v := &vocab{control: make([]bool, len(pieces)), fragments: map[string]int{}, safe: -1}
	for _, p := range pieces {
		v.pieces = append(v.pieces, []byte(p))
	}
	for _, c := range control {
		v.control[c] = true
	}
	v.index()
	return v
}

func TestAlignProbsSkipsTokensLlamaServerHoldsBack(t *testing.T) {
	v := testVocabOf([]string{"<s>", "a", "\xe4", "\xb8", "\x96", "b"}, 0)
	// a, then 世 spelled by three byte tokens, then b: llama-server gives no
	// probabilities for E4 and B8 (the text ends incomplete after each).
	ids := []int{1, 2, 3, 4, 5}
	probs := []llamaserver.TokenProb{{ID: 1}, {ID: 4}, {ID: 5}}
	g := alignProbs(v, ids, probs)
	var got []bool
	for _, p := range g.probs {
		got = append(got, p != nil)
	}
	if want := []bool{true, false, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("probabilities present %v, want %v", got, want)
	}
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(g.starts, want) {
		t.Errorf("starts %v, want %v", g.starts, want)
	}
	if v.safe != 1 {
		t.Errorf("safe token %d, want 1 (a)", v.safe)
	}
	if !v.forceable(1) || v.forceable(2) || v.forceable(4) || !v.forceable(0) {
		t.Errorf("forceable: a %v, E4 %v, 96 %v, <s> %v", v.forceable(1), v.forceable(2), v.forceable(4), v.forceable(0))
	}
}

func TestSplitFragmentsSpellsHeldBackBytes(t *testing.T) {
	v := testVocabOf([]string{"<s>", "a", "\xe4", "\xb8", "\x96"}, 0)
	if got, want := v.splitFragments([]byte("\xe4\xb8")), []int{2, 3}; !slices.Equal(got, want) {
		t.Errorf("splitFragments = %v, want %v", got, want)
	}
}
