package preflight

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
	"github.com/llbuild/llbuild/targets"
)

// loadVariantFiles reads Debian's 14 x86 ggml CPU variants into memory, so the benchmarks
// measure decoding and checking, not the disk.
func loadVariantFiles(b *testing.B) (names []string, data [][]byte, total int64) {
	dir := debfetch.GGMLBackends(b)
	files, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		names = append(names, "backends/"+filepath.Base(f))
		data = append(data, d)
		total += int64(len(d))
	}
	return names, data, total
}

// BenchmarkCheckVariantSet reads every variant (ELF parsing, decoding every executable
// section) and runs every check against the cpu-v3 target: the cost of `llbuild preflight`
// on a whole ggml bundle. SetBytes counts file bytes.
func BenchmarkCheckVariantSet(b *testing.B) {
	names, data, total := loadVariantFiles(b)
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		var bins []*Binary
		for i := range data {
			bin, err := ReadBinary(names[i], bytes.NewReader(data[i]))
			if err != nil {
				b.Fatal(err)
			}
			bins = append(bins, bin)
		}
		r := Check(tg.Host, "cpu-v3", Input{Binaries: bins})
		if r.ExitCode() != 0 {
			b.Fatalf("exit %d", r.ExitCode())
		}
	}
}

// BenchmarkReadFactsOnly is the baseline: the same files read for libraries and kernels
// without decoding their code, so the ratio shows what decoding costs.
func BenchmarkReadFactsOnly(b *testing.B) {
	names, data, total := loadVariantFiles(b)
	b.SetBytes(total)
	for b.Loop() {
		for i := range data {
			if _, err := ReadBinaryFacts(names[i], bytes.NewReader(data[i])); err != nil {
				b.Fatal(err)
			}
		}
	}
}
