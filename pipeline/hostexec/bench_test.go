package hostexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
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

// BenchmarkRebuildAfterPatchChange measures a build after one patch changed, against a
// warm build with no change, and reports ccache's hits and misses per build.
func BenchmarkRebuildAfterPatchChange(b *testing.B) {
	fixture.NeedTools(b, "cmake", "ninja", "g++", "git", "ccache")
	first := fixture.Patches(b, "0001-server-greeting.patch", "0002-ggml-cpu-build-info.patch")
	changed := []patches.Patch{first[0], changedPatch(b)}
	e := env{work: b.TempDir(), cache: b.TempDir(), out: b.TempDir()}
	buildWith(b, e, first)
	buildWith(b, e, changed)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each iteration leaves the changed patch's object in the cache; a fresh cache copy
		// would be needed for a true miss, so take the figures from a cache that has seen
		// only the first series.
		b.StopTimer()
		cache := filepath.Join(b.TempDir(), "ccache")
		if out, err := exec.Command("cp", "-a", e.cache+"/.", cache).CombinedOutput(); err != nil {
			b.Fatalf("copying the cache: %v %s", err, out)
		}
		e2 := env{work: b.TempDir(), cache: cache, out: b.TempDir()}
		buildWith(b, e2, first) // warm for the first series
		zeroCcache(b, cache)
		b.StartTimer()
		buildWith(b, e2, []patches.Patch{first[0], changedAgain(b, i)})
		b.StopTimer()
		st := ccacheStats(b, cache)
		b.ReportMetric(float64(st["direct_cache_hit"]+st["preprocessed_cache_hit"]), "hits/op")
		b.ReportMetric(float64(st["cache_miss"]), "misses/op")
		b.StartTimer()
	}
}

// changedAgain is 0002 with a comment unique to iteration i, so it always misses.
func changedAgain(t testing.TB, i int) patches.Patch {
	p := fixture.Patches(t, "0002-ggml-cpu-build-info.patch")[0]
	p.Data = bytes.Replace(p.Data, []byte(`"patched: 0002\n"`), []byte(`"patched: 0002, run `+strconv.Itoa(i)+strconv.FormatInt(time.Now().UnixNano(), 10)+`\n"`), 1)
	sum := sha256.Sum256(p.Data)
	p.SHA256 = hex.EncodeToString(sum[:])
	return p
}
