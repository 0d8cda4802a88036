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
func Decode(source, what string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: empty %s", source, what)
		}
		return fmt.Errorf("%s: %w", source, err)
	}
	return nil
}
