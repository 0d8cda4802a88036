// Package strictyaml decodes the project's YAML files (targets, recipes) refusing unknown keys.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// Decode decodes data, read from source, into v; a key v has no field for is an error. An
// empty document is reported as an empty "what" (target file, recipe). Errors name source.
//
// yaml.v3 goes on past an unknown key or a value of the wrong type and decodes the rest, so
// every such problem is reported, one error per line, and Partial says the value can still be
// validated: a loader joins its validation errors to these and the file's problems all show at
// once.
func Decode(source, what string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: empty %s", source, what)
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, len(te.Errors))
		for i, e := range te.Errors {
			errs[i] = fmt.Errorf("%s: %s", source, e)
		}
		return &partialError{errors.Join(errs...)}
	}
	return fmt.Errorf("%s: %w", source, err)
}

// partialError holds the problems of a document that was decoded all the same.
type partialError struct{ err error }

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

// Partial reports whether err, from Decode, left the value decoded apart from the fields it
// names (unknown keys, values of the wrong type), so that validation can still run on it.
func Partial(err error) bool {
	var pe *partialError
	return errors.As(err, &pe)
}
