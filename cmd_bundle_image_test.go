package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish/publishtest"
)

// foreignImage lays the artifacts out as someone else's Dockerfile might (no llbuild labels):
// llama-server in /opt/llama/bin, found by the entrypoint through PATH, its libraries in
// /opt/llama/lib, found through LD_LIBRARY_PATH, on base.
func foreignImage(t *testing.T, base v1.Image, a *artifacts.Artifacts) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"opt/", "opt/llama/", "opt/llama/bin/", "opt/llama/lib/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range a.Manifest.Files {
		dir := "opt/llama/lib/"
		if f.Kind == artifacts.KindExecutable {
			dir = "opt/llama/bin/"
		}
		name := dir + filepath.Base(f.Path)
		if f.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: f.Link, Mode: 0o777}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(a.Path(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config.DeepCopy()
	cfg.Entrypoint = []string{"llama-server"}
	cfg.Cmd = []string{"--host", "0.0.0.0"}
	cfg.Env = append(cfg.Env, "PATH=/usr/local/bin:/usr/bin:/bin:/opt/llama/bin", "LD_LIBRARY_PATH=/opt/llama/lib")
	cfg.Labels = map[string]string{"org.opencontainers.image.version": "b10106", "org.opencontainers.image.source": "https://example.invalid/hand-written"}
	img, err = mutate.Config(img, *cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// The Olares One user's comparison on real parts: the series build of the pinned llama.cpp
// (provisioned) assembled into a runtime image on the stand-in runtime base (Debian bookworm),
// pushed to Debian's docker-registry on loopback, and the same files in a hand-made image without
// llbuild's labels. bundle --image takes each server out with its loader and C library; the
// bundles hold the artifacts' very bytes, the llbuild image's bundle keeps the plan, the foreign
// one says it is foreign, and the bench runs all three interleaved with every canary passing.
func TestBundleImageBenchesImagesAgainstTheirArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes to a real registry and starts real llama-servers")
	}
	server := enginetest.PatchedServer(t)
	runtime := enginetest.RuntimeImage(t)
	a, err := artifacts.Open(filepath.Dir(server))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base, closeBase, err := image.Open(ctx, "oci-archive:"+runtime)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBase()
	ours, err := image.Assemble(base, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Distribution(t, publishtest.DistributionOptions{})
	ref := reg.Host + "/llbuild/llama-server:cpu-v3"
	if err := image.Push(ctx, ours, []string{ref}); err != nil {
		t.Fatalf("pushing to %s: %v", ref, err)
	}
	pushed, _ := ours.Digest()
	foreign := "oci-layout:" + imagetest.WriteLayout(t, foreignImage(t, base, a))

	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	bundle := func(name string, from ...string) (string, *manifest.Manifest) {
		o := filepath.Join(dir, name)
		args := append([]string{"bundle", "-t", "cpu-v3", "--model", model, "--ctx-size", "1024", "--threads", "2", "--parallel", "1", "-o", o, "-q"}, from...)
		code, _, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("bundle %v: exit %d\n%s", from, code, stderr)
		}
		m, err := manifest.Load(o)
		if err != nil {
			t.Fatal(err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".llbuild-image-*")); len(left) != 0 {
			t.Errorf("bundle %v left %v behind", from, left)
		}
		return o, m
	}
	artB, artM := bundle("artifacts", "--artifacts", a.Dir)
	regB, regM := bundle("registry", "--image", ref)
	forB, forM := bundle("foreign", "--image", foreign)
	// an llbuild image says which target it was built for
	if code, _, stderr := runCLI(t, "bundle", "-t", "h200", "--model", model, "-o", filepath.Join(dir, "h200"), "--image", ref); code == exitOK ||
		!strings.Contains(stderr, "built for target cpu-v3, not h200") {
		t.Errorf("bundle -t h200 of the cpu-v3 image: exit %d, want a refusal naming cpu-v3\n%s", code, stderr)
	}

	digests := func(m *manifest.Manifest) map[string]string {
		d := map[string]string{}
		for _, f := range m.Files {
			if f.Link == "" {
				d[f.Path] = f.SHA256
			} else {
				d[f.Path] = "-> " + f.Link
			}
		}
		return d
	}
	want := digests(artM)
	for _, side := range []struct {
		name string
		m    *manifest.Manifest
	}{{"registry", regM}, {"foreign", forM}} {
		got := digests(side.m)
		for p, d := range want {
			// models are the bundles' own; runtime images do not carry the build's patch files
			if strings.HasPrefix(p, manifest.ModelsDir+"/") || strings.HasPrefix(p, manifest.PatchesDir+"/") || strings.HasPrefix(d, "-> ") {
				continue
			}
			if got[p] != d {
				t.Errorf("%s bundle: %s = %q, the artifacts' bundle has %q", side.name, p, got[p], d)
			}
		}
		// the image's own C library and loader travel with the server; the GPU driver never does
		if side.m.Server.Loader != "lib/ld-linux-x86-64.so.2" || got["lib/libc.so.6"] == "" || got["lib/libstdc++.so.6"] == "" {
			t.Errorf("%s bundle: loader %q, libc %q, libstdc++ %q: want the image's loader and libraries", side.name, side.m.Server.Loader, got["lib/libc.so.6"], got["lib/libstdc++.so.6"])
		}
		if side.m.Build.Image == nil || side.m.Build.Image.Server == "" || !strings.HasPrefix(side.m.Build.Image.Digest, "sha256:") {
			t.Errorf("%s bundle: build.image = %+v, want the image's digest and server path", side.name, side.m.Build.Image)
		}
	}
	if im := regM.Build.Image; im == nil || im.Foreign || im.Digest != pushed.String() || im.Server != "/app/llama-server" ||
		regM.Build.PlanHash != artM.Build.PlanHash || regM.Build.Source.Commit != artM.Build.Source.Commit || regM.Build.Series != artM.Build.Series ||
		!reflect.DeepEqual(regM.Contract, artM.Contract) {
		t.Errorf("the llbuild image's bundle: build %+v image %+v contract %+v; want the artifacts' plan %s, series %s, contract %+v, and image %s at /app/llama-server",
			regM.Build, regM.Build.Image, regM.Contract, artM.Build.PlanHash, artM.Build.Series, artM.Contract, pushed)
	}
	if im := forM.Build.Image; im == nil || !im.Foreign || im.Server != "/opt/llama/bin/llama-server" || forM.Build.PlanHash != "" || len(forM.Build.Plan) != 0 ||
		len(forM.Build.Patches) != 0 || forM.Contract.PromptLogprobs != manifest.PromptLogprobsTeacherForcing || im.Labels["org.opencontainers.image.version"] != "b10106" {
		t.Errorf("the foreign image's bundle: build %+v image %+v contract %+v; want foreign, no plan or patches, teacher-forced echo, its labels", forM.Build, im, forM.Contract)
	}

	// the bench: all three interleaved, A/B against the artifacts' bundle
	benchDir := t.TempDir()
	code, stdout, stderr := benchRun(t, artB, regB, forB, "--dir", benchDir, "--rounds", "1", "--canaries", "4", "--prompt-tokens", "32", "--generate", "16", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var res struct {
		bench.Result
		PlanDiffs []struct{ A, B, Error string }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(res.Runs))
	}
	rs := readRecords(t, benchDir)
	var labels []string
	for _, r := range rs.Runs {
		rec := readRecord(t, filepath.Join(benchDir, r.Dir, "record.json"))
		if c := rec.Canary; c.Checks != 4 || c.Passed != 4 {
			t.Errorf("%s: canaries %d/%d, want 4/4", r.Bundle, c.Passed, c.Checks)
		}
		labels = append(labels, rec.Identity.Label)
	}
	if !slices.ContainsFunc(labels, func(l string) bool { return strings.Contains(l, "-img") && !strings.Contains(l, "-plan") }) {
		t.Errorf("labels %v: the foreign image's run should be named by its image (img...), not by a plan it has not", labels)
	}
	foreignDiff := false
	for _, d := range res.PlanDiffs {
		if d.B == forB && strings.Contains(d.Error, "foreign image") {
			foreignDiff = true
		}
	}
	if !foreignDiff {
		t.Errorf("plan diffs %+v: the foreign bundle's should say it records no plan", res.PlanDiffs)
	}
}

// What bundle --image refuses, before writing anything: both server sources, an image without
// llama-server, an image for another target, a bare file name.
func TestBundleImageRefusals(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		t.Fatal(err)
	}
	empty := "oci-layout:" + imagetest.WriteLayout(t, imagetest.BaseImage(t))
	file := filepath.Join(dir, "image.tar")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", empty, "--artifacts", dir}, "give --artifacts or --image, not both"},
		{[]string{"--image", empty}, "no llama-server in the image"},
		{[]string{"--image", file}, "oci-archive:" + file},
	} {
		o := filepath.Join(dir, "out")
		args := append([]string{"bundle", "-t", "cpu-v3", "--model", model, "-o", o}, tc.args...)
		code, _, stderr := runCLI(t, args...)
		if code == exitOK || !strings.Contains(stderr, tc.want) {
			t.Errorf("bundle %v: exit %d, want an error with %q\n%s", tc.args, code, tc.want, stderr)
		}
		if _, err := os.Stat(o); err == nil {
			t.Errorf("bundle %v wrote %s", tc.args, o)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".llbuild-image-*")); len(left) != 0 {
			t.Errorf("bundle %v left %v behind", tc.args, left)
		}
	}
	// a refused bundle whose -o lies under a directory that did not exist leaves no directory
	parent := filepath.Join(dir, "new-parent")
	if code, _, _ := runCLI(t, "bundle", "-t", "cpu-v3", "--model", model, "-o", filepath.Join(parent, "b"), "--image", empty); code == exitOK {
		t.Error("bundle of an image without llama-server succeeded")
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Errorf("a refused bundle left %s (%v)", parent, err)
	}
}
