package patches_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
)

// TestOutputLogprobsAPI compiles tests/output-logprobs.c against a llama.cpp build of the
// series and runs it on the tiny model: patch 0005's libllama API (targets, the log
// probabilities computed in the graph against the host's log softmax of the same logits,
// the logits kept for outputs without a target, and the refusals). It needs the build
// (LLBUILD_PATCHED_LLAMA_SERVER: its directory holds libllama) and the patched source tree
// for the headers (LLBUILD_PATCHED_LLAMA_SOURCE, e.g. the src directory of the pipeline's
// work directory); scripts/test.sh builds both from ../shared/llama.cpp.
func TestOutputLogprobsAPI(t *testing.T) {
	bin, lib := buildAgainstSeries(t, "output-logprobs.c")
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	// a build with patch 0014 leaves the log probability nodes out of a decode without targets,
	// one without it computes them: the program checks the one the build's patches say
	kind := "full"
	if lean, err := hasPatch(filepath.Join(lib, "patches"), "-llama-output-logprobs-only-with-targets.patch"); err != nil {
		t.Fatal(err)
	} else if lean {
		kind = "lean"
	}
	t.Logf("the build's patches say %s (0014 %s)", kind, map[string]string{"lean": "applied", "full": "not applied"}[kind])
	out, err := exec.Command(bin, model, kind).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("output-logprobs: %v", err)
	}
}

// hasPatch says whether the patches folder a build keeps beside llama-server (the series it
// applied) holds a patch whose name ends in suffix.
func hasPatch(dir, suffix string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("the build's patches folder (which patches it applied): %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			return true, nil
		}
	}
	return false, nil
}

// buildAgainstSeries compiles tests/NAME against the llama.cpp build of the series
// (LLBUILD_PATCHED_LLAMA_SERVER's directory holds libllama) and the patched source tree's headers
// (LLBUILD_PATCHED_LLAMA_SOURCE); it gives the program and the library directory.
func buildAgainstSeries(tb testing.TB, name string) (bin, lib string) {
	tb.Helper()
	server, src := os.Getenv("LLBUILD_PATCHED_LLAMA_SERVER"), os.Getenv("LLBUILD_PATCHED_LLAMA_SOURCE")
	if server == "" || src == "" {
		enginetest.SkipUnlessCI(tb, "LLBUILD_PATCHED_LLAMA_SERVER and LLBUILD_PATCHED_LLAMA_SOURCE are not both set: this needs a llama.cpp build of the series and its source tree (scripts/test.sh builds them when ../shared/llama.cpp is beside the repository)")
	}
	return buildAgainst(tb, name, server, src)
}

// buildAgainst compiles tests/NAME with the headers of the source tree src, linked to the
// libllama beside the llama-server server.
func buildAgainst(tb testing.TB, name, server, src string) (bin, lib string) {
	tb.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		tb.Skip("no C compiler")
	}
	lib = filepath.Dir(server)
	bin = filepath.Join(tb.TempDir(), strings.TrimSuffix(name, ".c"))
	build := exec.Command(cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-D_POSIX_C_SOURCE=200809L",
		"-I", filepath.Join(src, "include"), "-I", filepath.Join(src, "ggml", "include"),
		filepath.Join("tests", name), "-o", bin,
		"-L", lib, "-lllama", "-lggml", "-lggml-base", "-lm", "-Wl,-rpath,"+lib)
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("compiling tests/%s against %s: %v\n%s", name, lib, err, out)
	}
	return bin, lib
}

// costModel writes the random llama the cost benchmarks decode with: 8 layers × 512 and Gemma's
// 262,144-token vocabulary, where a softmax over the vocabulary weighs most.
func costModel(b *testing.B) string {
	o := gguf.DefaultTiny()
	o.Name, o.Embd, o.Layers, o.Heads, o.HeadsKV, o.FF = "llbuild-mid-llama", 512, 8, 8, 8, 1536
	mb, err := gguf.TinyLlama(o)
	if err != nil {
		b.Fatal(err)
	}
	gguf.PadVocab(mb, o, 262144)
	model := filepath.Join(b.TempDir(), "mid262k.gguf")
	if err := mb.WriteFile(model); err != nil {
		b.Fatal(err)
	}
	return model
}

// costSetting reads a cost benchmark's setting from the environment: def when unset.
func costSetting(b *testing.B, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		b.Fatalf("%s=%q: want a number from %d", name, v, least)
	}
	return n
}

// costRounds runs tests/output-logprobs-cost.c's program: its rounds' median decode step in ns
// with the option off and on.
func costRounds(b *testing.B, bin, model string, rounds, threads, ngl int) (offs, ons []float64) {
	out, err := exec.Command(bin, model, strconv.Itoa(rounds), "200", strconv.Itoa(threads), strconv.Itoa(ngl)).CombinedOutput()
	if err != nil {
		b.Fatalf("output-logprobs-cost: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		var r int
		var off, on float64
		if n, _ := fmt.Sscanf(line, "round %d off %g on %g", &r, &off, &on); n == 3 && off > 0 && on > 0 {
			offs, ons = append(offs, off), append(ons, on)
		}
	}
	if len(ons) != rounds || !strings.Contains(string(out), "done") {
		b.Fatalf("output-logprobs-cost gave %d of %d rounds:\n%s", len(ons), rounds, out)
	}
	return offs, ons
}

// BenchmarkOutputLogprobsOnWithoutTargets measures what llama_set_output_logprobs() costs a
// decode step without targets (a generated token) on this CPU: one context decodes single tokens
// with the option off and on, alternating which goes first, ROUNDS rounds of 200 steps
// (LLBUILD_LOGPROB_COST_ROUNDS, default 12; LLBUILD_LOGPROB_COST_THREADS, default 2;
// LLBUILD_LOGPROB_COST_NGL, default 0, the layers on a GPU: h200-pin-ab.sh's logprob-cost stage
// runs it so on the GPU machine against a lease's builds), with a random llama of 8 layers × 512 and Gemma's
// 262,144-token vocabulary, where the series' softmax over the vocabulary weighs most; bench's
// judge says whether the option on is slower than off (speed on ÷ off, round by round), and
// the ratio is reported. With 0014 the option
// should cost nothing; without it, the argmax and softmax of every step. The build's patches say
// which it is. Run: go test -run XXX -bench OutputLogprobsOnWithoutTargets -benchtime 1x ./patches
func BenchmarkOutputLogprobsOnWithoutTargets(b *testing.B) {
	bin, lib := buildAgainstSeries(b, "output-logprobs-cost.c")
	lean, err := hasPatch(filepath.Join(lib, "patches"), "-llama-output-logprobs-only-with-targets.patch")
	if err != nil {
		b.Fatal(err)
	}
	model := costModel(b)
	rounds := costSetting(b, "LLBUILD_LOGPROB_COST_ROUNDS", 12, 1)
	threads := costSetting(b, "LLBUILD_LOGPROB_COST_THREADS", 2, 1)
	ngl := costSetting(b, "LLBUILD_LOGPROB_COST_NGL", 0, 0)
	for range b.N {
		offs, ons := costRounds(b, bin, model, rounds, threads, ngl)
		var ratios []float64
		for i := range ons {
			ratios = append(ratios, offs[i]/ons[i]) // speed on ÷ speed off
		}
		v := bench.DefaultJudge().Compare(ratios)
		_, offMed, _ := bench.Spread(offs)
		_, onMed, _ := bench.Spread(ons)
		b.Logf("build with 0014: %v; %d layers on a GPU; a decode step %.0f µs with the option off, %.0f µs on (medians of %d rounds)", lean, ngl, offMed/1e3, onMed/1e3, rounds)
		b.Logf("speed with the option on ÷ off: %s", v.Text)
		b.ReportMetric(v.Median, "on÷off")
		b.ReportMetric((onMed-offMed)/1e3, "µs-added")
	}
}

// BenchmarkOutputLogprobsBuildAgainstBuild is the same decode steps build against build: A the
// build LLBUILD_PATCHED_LLAMA_SERVER names, B the one LLBUILD_LOGPROB_COST_AGAINST names (say the
// series and the series + 0014), each round one run of each, the order turning every round;
// bench's judge says whether B's step is faster than A's with the option on (a
// --prompt-logprobs server's generated token) and, as a check, with it off. Skipped without
// LLBUILD_LOGPROB_COST_AGAINST. Run: LLBUILD_LOGPROB_COST_AGAINST=<B>/llama-server go test -run
// XXX -bench OutputLogprobsBuildAgainstBuild -benchtime 1x ./patches
func BenchmarkOutputLogprobsBuildAgainstBuild(b *testing.B) {
	against := os.Getenv("LLBUILD_LOGPROB_COST_AGAINST")
	if against == "" {
		b.Skip("LLBUILD_LOGPROB_COST_AGAINST (B's llama-server) is not set: it names the build to set against LLBUILD_PATCHED_LLAMA_SERVER's")
	}
	binA, libA := buildAgainstSeries(b, "output-logprobs-cost.c")
	binB, libB := buildAgainst(b, "output-logprobs-cost.c", against, os.Getenv("LLBUILD_PATCHED_LLAMA_SOURCE"))
	model := costModel(b)
	rounds := costSetting(b, "LLBUILD_LOGPROB_COST_ROUNDS", 12, 1)
	threads := costSetting(b, "LLBUILD_LOGPROB_COST_THREADS", 2, 1)
	ngl := costSetting(b, "LLBUILD_LOGPROB_COST_NGL", 0, 0)
	for range b.N {
		var onRatios, offRatios, aOn, bOn []float64
		for r := range rounds {
			run := func(bin string) (off, on float64) {
				offs, ons := costRounds(b, bin, model, 1, threads, ngl)
				return offs[0], ons[0]
			}
			var aOff, aOnR, bOff, bOnR float64
			if r%2 == 0 {
				aOff, aOnR = run(binA)
				bOff, bOnR = run(binB)
			} else {
				bOff, bOnR = run(binB)
				aOff, aOnR = run(binA)
			}
			onRatios = append(onRatios, aOnR/bOnR) // B's speed ÷ A's
			offRatios = append(offRatios, aOff/bOff)
			aOn, bOn = append(aOn, aOnR), append(bOn, bOnR)
		}
		j := bench.DefaultJudge()
		on, off := j.Compare(onRatios), j.Compare(offRatios)
		_, am, _ := bench.Spread(aOn)
		_, bm, _ := bench.Spread(bOn)
		b.Logf("A %s, B %s; %d layers on a GPU; a decode step with the option on: A %.0f µs, B %.0f µs (medians of %d rounds)", libA, libB, ngl, am/1e3, bm/1e3, rounds)
		b.Logf("B ÷ A, the option on: %s", on.Text)
		b.Logf("B ÷ A, the option off: %s", off.Text)
		b.ReportMetric(on.Median, "B÷A-on")
		b.ReportMetric(off.Median, "B÷A-off")
	}
}
