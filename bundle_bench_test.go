package main

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/targets"
)

// largeModelBytes is the size of the benchmark's model; LLBUILD_BENCH_MB overrides it.
func largeModelBytes() int64 {
	if s := os.Getenv("LLBUILD_BENCH_MB"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			return n << 20
		}
	}
	return 2 << 30
}

// writeLargeModel writes a GGUF model of about size bytes of random tensor data (random, so
// that neither the filesystem nor the page cache can shortcut reading it).
func writeLargeModel(b *testing.B, dir string, size int64) string {
	b.Helper()
	const rowBytes = 4 << 10 // 1024 F32 values
	rows := uint64(size / rowBytes)
	data := make([]byte, rows*rowBytes)
	rand.NewChaCha8([32]byte{'l', 'l', 'b'}).Read(data)
	gb := &gguf.Builder{}
	gb.Set("general.architecture", gguf.String("llama"))
	gb.Set("general.name", gguf.String("llbuild-bench"))
	gb.Add(gguf.Tensor{Name: "token_embd.weight", Type: gguf.TensorF32, Dims: []uint64{1024, rows}, Data: data})
	p := filepath.Join(dir, "large.gguf")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gb.WriteTo(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkBundleLarge bundles and verifies a multi-GB model and compares the throughput with
// `openssl dgst -sha256` (SHA extensions, one core) on the same file in the same run, and,
// for what writes a copy, with a plain copy followed by fsync. Each sub-benchmark reports
// MB/s, x-openssl (its throughput as a fraction of openssl's) and x-copy. The source is in
// the page cache for all of them; written copies are synced to disk.
//
//	go test -run '^$' -bench BundleLarge -benchtime 3x .
func BenchmarkBundleLarge(b *testing.B) {
	if _, err := exec.LookPath("openssl"); err != nil {
		b.Skip("openssl is the baseline and is not installed")
	}
	dir := b.TempDir()
	size := largeModelBytes()
	model := writeLargeModel(b, dir, size)
	fi, _ := os.Stat(model)
	size = fi.Size()
	in := newBundleInputs(b)
	t, err := targets.Load("cpu-v3")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := manifest.PlanBundle(manifest.BundleInput{Target: t, Artifacts: in.Artifacts, Model: model})
	if err != nil {
		b.Fatal(err)
	}
	var opensslMBs, cpMBs float64
	// timed runs f b.N times and reports MB/s, and its ratio to openssl's and, for a
	// contender that writes a copy, to a plain copy's (whose pace the disk sets).
	out := filepath.Join(dir, "bundle")
	copyDst := filepath.Join(dir, "copy")
	timed := func(b *testing.B, writes bool, f func(b *testing.B)) float64 {
		b.SetBytes(size)
		var elapsed time.Duration
		for i := 0; i < b.N; i++ {
			// Outputs of the previous round go, untimed, and earlier writes still being
			// flushed would slow whatever runs next.
			os.RemoveAll(out)
			os.Remove(copyDst)
			unix.Sync()
			start := time.Now()
			f(b)
			elapsed += time.Since(start)
		}
		mbs := float64(size) * float64(b.N) / elapsed.Seconds() / 1e6
		b.ReportMetric(mbs, "MB/s")
		if opensslMBs > 0 {
			b.ReportMetric(mbs/opensslMBs, "x-openssl")
		}
		if writes && cpMBs > 0 {
			b.ReportMetric(mbs/cpMBs, "x-copy")
		}
		return mbs
	}
	// Warm the page cache so that the first contender pays no disk reads.
	if _, _, err := hashFile(model); err != nil {
		b.Fatal(err)
	}
	b.Run("openssl-dgst-sha256", func(b *testing.B) {
		opensslMBs = 0
		opensslMBs = timed(b, false, func(b *testing.B) {
			if out, err := exec.Command("openssl", "dgst", "-sha256", model).CombinedOutput(); err != nil {
				b.Fatalf("openssl: %v %s", err, out)
			}
		})
	})
	b.Run("go-sha256", func(b *testing.B) {
		timed(b, false, func(b *testing.B) {
			if _, _, err := hashFile(model); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The copy baseline: what writing the bytes and syncing them costs on this disk,
	// without hashing (cp followed by sync).
	b.Run("copy-fsync", func(b *testing.B) {
		cpMBs = 0
		cpMBs = timed(b, false, func(b *testing.B) {
			src, _ := os.Open(model)
			out, err := os.Create(copyDst)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(out, struct{ io.Reader }{src}, make([]byte, 1<<20)); err != nil {
				b.Fatal(err)
			}
			if err := out.Sync(); err != nil {
				b.Fatal(err)
			}
			out.Close()
			src.Close()
		})
	})
	// The library's single pass without the rest of bundling.
	b.Run("CopyAndHashFile-fsync", func(b *testing.B) {
		timed(b, true, func(b *testing.B) {
			src, _ := os.Open(model)
			out, err := os.Create(copyDst)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := manifest.CopyAndHashFile(context.Background(), out, src, nil); err != nil {
				b.Fatal(err)
			}
			if err := out.Sync(); err != nil {
				b.Fatal(err)
			}
			out.Close()
			src.Close()
		})
	})
	bundleOnce := func(b *testing.B, link bool) {
		if _, err := manifest.WriteBundle(context.Background(), plan, manifest.BundleOutput{Dir: out, Link: link}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("bundle-copy", func(b *testing.B) {
		timed(b, true, func(b *testing.B) { bundleOnce(b, false) })
	})
	b.Run("bundle-link", func(b *testing.B) {
		timed(b, false, func(b *testing.B) { bundleOnce(b, true) })
	})
	b.Run("verify", func(b *testing.B) {
		os.RemoveAll(out)
		bundleOnce(b, false)
		b.ResetTimer()
		b.SetBytes(size)
		var elapsed time.Duration
		for i := 0; i < b.N; i++ {
			unix.Sync()
			start := time.Now()
			if ps := manifest.Verify(out); len(ps) != 0 {
				b.Fatal(ps)
			}
			elapsed += time.Since(start)
		}
		mbs := float64(size) * float64(b.N) / elapsed.Seconds() / 1e6
		b.ReportMetric(mbs, "MB/s")
		b.ReportMetric(mbs/opensslMBs, "x-openssl")
	})
	os.RemoveAll(out)
}

func hashFile(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	return manifest.CopyAndHashFile(context.Background(), nil, f, nil)
}
