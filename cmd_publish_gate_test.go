package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish"
	"github.com/llbuild/llbuild/publish/publishtest"
	"github.com/llbuild/llbuild/targets"
)

// The gate on real parts: yesterday's image (the provisioned series build's files, written as
// the artifacts of a cpu-v3 target pinned to the stand-in runtime base) is published to Debian's
// docker-registry and bundled back with bundle --image; that bundle is the reference. A new plan
// (same server, another runtime label, so another plan hash) is benched against it and pushed,
// its verdict written beside the digest; the next, asked for a speedup it cannot have, is refused:
// nothing pushed, the floating tag left where it was. The bars lie far outside what this machine's
// noise can reach (0.02 and 50): the decision, not the speed, is under test.
func TestPublishGatePushesAndRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes to a real registry and starts real llama-servers")
	}
	server := enginetest.PatchedServer(t)
	real, err := artifacts.Open(filepath.Dir(server))
	if err != nil {
		t.Fatal(err)
	}
	runtime := "oci-archive:" + enginetest.RuntimeImage(t)
	base, closeBase, err := image.Open(t.Context(), runtime)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBase()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Distribution(t, publishtest.DistributionOptions{})
	repo := reg.Host + "/llbuild/llama-server"
	out, dir := t.TempDir(), t.TempDir()
	// one target file per day, each plan's artifacts the provisioned build's files
	day := func(n string) (string, *pipeline.Plan) {
		tg := publishtest.Target(t, "cpu-v3", base, func(tg *targets.Target) {
			if tg.Runtime.Env == nil {
				tg.Runtime.Env = map[string]string{}
			}
			tg.Runtime.Env["GGML_LLBUILD_TEST_DAY"] = n // read by nothing: another plan, the same server
		})
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		f := publishtest.TargetFile(t, filepath.Join(dir, n), tg)
		p, err := resolvePlan("", f, "server", false)
		if err != nil {
			t.Fatal(err)
		}
		var files []artifacts.InputFile
		for _, af := range real.Manifest.Files {
			files = append(files, artifacts.InputFile{Path: af.Path, From: real.Path(af), Kind: af.Kind})
		}
		if _, err := artifacts.Write(out, artifacts.Input{Target: p.Target, PlanHash: p.Hash, Files: files,
			Provenance: pipeline.ProvenanceOf(p, pipeline.Builder{Version: "test", Executor: "host"})}); err != nil {
			t.Fatal(err)
		}
		return f, p
	}
	publishArgs := func(f string, extra ...string) []string {
		return append([]string{"publish", "--target-file", f, "--registry", repo, "--out", out, "--base", "runtime=" + runtime}, extra...)
	}
	f1, _ := day("1")
	if code, _, stderr := runCLI(t, publishArgs(f1)...); code != exitOK {
		t.Fatalf("publishing yesterday's image: exit %d\n%s", code, stderr)
	}
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	today := filepath.Join(dir, "today")
	if code, _, stderr := runCLI(t, "bundle", "--target-file", f1, "--image", repo+":cpu-v3", "--model", model, "--ctx-size", "1024",
		"--threads", "2", "--parallel", "1", "-o", today, "-q"); code != exitOK {
		t.Fatalf("bundling the image in use: exit %d\n%s", code, stderr)
	}
	// --min-step 0.5: this machine's two loaded cores swing row 0 by up to half, so only a
	// difference of half or more is called one; the decision, not the speed, is under test
	gateArgs := func(gdir string, extra ...string) []string {
		return append([]string{"--not-slower-than", today, "--gate-dir", gdir, "--min-step", "0.5", "--gate-canaries", "4", "--gate-generate", "128", "--json"}, extra...)
	}
	verdict := func(gdir string) *publish.GateVerdict {
		b, err := os.ReadFile(filepath.Join(gdir, "gate-cpu-v3.json"))
		if err != nil {
			t.Fatal(err)
		}
		var v publish.GateVerdict
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return &v
	}
	runsIn := func(gdir string) int {
		rs, err := bench.ReadRecords(filepath.Join(gdir, "bench"))
		if err != nil {
			t.Fatal(err)
		}
		return len(rs.Runs)
	}
	head := func(tag string) string {
		d, err := remote.Head(mustTag(t, repo+":"+tag))
		if err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		return d.Digest.String()
	}

	// today's build: not slower, judged over the judge's six rounds, the verdict beside the digest
	f2, p2 := day("2")
	g2 := filepath.Join(dir, "gate2")
	code, stdout, stderr := runCLI(t, append(publishArgs(f2), gateArgs(g2)...)...)
	if code != exitOK {
		t.Fatalf("gated publish: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rows []struct {
		Digest string
		Gate   *publish.GateVerdict
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	v := verdict(g2)
	if !v.Pass || v.Digest == "" || v.Digest != rows[0].Digest || v.Ref == "" || rows[0].Gate == nil || len(v.Ratios) != 6 || v.Verdict.Rounds != 6 ||
		v.Verdict.Test != bench.TestSignedRank || v.Plan != p2.Hash || v.SlotContext[0] != 1024 || v.SlotContext[1] != 1024 ||
		v.Reference.Image == "" || !strings.HasPrefix(v.Reference.Image, repo+":cpu-v3@sha256:") {
		t.Errorf("verdict %+v (row %+v): want a pass over 6 rounds by the signed-rank test, both sides at 1024 tokens a slot, the pushed digest beside it, and the reference image named", v, rows[0])
	}
	if head("cpu-v3") != v.Digest {
		t.Errorf("cpu-v3 = %s, want the gated push %s", head("cpu-v3"), v.Digest)
	}
	benched := runsIn(g2)

	// the bypass that was: a plan already in the registry (pushed ungated under its identity tag
	// alone) used to take the floating tag with no verdict. Now it is judged by its digest, and
	// two rounds cannot decide: refused, cpu-v3 left where it was
	f3, p3 := day("3")
	code, pushed3, stderr := runCLI(t, append(publishArgs(f3), "--tag-template", "{{.Target}}-{{.ShortCommit}}-{{.ShortHash}}")...)
	if code != exitOK {
		t.Fatalf("publishing day 3 under its identity tag: exit %d\n%s", code, stderr)
	}
	g3 := filepath.Join(dir, "gate3")
	code, stdout, stderr = runCLI(t, append(publishArgs(f3), gateArgs(g3, "--gate-rounds", "2")...)...)
	if code != 1 || !strings.Contains(stderr, "no tag moved to the image the registry holds") || !strings.Contains(stderr, "not enough rounds to decide (6 needed, 2 measured)") {
		t.Errorf("gated publish of a plan already pushed, 2 rounds: exit %d, want 1 saying no tag moved and not enough rounds\n%s\n%s", code, stdout, stderr)
	}
	v3 := verdict(g3)
	if v3.Pass || v3.Ref != "" || v3.Verdict.Kind != bench.NotEnoughRounds || v3.Plan != p3.Hash || v3.Digest != strings.TrimSpace(pushed3) {
		t.Errorf("refused verdict %+v: want no pass, no ref, not enough rounds, for the registry's image of plan 3", v3)
	}
	if head("cpu-v3") != v.Digest {
		t.Errorf("cpu-v3 = %s after the refusal, want it left at %s", head("cpu-v3"), v.Digest)
	}

	// the same image against the same reference and settings: the recorded verdict, nothing benched
	code, stdout, stderr = runCLI(t, append(publishArgs(f2), gateArgs(g2)...)...)
	if code != exitOK || !strings.Contains(stdout, `"recorded": true`) {
		t.Errorf("publishing day 2 again through its gate: exit %d, want 0 from the recorded verdict\n%s\n%s", code, stdout, stderr)
	}
	if n := runsIn(g2); n != benched {
		t.Errorf("the recorded verdict benched again: %d runs, want %d", n, benched)
	}

	// the reference as the image itself (bundled as bundle --image does, --parallel 1 on both
	// sides): day 3 judged against the image in use, and let out
	g4 := filepath.Join(dir, "gate4")
	code, stdout, stderr = runCLI(t, append(publishArgs(f3), "--not-slower-than", repo+":cpu-v3", "--gate-model", model, "--gate-ctx-size", "1024",
		"--gate-dir", g4, "--min-step", "0.5", "--gate-canaries", "4", "--gate-generate", "128")...)
	if code != exitOK {
		t.Fatalf("gated against an image reference: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if v4 := verdict(g4); !v4.Pass || v4.SlotContext[0] != 1024 || v4.SlotContext[1] != 1024 || head("cpu-v3") != v4.Digest || v4.Reference.Image != repo+":cpu-v3@"+v.Digest {
		t.Errorf("verdict against the image %+v: want a pass at 1024 tokens a slot, cpu-v3 moved to %s, the reference the image %s", v4, v4.Digest, v.Digest)
	}
	if code, _, stderr := runCLI(t, append(publishArgs(f3), "--not-slower-than", repo+":cpu-v3")...); code != 2 || !strings.Contains(stderr, "give --gate-model") {
		t.Errorf("an image reference without --gate-model: exit %d, want 2\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(publishArgs(f3), gateArgs(g2, "--gate-ratio", "0.98")...)...); code != 2 || !strings.Contains(stderr, "--gate-ratio is gone") {
		t.Errorf("--gate-ratio: exit %d, want 2\n%s", code, stderr)
	}

	// the gate judges only its bundle's target
	if code, _, stderr := runCLI(t, "publish", "-t", "h200", "--registry", repo, "--not-slower-than", today); code != 2 || !strings.Contains(stderr, "is a bundle for target cpu-v3") {
		t.Errorf("gating h200 against a cpu-v3 bundle: exit %d\n%s", code, stderr)
	}
}
