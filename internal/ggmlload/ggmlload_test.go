package ggmlload

import "testing"

func TestBackendFileTakesWhatGGMLDlopens(t *testing.T) {
	for _, tc := range []struct {
		name, backend, variant string
		ok                     bool
	}{
		{"libggml-cpu-haswell.so", "cpu", "haswell", true},
		{"libggml-cpu.so", "cpu", "", true},
		{"libggml-cuda.so", "cuda", "", true},
		{"libggml-cpu-haswell.so.0", "", "", false},
		{"libggml-base.so", "", "", false},
		{"libggml.so", "", "", false},
	} {
		b, ok := BackendFile(tc.name)
		if b != tc.backend || ok != tc.ok || Variant(tc.name) != tc.variant {
			t.Errorf("BackendFile(%q) = %q, %v, Variant %q; want %q, %v, %q", tc.name, b, ok, Variant(tc.name), tc.backend, tc.ok, tc.variant)
		}
	}
}

// GCC splits Debian's 40-byte GGML_BACKEND_DIR into two 16-byte loads from .rodata and an
// 8-byte immediate: the library holds "/usr/lib/x86_64-linux-gnu/ggml/b" and, elsewhere,
// "ackends0".
func TestCompiledDirFindsASplitLiteral(t *testing.T) {
	lib := []byte("\x00\x48\xb9ackends0\x48\x8d\x00junk\x00/usr/lib/x86_64-linux-gnu/ggml/b\x00\x00")
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"debian", []string{"/app", "/usr/lib/x86_64-linux-gnu/ggml/backends0"}, "/usr/lib/x86_64-linux-gnu/ggml/backends0"},
		{"another suffix", []string{"/usr/lib/x86_64-linux-gnu/ggml/backends1"}, ""},
		{"a short first piece", []string{"/usr/lib/x86_64-linux-gnu/ggml"}, "/usr/lib/x86_64-linux-gnu/ggml"},
		{"not there", []string{"/opt/ggml/lib"}, ""},
	} {
		if got := CompiledDir(lib, tc.candidates); got != tc.want {
			t.Errorf("%s: CompiledDir() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
