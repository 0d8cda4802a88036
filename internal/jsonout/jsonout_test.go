package jsonout

import (
	"bytes"
	"errors"
	"testing"
)

func TestWriteIndentsAndEndsWithANewline(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, map[string]any{"b": []int{1}, "a": "x"}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": \"x\",\n  \"b\": [\n    1\n  ]\n}\n"
	if got := b.String(); got != want {
		t.Errorf("Write() wrote %q, want %q", got, want)
	}
}

func TestWriteReportsWhatCannotBeEncoded(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, func() {}); err == nil || b.Len() != 0 {
		t.Errorf("Write(func) = %v, wrote %q; want an error and nothing written", err, b.String())
	}
	if err := Write(failing{}, 1); !errors.Is(err, errFull) {
		t.Errorf("Write() to a failing writer = %v, want %v", err, errFull)
	}
}

var errFull = errors.New("disk full")

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errFull }

func TestNonNilListsEncodeAsEmptyArrays(t *testing.T) {
	var b bytes.Buffer
	var none []string
	if err := Write(&b, struct {
		A []string `json:"a"`
		B []int    `json:"b"`
	}{NonNil(none), NonNil([]int{2})}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": [],\n  \"b\": [\n    2\n  ]\n}\n"; b.String() != want {
		t.Errorf("Write(NonNil) wrote %q, want %q", b.String(), want)
	}
}
