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
	"github.com/llbuild/llbuild/publish/publishtest"
	"github.com/llbuild/llbuild/targets"
)

func TestGateDecision(t *testing.T) {
	cmp := func(ratios ...float64) *bench.Comparison {
		c := &bench.Comparison{Ratios: ratios, Min: ratios[0], Max: ratios[0], Median: ratios[len(ratios)/2]}
		for _, r := range ratios {
			c.Min, c.Max = min(c.Min, r), max(c.Max, r)
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		cmp     *bench.Comparison
		invalid []string
		ratio   float64
		pass    bool
		want    string
	}{
		{"slower in every round", cmp(0.90, 0.93, 0.95), nil, 0.98, false, "below 0.980 in every round"},
		{"one round at the bar", cmp(0.90, 0.99, 0.95), nil, 0.98, true, "not slower"},
		{"as fast", cmp(0.99, 1.00, 1.01), nil, 0.98, true, "median 1.000 (0.990-1.010, 3 rounds)"},
		{"a speedup asked for, not there", cmp(1.01, 1.02, 1.00), nil, 1.05, false, "below 1.050"},
		{"a broken new server", cmp(1.2, 1.2, 1.2), []string{"new round 0: canaries 3/4"}, 0.98, false, "canaries 3/4"},
		{"nothing measured", nil, nil, 0.98, false, "no round"},
	} {
		pass, why := gateDecision(tc.cmp, tc.invalid, tc.ratio)
		if pass != tc.pass || !strings.Contains(why, tc.want) {
			t.Errorf("%s: pass %v %q, want %v with %q", tc.name, pass, why, tc.pass, tc.want)
		}
	}
}

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
	gateArgs := func(gdir, ratio string) []string {
		return []string{"--not-slower-than", today, "--gate-dir", gdir, "--gate-ratio", ratio, "--gate-canaries", "4", "--gate-generate", "128", "--json"}
	}
	verdict := func(gdir string) *gateVerdict {
		b, err := os.ReadFile(filepath.Join(gdir, "gate-cpu-v3.json"))
		if err != nil {
			t.Fatal(err)
		}
		var v gateVerdict
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return &v
	}

	// today's build: not slower (this machine's two loaded cores swing row 0 by up to half, so
	// the bar is low; the ratios are the bench's own)
	f2, p2 := day("2")
	g2 := filepath.Join(dir, "gate2")
	code, stdout, stderr := runCLI(t, append(publishArgs(f2), gateArgs(g2, "0.02")...)...)
	if code != exitOK {
		t.Fatalf("gated publish: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rows []struct {
		Digest string
		Gate   *gateVerdict
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	v := verdict(g2)
	if !v.Pass || v.Digest == "" || v.Digest != rows[0].Digest || rows[0].Gate == nil || len(v.Ratios) != 3 || v.Plan != p2.Hash ||
		v.Reference.Image == "" || !strings.HasPrefix(v.Reference.Image, repo+":cpu-v3@sha256:") {
		t.Errorf("verdict %+v (row %+v): want a pass over 3 rounds, the pushed digest beside it, and the reference image named", v, rows[0])
	}
	floating, err := remote.Head(mustTag(t, repo+":cpu-v3"))
	if err != nil || floating.Digest.String() != v.Digest {
		t.Errorf("cpu-v3 = %v (%v), want the gated push %s", floating, err, v.Digest)
	}

	// a build asked to be fifty times as fast as the same server: refused, nothing pushed (a bar
	// far beyond what a loaded machine's noise can cross in every round, as 0.02 is below)
	f3, p3 := day("3")
	g3 := filepath.Join(dir, "gate3")
	code, stdout, stderr = runCLI(t, append(publishArgs(f3), gateArgs(g3, "50")...)...)
	if code != 1 || !strings.Contains(stderr, "not pushed") || !strings.Contains(stderr, "below 50.000 in every round") {
		t.Errorf("publish of a build below the bar: exit %d, want 1 saying it was not pushed\n%s\n%s", code, stdout, stderr)
	}
	v3 := verdict(g3)
	if v3.Pass || v3.Digest != "" || len(v3.Ratios) != 3 {
		t.Errorf("refused verdict %+v: want no pass, no digest, 3 ratios", v3)
	}
	tags, err := remote.List(mustTag(t, repo+":x").Repository)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if strings.Contains(tag, p3.ShortHash()) {
			t.Errorf("the refused plan's tag %s was pushed", tag)
		}
	}
	if now, err := remote.Head(mustTag(t, repo+":cpu-v3")); err != nil || now.Digest.String() != v.Digest {
		t.Errorf("cpu-v3 = %v (%v) after the refusal, want it left at %s", now, err, v.Digest)
	}

	// the gate judges only its bundle's target
	if code, _, stderr := runCLI(t, "publish", "-t", "h200", "--registry", repo, "--not-slower-than", today); code != 2 || !strings.Contains(stderr, "is a bundle for target cpu-v3") {
		t.Errorf("gating h200 against a cpu-v3 bundle: exit %d\n%s", code, stderr)
	}
}
