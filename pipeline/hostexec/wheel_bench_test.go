package hostexec

import (
	"testing"
	"time"

	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

// BenchmarkFakeWheelBuild measures a host build of the fake llama-cpp-python wheel (copy both
// trees, patch, check bindings, python -m build with scikit-build-core, check the wheel with
// preflight, artifacts) against the baseline of the same executor building fakellama's server
// from the same sources, both with an empty ccache; wheel/server is the figure to report.
func BenchmarkFakeWheelBuild(b *testing.B) {
	py := needWheelTools(b)
	series := fixture.Patches(b, wheelSeries...)
	var server time.Duration
	b.Run("server-baseline", func(b *testing.B) {
		server = 0
		for i := 0; i < b.N; i++ {
			e := env{work: b.TempDir(), cache: b.TempDir(), out: b.TempDir()}
			start := time.Now()
			buildWith(b, e, series)
			server += time.Since(start)
		}
		server /= time.Duration(b.N)
	})
	b.Run("wheel", func(b *testing.B) {
		wp, s := wheelPlan(b, cpuTarget(b, "cpu-v3"), py)
		var wheel time.Duration
		for i := 0; i < b.N; i++ {
			e := env{work: b.TempDir(), cache: b.TempDir(), out: b.TempDir()}
			start := time.Now()
			if _, err := buildWheelIn(b, e, fakeWheel(), wp, s); err != nil {
				b.Fatal(err)
			}
			wheel += time.Since(start)
		}
		wheel /= time.Duration(b.N)
		if server > 0 {
			b.ReportMetric(float64(wheel)/float64(server), "wheel/server")
		}
	})
}
