package hostexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

// ccacheStats reads ccache's counters for the cache in dir.
func ccacheStats(t testing.TB, dir string) map[string]int {
	t.Helper()
	cmd := exec.Command("ccache", "--print-stats")
	cmd.Env = append(os.Environ(), "CCACHE_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ccache --print-stats: %v", err)
	}
	m := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if n, err := strconv.Atoi(f[1]); err == nil {
				m[f[0]] = n
			}
		}
	}
	return m
}

func zeroCcache(t testing.TB, dir string) {
	t.Helper()
	cmd := exec.Command("ccache", "-z")
	cmd.Env = append(os.Environ(), "CCACHE_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ccache -z: %v\n%s", err, out)
	}
}

// changedPatch is 0002 with another string: it changes ggml-cpu.c only.
func changedPatch(t testing.TB) patches.Patch {
	p := fixture.Patches(t, "0002-ggml-cpu-build-info.patch")[0]
	p.Data = bytes.Replace(p.Data, []byte(`"patched: 0002\n"`), []byte(`"patched: 0002, changed\n"`), 1)
	sum := sha256.Sum256(p.Data)
	p.SHA256 = hex.EncodeToString(sum[:])
	return p
}

func buildWith(t testing.TB, e env, series []patches.Patch) {
	t.Helper()
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, "", rpathOrigin), series)
	ex, err := New(Options{Source: fixture.Source(), WorkDir: e.work, CacheDir: e.cache, Series: series, Builder: pipeline.Builder{Version: "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Build(context.Background(), p, e.out); err != nil {
		t.Fatal(err)
	}
}

// Changing one patch recompiles only the file it touches: every other compile is a ccache
// hit, although the source tree is copied afresh for each build.
func TestChangingOnePatchRecompilesOnlyWhatItTouches(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git", "ccache")
	e := newEnv(t)
	first := fixture.Patches(t, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	buildWith(t, e, first)
	zeroCcache(t, e.cache)
	buildWith(t, e, []patches.Patch{first[0], changedPatch(t)})
	st := ccacheStats(t, e.cache)
	hits := st["direct_cache_hit"] + st["preprocessed_cache_hit"]
	if miss := st["cache_miss"]; miss != 1 || hits != 4 {
		t.Errorf("after changing 0002: %d misses and %d hits, want 1 miss (ggml-cpu.c) and 4 hits (ggml.c, vec.c, llama.cpp, server.cpp)", miss, hits)
	}
}

// BenchmarkFixtureBuild measures a full host build of the fixture (copy, patch, configure,
// build, artifacts) with an empty ccache (cold) and a filled one (warm); warm/cold is the
// figure to report.
func BenchmarkFixtureBuild(b *testing.B) {
	fixture.NeedTools(b, "cmake", "ninja", "g++", "git", "ccache")
	series := fixture.Patches(b, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	var cold, warm time.Duration
	b.Run("cold", func(b *testing.B) {
		cold = 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			e := env{work: b.TempDir(), cache: b.TempDir(), out: b.TempDir()}
			b.StartTimer()
			start := time.Now()
			buildWith(b, e, series)
			cold += time.Since(start)
		}
		cold /= time.Duration(b.N)
	})
	b.Run("warm", func(b *testing.B) {
		e := env{work: b.TempDir(), cache: b.TempDir(), out: b.TempDir()}
		buildWith(b, e, series)
		warm = 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			buildWith(b, e, series)
			warm += time.Since(start)
		}
		warm /= time.Duration(b.N)
		if cold > 0 {
			b.ReportMetric(float64(warm)/float64(cold), "warm/cold")
		}
	})
}

// BenchmarkRebuildAfterPatchChange measures a warm build after one patch changed against a
// warm build with nothing changed (the baseline, same cache), and reports ccache's hits and
// misses for the changed build.
func BenchmarkRebuildAfterPatchChange(b *testing.B) {
	fixture.NeedTools(b, "cmake", "ninja", "g++", "git", "ccache")
	first := fixture.Patches(b, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	e := env{work: b.TempDir(), cache: b.TempDir(), out: b.TempDir()}
	buildWith(b, e, first)
	var unchanged, changed time.Duration
	var hits, misses int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		buildWith(b, e, first)
		unchanged += time.Since(start)

		b.StopTimer()
		zeroCcache(b, e.cache)
		b.StartTimer()
		start = time.Now()
		buildWith(b, e, []patches.Patch{first[0], changedAgain(b, i)})
		changed += time.Since(start)
		b.StopTimer()
		st := ccacheStats(b, e.cache)
		hits += st["direct_cache_hit"] + st["preprocessed_cache_hit"]
		misses += st["cache_miss"]
		b.StartTimer()
	}
	b.ReportMetric(float64(changed)/float64(unchanged), "changed/unchanged")
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
	b.ReportMetric(float64(misses)/float64(b.N), "misses/op")
}

// changedAgain is 0002 with a comment unique to iteration i, so it always misses.
func changedAgain(t testing.TB, i int) patches.Patch {
	p := fixture.Patches(t, "0002-ggml-cpu-build-info.patch")[0]
	p.Data = bytes.Replace(p.Data, []byte(`"patched: 0002\n"`), []byte(`"patched: 0002, run `+strconv.Itoa(i)+strconv.FormatInt(time.Now().UnixNano(), 10)+`\n"`), 1)
	sum := sha256.Sum256(p.Data)
	p.SHA256 = hex.EncodeToString(sum[:])
	return p
}
