package manifest

import (
	"bytes"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the strict decoder and the validator: they never
// panic, and whatever parses encodes to bytes that parse to the same encoding.
func FuzzParse(f *testing.F) {
	m, _ := sample(f)
	good, _ := m.Encode()
	f.Add(good)
	f.Add([]byte(`{"schemaVersion": 1}`))
	f.Add([]byte(`{"schemaVersion": 1, "files": [{"path": "../x", "kind": "model", "size": -1}]}`))
	f.Add([]byte(`{"schemaVersion": 2, "build": {"plan": {"hash": "x", "b": [1.0, "\u003c"]}}}`))
	f.Add([]byte(`{"server": {"args": ["--model"]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(bytes.NewReader(b))
		if err != nil {
			return
		}
		_ = m.Validate()
		_, _ = m.Launch("/nonexistent/bundle")
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("Encode() of a decoded manifest: %v", err)
		}
		m2, err := Decode(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("Decode(Encode()) = %v", err)
		}
		enc2, _ := m2.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("Encode is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzVerifyTar streams arbitrary bytes as a bundle archive: never a panic, and a sound
// verdict only for input that holds a manifest.
func FuzzVerifyTar(f *testing.F) {
	m, contents := sample(f)
	dir := writeBundle(f, m, contents)
	f.Add(tarOf(f, dir))
	f.Add([]byte{})
	f.Add(make([]byte, 1024))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps := VerifyTar(bytes.NewReader(b))
		if len(ps) == 0 && !bytes.Contains(b, []byte(FileName)) {
			t.Fatalf("VerifyTar() found no problem in an archive without %s", FileName)
		}
	})
}
