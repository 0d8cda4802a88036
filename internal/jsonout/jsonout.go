package jsonout

import (
	"encoding/json"
	"io"
)

// Write writes v to w as indented JSON followed by a newline.
func Write(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// NonNil is s, or an empty slice for nil: a list that JSON must show as [] rather than null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
