package x86

import (
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

func benchCode(b *testing.B) []byte {
	path := filepath.Join(debfetch.GGMLBackends(b), "libggml-cpu-sapphirerapids.so")
	var code []byte
	for _, s := range execSections(b, path) {
		d, err := s.Data()
		if err != nil {
			b.Fatal(err)
		}
		code = append(code, d...)
	}
	return code
}

// BenchmarkScan measures decode-and-classify throughput on the executable code of a real
// AVX-512/AMX library; BenchmarkTouchBytes (a loop summing the same bytes) is the baseline
// to compare it with.
func BenchmarkScan(b *testing.B) {
	code := benchCode(b)
	b.SetBytes(int64(len(code)))
	b.ReportAllocs()
	for b.Loop() {
		var s Stats
		s.Scan(code, 0)
	}
}

func BenchmarkTouchBytes(b *testing.B) {
	code := benchCode(b)
	b.SetBytes(int64(len(code)))
	var sum byte
	for b.Loop() {
		for _, c := range code {
			sum += c
		}
	}
	_ = sum
}
