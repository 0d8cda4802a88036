package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
	"github.com/llbuild/llbuild/targets"
)

func loadTarget(t *testing.T, name string) targets.Host {
	t.Helper()
	tg, err := targets.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg.Host
}

func readGGML(t *testing.T, variants ...string) []*Binary {
	t.Helper()
	dir := debfetch.GGMLBackends(t)
	var out []*Binary
	for _, v := range variants {
		p := filepath.Join(dir, "libggml-cpu-"+v+".so")
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadBinary("backends/"+filepath.Base(p), f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func verdictFor(r *Report, check, subject string) *Verdict {
	for i := range r.Verdicts {
		if r.Verdicts[i].Check == check && r.Verdicts[i].Subject == subject {
			return &r.Verdicts[i]
		}
	}
	return nil
}

var allX86Variants = []string{"x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex",
	"cannonlake", "cascadelake", "icelake", "cooperlake", "zen4", "alderlake", "sapphirerapids"}

// Debian's prebuilt ggml CPU variants, nobody here wrote them, checked one at a time against
// an AVX2-only host (the cpu-v3 target: SSE42 AVX AVX2 FMA F16C BMI1 BMI2).
func TestDebianVariantsAloneOnAVX2Host(t *testing.T) {
	host := loadTarget(t, "cpu-v3")
	for _, c := range []struct {
		variant  string
		want     Status
		mentions string
	}{
		{"haswell", OK, "AVX2"},
		{"x64", OK, "baseline"},
		{"alderlake", Fail, "AVX_VNNI"},
		{"skylakex", Fail, "AVX512F"},
		{"sapphirerapids", Fail, "AMX_INT8"},
	} {
		t.Run(c.variant, func(t *testing.T) {
			bins := readGGML(t, c.variant)
			r := Check(host, "cpu-v3", Input{Name: "test", Binaries: bins})
			v := verdictFor(r, CheckCPU, bins[0].Path)
			if v == nil {
				t.Fatalf("no cpu verdict for %s in %+v", bins[0].Path, r.Verdicts)
			}
			if v.Status != c.want || !strings.Contains(v.Reason, c.mentions) {
				t.Errorf("cpu verdict = %s %q, want %s mentioning %s", v.Status, v.Reason, c.want, c.mentions)
			}
			if c.want == Fail {
				// The evidence names the file, the address and an instruction needing the extension.
				if len(v.Evidence) == 0 || !strings.HasPrefix(v.Evidence[0], "libggml-cpu-"+c.variant+".so .text+0x") || !strings.Contains(strings.Join(v.Evidence, "\n"), c.mentions) {
					t.Errorf("evidence = %q, want file+address lines naming %s", v.Evidence, c.mentions)
				}
			}
		})
	}
}

func TestDebianVariantSetPicksWhatGGMLWould(t *testing.T) {
	bins := readGGML(t, allX86Variants...)
	for _, c := range []struct {
		target string
		want   string
		score  int
	}{
		{"cpu-v3", "haswell", 64},        // 1+FMA 1+F16C 2+SSE42 4+BMI2 8+AVX 16+AVX2 32
		{"olares-one", "alderlake", 128}, // haswell + AVX_VNNI 64
	} {
		t.Run(c.target, func(t *testing.T) {
			r := Check(loadTarget(t, c.target), c.target, Input{Name: "libggml0", Binaries: bins})
			if len(r.GGML) != 1 {
				t.Fatalf("GGML choices = %+v, want one directory", r.GGML)
			}
			if got := r.GGML[0].Loaded; got != "backends/libggml-cpu-"+c.want+".so" {
				t.Errorf("loaded = %q, want the %s variant", got, c.want)
			}
			for _, s := range r.GGML[0].Scores {
				if s.Variant == c.want && s.Score != c.score {
					t.Errorf("%s score = %d, want %d", c.want, s.Score, c.score)
				}
			}
			if code := r.ExitCode(); code != 0 {
				t.Errorf("ExitCode = %d, want 0 (unloaded variants are not failures); verdicts %+v", code, r.Verdicts)
			}
			sky := verdictFor(r, CheckCPU, "backends/libggml-cpu-skylakex.so")
			if sky == nil || sky.Status != OK || !strings.Contains(sky.Reason, "not loaded") {
				t.Errorf("skylakex verdict = %+v, want ok: not loaded", sky)
			}
		})
	}
	// An AVX-512 machine with everything ggml scores picks sapphirerapids.
	spr := targets.Host{CPU: targets.CPU{Features: targets.KnownFeatures}}
	r := Check(spr, "all features", Input{Binaries: bins})
	if got := r.GGML[0].Loaded; !strings.HasSuffix(got, "sapphirerapids.so") {
		t.Errorf("loaded on an all-features host = %q, want sapphirerapids", got)
	}
}

func TestNoLoadableVariantFails(t *testing.T) {
	bins := readGGML(t, "skylakex", "zen4")
	r := Check(loadTarget(t, "cpu-v3"), "cpu-v3", Input{Binaries: bins})
	v := verdictFor(r, CheckGGMLVariant, "backends")
	if v == nil || v.Status != Fail {
		t.Fatalf("ggml verdict = %+v, want a failure", v)
	}
	if r.ExitCode() != 1 {
		t.Errorf("ExitCode = %d, want 1", r.ExitCode())
	}
}
