package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
	"github.com/llbuild/llbuild/targets"
)

// planFor resolves the fixture recipe for cpu-v3 with its runtime base set to base.
func planFor(t *testing.T, base v1.Image, cmake ...string) *pipeline.Plan {
	t.Helper()
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := base.Digest()
	tg.Build.Images.Runtime = "example.invalid/testbase:1@" + d.String()
	series := fixture.Patches(t, "0001-server-greeting.patch")
	return fixture.PlanFor(t, tg, fixture.Recipe(t, "", cmake...), series)
}

// writeArtifacts writes artifacts shaped like a server build (an executable, a versioned
// library and its links) for plan p.
func writeArtifacts(t *testing.T, p *pipeline.Plan) *artifacts.Artifacts {
	t.Helper()
	src := t.TempDir()
	for name, body := range map[string]string{"llama-server": "server", "libllama.so.0.0.1": "llama"} {
		os.WriteFile(filepath.Join(src, name), []byte(body), 0o755)
	}
	os.Symlink("libllama.so.0.0.1", filepath.Join(src, "libllama.so.0"))
	dir, err := artifacts.Write(t.TempDir(), artifacts.Input{
		Target: p.Target, PlanHash: p.Hash,
		Files: []artifacts.InputFile{
			{Path: "llama-server", From: filepath.Join(src, "llama-server"), Kind: artifacts.KindExecutable},
			{Path: "libllama.so.0.0.1", From: filepath.Join(src, "libllama.so.0.0.1"), Kind: artifacts.KindLibrary},
			{Path: "libllama.so.0", From: filepath.Join(src, "libllama.so.0"), Kind: artifacts.KindLibrary},
		},
		Provenance: pipeline.ProvenanceOf(p, pipeline.Builder{Version: "test", Executor: "host"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func assemble(t *testing.T) (v1.Image, *pipeline.Plan, v1.Image) {
	t.Helper()
	base := imagetest.BaseImage(t)
	p := planFor(t, base)
	loaded, err := LoadBase(context.Background(), "oci-layout:"+imagetest.WriteLayout(t, base), p.Images.Runtime)
	if err != nil {
		t.Fatalf("LoadBase() = %v", err)
	}
	img, err := Assemble(loaded, writeArtifacts(t, p))
	if err != nil {
		t.Fatalf("Assemble() = %v", err)
	}
	return img, p, base
}

func TestAssembledImageIsValidAndConfigured(t *testing.T) {
	img, p, base := assemble(t)
	if err := validate.Image(img); err != nil {
		t.Fatalf("validate.Image() = %v", err)
	}
	layers, _ := img.Layers()
	baseLayers, _ := base.Layers()
	if len(layers) != len(baseLayers)+1 {
		t.Errorf("layers = %d, want the base's %d plus one", len(layers), len(baseLayers))
	}
	if mt, _ := layers[len(layers)-1].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type = %s, want %s", mt, types.OCILayer)
	}

	rc, _ := layers[len(layers)-1].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	epoch := time.Unix(fixture.Epoch, 0).UTC()
	var entries []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, fmt.Sprintf("%s %o %s", h.Name, h.Mode, h.Linkname))
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("entry %s: uid %d gid %d uname %q gname %q mtime %v, want 0 0 \"\" \"\" %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, epoch)
		}
	}
	want := []string{"app/ 755 ", "app/libllama.so.0 777 libllama.so.0.0.1", "app/libllama.so.0.0.1 755 ", "app/llama-server 755 "}
	if strings.Join(entries, "|") != strings.Join(want, "|") {
		t.Errorf("layer entries = %q, want %q", entries, want)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !cf.Created.Time.Equal(epoch) {
		t.Errorf("created = %v, want %v", cf.Created.Time, epoch)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/app/llama-server" || cf.Config.Cmd != nil {
		t.Errorf("entrypoint = %q cmd = %q, want /app/llama-server and no cmd", got, cf.Config.Cmd)
	}
	env := strings.Join(cf.Config.Env, " ")
	for _, w := range []string{"PATH=/usr/local/sbin:", "LD_LIBRARY_PATH=/app", "LLAMA_ARG_HOST=0.0.0.0", "LLAMA_ARG_PORT=8080"} {
		if !strings.Contains(env, w) {
			t.Errorf("env %q lacks %s", env, w)
		}
	}
	if strings.Contains(env, "LLAMA_ARG_HOST=127.0.0.1") {
		t.Errorf("the plan's LLAMA_ARG_HOST did not override the base's: %q", env)
	}
	labels := cf.Config.Labels
	for k, v := range map[string]string{
		LabelPlanHash:                       p.Hash,
		"io.llbuild.target":                 "cpu-v3",
		"org.opencontainers.image.revision": p.Source.Commit,
		"org.opencontainers.image.created":  epoch.Format(time.RFC3339),
		"io.llbuild.patches":                p.Runtime.Labels["io.llbuild.patches"],
		// the fixture's own patch is neither named series, and not the scoring contract
		LabelSeries:   "custom",
		LabelContract: "upstream",
	} {
		if labels[k] != v || v == "" {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	if _, ok := labels[LabelRef]; ok {
		t.Errorf("a plan of a pinned commit labelled with a ref: %q", labels[LabelRef])
	}
	if cf.Config.Healthcheck == nil || !strings.Contains(strings.Join(cf.Config.Healthcheck.Test, " "), "/health") {
		t.Errorf("healthcheck = %+v, want the plan's /health check", cf.Config.Healthcheck)
	}
	m, _ := img.Manifest()
	bd, _ := base.Digest()
	if m.Annotations["org.opencontainers.image.base.digest"] != bd.String() {
		t.Errorf("base digest annotation = %q, want %s", m.Annotations["org.opencontainers.image.base.digest"], bd)
	}
}

func TestAssemblyIsReproducible(t *testing.T) {
	img1, _, _ := assemble(t)
	img2, _, _ := assemble(t)
	d1, _ := img1.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two assemblies: %s and %s, want the same digest", d1, d2)
	}
	// The OCI archives are byte-identical too.
	var sums [2][32]byte
	for i, img := range []v1.Image{img1, img2} {
		f := filepath.Join(t.TempDir(), "image.tar")
		if err := WriteOCI(f, img, "llama-server:cpu-v3"); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(f)
		sums[i] = sha256.Sum256(b)
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("archive mode = %v (%v), want 0644", fi.Mode(), err)
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two OCI archives of the same image differ")
	}
}

func TestOCIArchiveRoundTrip(t *testing.T) {
	img, _, _ := assemble(t)
	want, _ := img.Digest()
	archive := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteOCI(archive, img, ""); err != nil {
		t.Fatal(err)
	}
	got, err := LoadBase(context.Background(), "oci-archive:"+archive, pipeline.Image{Ref: "x@" + want.String(), Repository: "x", Digest: want.String()})
	if err != nil {
		t.Fatalf("LoadBase(oci-archive) = %v", err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("digest after a round trip = %s, want %s", d, want)
	}
	if err := validate.Image(got); err != nil {
		t.Errorf("validate.Image() after a round trip = %v", err)
	}
	dir := t.TempDir() + "/"
	if err := WriteOCI(dir, img, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBase(context.Background(), "oci-layout:"+dir, pipeline.Image{Digest: want.String()}); err != nil {
		t.Errorf("LoadBase(oci-layout written by WriteOCI) = %v", err)
	}
}

func TestLoadBaseRefusesAnotherDigest(t *testing.T) {
	base := imagetest.BaseImage(t)
	other := "sha256:" + strings.Repeat("ab", 32)
	want := pipeline.Image{Ref: "x@" + other, Repository: "x", Digest: other}
	_, err := LoadBase(context.Background(), "oci-layout:"+imagetest.WriteLayout(t, base), want)
	if err == nil || !strings.Contains(err.Error(), "does not hold the plan's runtime base x@"+other) {
		t.Errorf("LoadBase() = %v, want a refusal naming %s", err, other)
	}
	// An archive is named as the user gave it, not by the directory it was unpacked into
	// (issue 31), and the refusal says how to get the right one.
	archive := filepath.Join(t.TempDir(), "runtime.tar")
	if err := WriteOCI(archive, base, ""); err != nil {
		t.Fatal(err)
	}
	_, err = LoadBase(context.Background(), "oci-archive:"+archive, want)
	for _, w := range []string{"OCI archive " + archive + " does not hold the plan's runtime base x@" + other, "skopeo copy docker://x@" + other + " oci-archive:FILE"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("LoadBase(oci-archive) = %v, want it to say %q", err, w)
		}
	}
	if err != nil && strings.Contains(err.Error(), "llbuild-oci-") {
		t.Errorf("LoadBase(oci-archive) names its temporary directory: %v", err)
	}
}

func TestPushThenPull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, _, base := assemble(t)
	want, _ := img.Digest()
	refs := []string{host + "/llbuild/llama-server:cpu-v3", host + "/llbuild/llama-server:cpu-v3-" + want.Hex[:12]}
	if err := Push(context.Background(), img, refs); err != nil {
		t.Fatalf("Push() = %v", err)
	}
	for _, r := range refs {
		ref, _ := name.ParseReference(r)
		got, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("pulling %s: %v", r, err)
		}
		if d, _ := got.Digest(); d != want {
			t.Errorf("%s has digest %s, want %s", r, d, want)
		}
		if err := validate.Image(got); err != nil {
			t.Errorf("validate.Image(%s) = %v", r, err)
		}
	}
	// The registry mirror path: the base pushed to the registry, loaded by reference.
	bref := host + "/mirror/testbase:1"
	if err := Push(context.Background(), base, []string{bref}); err != nil {
		t.Fatal(err)
	}
	bd, _ := base.Digest()
	got, err := LoadBase(context.Background(), bref, pipeline.Image{Ref: "example.invalid/testbase:1@" + bd.String(), Repository: "example.invalid/testbase", Digest: bd.String()})
	if err != nil {
		t.Fatalf("LoadBase(mirror) = %v", err)
	}
	if d, _ := got.Digest(); d != bd {
		t.Errorf("base from the mirror has digest %s, want %s", d, bd)
	}
}

func TestRedact(t *testing.T) {
	if got := redact("https://user:secret@registry.example/x"); strings.Contains(got, "secret") {
		t.Errorf("redact() = %q, still holds the password", got)
	}
}

// TestPlanTextNamesEveryLabelOfTheImage: `llbuild plan` prints every label the image carries
// beyond its base's (series, contract, ref and plan hash among them), with the value the image
// has; the plan and version labels, which the plan cannot hold, by name.
func TestPlanTextNamesEveryLabelOfTheImage(t *testing.T) {
	for _, ref := range []string{"", "pull/1/head"} {
		t.Run("ref="+ref, func(t *testing.T) {
			base := imagetest.BaseImage(t)
			p := planFor(t, base)
			if ref != "" {
				// a ref is outside the hash: the same plan, named
				p.Source.Ref = ref
			}
			loaded, err := LoadBase(context.Background(), "oci-layout:"+imagetest.WriteLayout(t, base), p.Images.Runtime)
			if err != nil {
				t.Fatal(err)
			}
			img, err := Assemble(loaded, writeArtifacts(t, p))
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			bcf, err := base.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			if err := p.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			printed := map[string]bool{}
			for _, line := range strings.Split(text.String(), "\n") {
				if l, ok := strings.CutPrefix(line, "label:"); ok {
					printed[strings.TrimSpace(l)] = true
				}
			}
			for k, v := range cf.Config.Labels {
				switch {
				case k == LabelPlan || k == LabelVersion:
					if !strings.Contains(text.String(), "label:         "+k+"=") {
						t.Errorf("plan text does not name label %s", k)
					}
				case bcf.Config.Labels[k] == v:
				case !printed[k+"="+v]:
					t.Errorf("the image has label %s=%q, which the plan text does not print", k, v)
				}
			}
			for _, k := range []string{LabelSeries, LabelContract, LabelPlanHash} {
				if cf.Config.Labels[k] == "" {
					t.Errorf("the image has no %s label", k)
				}
			}
			if got := cf.Config.Labels[LabelRef]; got != ref {
				t.Errorf("label %s = %q, want %q", LabelRef, got, ref)
			}
			if !strings.Contains(text.String(), "series:        "+cf.Config.Labels[LabelSeries]+"\n") {
				t.Errorf("plan text has no series line for %s:\n%s", cf.Config.Labels[LabelSeries], text.String())
			}
		})
	}
}
