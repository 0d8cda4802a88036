package publish

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish/publishtest"
)

// fixture is a base image, plans whose runtime base is that image, and an ImageFunc that
// assembles their images from compiled stand-in artifacts, counting its calls.
type fixture struct {
	base   string // oci-layout:DIR
	plans  []*pipeline.Plan
	out    string
	calls  atomic.Int32
	images ImageFunc
}

func newFixture(t *testing.T, names ...string) *fixture {
	t.Helper()
	base := imagetest.BaseImage(t)
	fx := &fixture{base: "oci-layout:" + imagetest.WriteLayout(t, base), out: t.TempDir()}
	for _, n := range names {
		fx.plans = append(fx.plans, resolve(t, publishtest.Target(t, n, base, nil)))
	}
	fx.images = func(ctx context.Context, plans []*pipeline.Plan) []Built {
		fx.calls.Add(1)
		out := make([]Built, len(plans))
		for i, p := range plans {
			a := publishtest.ServerArtifacts(t, fx.out, p)
			b, err := image.LoadBase(ctx, fx.base, p.Images.Runtime)
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i].Image, out[i].Err = image.Assemble(b, a)
		}
		return out
	}
	return fx
}

func optsFor(t *testing.T, host string, extra ...remote.Option) Options {
	t.Helper()
	repo, err := name.NewRepository(host + "/llbuild/llama-server")
	if err != nil {
		t.Fatal(err)
	}
	// Short retries: the refusal tests answer 500, which go-containerregistry retries.
	fast := remote.WithRetryBackoff(remote.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2})
	return Options{Repository: repo, Version: "test", Jobs: 2, Remote: append([]remote.Option{fast}, extra...)}
}

func TestPublishTagsResolveToOneDigestWithLabels(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newFixture(t, "olares-one", "cpu-v3")
	opts := optsFor(t, reg.Host)
	results, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Target != "olares-one" || results[1].Target != "cpu-v3" {
		t.Fatalf("results = %+v, want olares-one then cpu-v3", results)
	}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Target, r.Err)
		}
		if r.Existing || len(r.Tags) != 3 || r.Ref != opts.Repository.Name()+"@"+r.Digest {
			t.Errorf("%s: result %+v, want a new image with 3 tags and ref repo@digest", r.Target, r)
		}
		for _, tag := range r.Tags {
			d, err := remote.Head(opts.Repository.Tag(tag))
			if err != nil {
				t.Fatalf("HEAD %s: %v", tag, err)
			}
			if d.Digest.String() != r.Digest {
				t.Errorf("tag %s = %s, want %s", tag, d.Digest, r.Digest)
			}
		}
		img, err := remote.Image(opts.Repository.Digest(r.Digest))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		p := fx.plans[i]
		for k, v := range p.Runtime.Labels {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", r.Target, k, cf.Config.Labels[k], v)
			}
		}
		if cf.Config.Labels[image.LabelPlanHash] != p.Hash {
			t.Errorf("%s: plan-hash label = %q, want %s", r.Target, cf.Config.Labels[image.LabelPlanHash], p.Hash)
		}
		req := envOf(cf)["NVIDIA_REQUIRE_CUDA"]
		if want := map[string]string{"olares-one": "cuda>=13.1", "cpu-v3": ""}[r.Target]; req != want {
			t.Errorf("%s: NVIDIA_REQUIRE_CUDA = %q, want %q", r.Target, req, want)
		}
	}
	if results[0].Digest == results[1].Digest {
		t.Error("two targets got one digest")
	}
}

func envOf(cf *v1.ConfigFile) map[string]string {
	m := map[string]string{}
	for _, kv := range cf.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestPublishTwiceBuildsAndPushesNothing(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newFixture(t, "olares-one", "cpu-v3")
	opts := optsFor(t, reg.Host)
	first, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil || first[0].Err != nil || first[1].Err != nil {
		t.Fatalf("first publish: %v %+v", err, first)
	}
	if reg.Counter.Writes() == 0 {
		t.Fatal("the first publish wrote nothing to the registry")
	}
	t.Logf("first publish of 2 targets: %d requests, %d writes", len(reg.Counter.Requests), reg.Counter.Writes())
	reg.Counter.Reset()
	second, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil {
		t.Fatal(err)
	}
	if w := reg.Counter.WriteRequests(); len(w) != 0 {
		t.Errorf("the second publish wrote %v, want nothing", w)
	}
	t.Logf("second publish: %d requests, %d writes", len(reg.Counter.Requests), reg.Counter.Writes())
	if n := fx.calls.Load(); n != 1 {
		t.Errorf("images were made %d times, want once (the second publish builds nothing)", n)
	}
	for i := range second {
		if second[i].Err != nil || !second[i].Existing || second[i].Digest != first[i].Digest || len(second[i].Moved) != 0 {
			t.Errorf("second publish of %s = %+v, want existing digest %s and nothing moved", second[i].Target, second[i], first[i].Digest)
		}
	}
}

// Images pushed at the same time share their base layers; each shared layer must be uploaded
// once, not once per image: two uploads of one blob at a time broke a manifest PUT on
// distribution's filesystem storage in CI (DIGEST_INVALID, MANIFEST_BLOB_UNKNOWN). The
// registry here holds each blob existence check until a second check for the same blob
// arrives (or 300 ms pass), so two pushes that each check the layer find it missing together.
func TestPublishUploadsSharedLayersOnce(t *testing.T) {
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	hold := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/blobs/sha256:") {
				mu.Lock()
				ch, ok := waiting[r.URL.Path]
				if ok {
					delete(waiting, r.URL.Path)
					close(ch)
					mu.Unlock()
				} else {
					ch = make(chan struct{})
					waiting[r.URL.Path] = ch
					mu.Unlock()
					select {
					case <-ch:
					case <-time.After(300 * time.Millisecond):
						mu.Lock()
						if waiting[r.URL.Path] == ch {
							delete(waiting, r.URL.Path)
						}
						mu.Unlock()
					}
				}
			}
			h.ServeHTTP(w, r)
		})
	}
	reg := publishtest.Memory(t, hold)
	fx := newFixture(t, "olares-one", "cpu-v3")
	opts := optsFor(t, reg.Host)
	res, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("publish: %v %+v", err, res)
	}
	shared := 0
	a, b := layerDigests(t, opts, res[0].Digest), layerDigests(t, opts, res[1].Digest)
	for d := range a {
		if b[d] {
			shared++
		}
	}
	if shared == 0 {
		t.Fatal("the two targets' images share no layer; the test needs a shared base layer")
	}
	for d, n := range reg.Counter.BlobUploads() {
		if n != 1 {
			t.Errorf("blob %s uploaded %d times, want once", d, n)
		}
	}
	t.Logf("%d shared layers, %d blobs uploaded", shared, len(reg.Counter.BlobUploads()))
}

func layerDigests(t *testing.T, opts Options, digest string) map[string]bool {
	t.Helper()
	img, err := remote.Image(opts.Repository.Digest(digest), opts.Remote...)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out[d.String()] = true
	}
	return out
}

// A moving tag that points elsewhere (another plan was published since) is pointed back at
// the published plan's image; nothing else is written.
func TestPublishMovesMovingTagsToTheExistingImage(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newFixture(t, "cpu-v3")
	opts := optsFor(t, reg.Host)
	first, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil || first[0].Err != nil {
		t.Fatalf("first publish: %v %+v", err, first)
	}
	other := imagetest.BaseImage(t)
	moving := opts.Repository.Tag("cpu-v3")
	if err := remote.Write(moving, other); err != nil {
		t.Fatal(err)
	}
	reg.Counter.Reset()
	again, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil || again[0].Err != nil {
		t.Fatalf("second publish: %v %+v", err, again)
	}
	if strings.Join(again[0].Moved, ",") != "cpu-v3" {
		t.Errorf("Moved = %q, want [cpu-v3]", again[0].Moved)
	}
	if w := reg.Counter.WriteRequests(); len(w) != 1 || !strings.HasPrefix(w[0], "PUT ") || !strings.HasSuffix(w[0], "/manifests/cpu-v3") {
		t.Errorf("writes = %q, want one manifest PUT of cpu-v3", w)
	}
	d, err := remote.Head(moving)
	if err != nil || d.Digest.String() != first[0].Digest {
		t.Errorf("cpu-v3 = %v (%v), want %s", d, err, first[0].Digest)
	}
}

func TestPublishRefusesToOverwriteAForeignIdentityTag(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newFixture(t, "cpu-v3")
	opts := optsFor(t, reg.Host)
	tmpl, _ := ParseTemplates(nil)
	tags, err := tmpl.Render(DataOf(fx.plans[0], "test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(opts.Repository.Tag(tags[0]), imagetest.BaseImage(t)); err != nil {
		t.Fatal(err)
	}
	reg.Counter.Reset()
	res, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "refusing to overwrite") || !strings.Contains(res[0].Err.Error(), tags[0]) {
		t.Errorf("error = %v, want a refusal naming %s", res[0].Err, tags[0])
	}
	if w := reg.Counter.Writes(); w != 0 || fx.calls.Load() != 0 {
		t.Errorf("%d writes, %d builds; want none", w, fx.calls.Load())
	}
}

func TestPublishReportsWhichTagTheRegistryRefusedAndWhy(t *testing.T) {
	tests := []struct {
		name   string
		wrap   func(http.Handler) http.Handler
		want   []string
		digest bool // whether some tags still got written
	}{
		{"403 on the moving tag's manifest", publishtest.Refuse(http.MethodPut, "/manifests/cpu-v3", http.StatusForbidden, "DENIED", "tag cpu-v3 is protected"),
			[]string{"pushing", "/llbuild/llama-server:cpu-v3", "DENIED", "tag cpu-v3 is protected"}, true},
		{"500 on every manifest", publishtest.Refuse(http.MethodPut, "/manifests/", http.StatusInternalServerError, "", ""),
			[]string{"pushing", "/llbuild/llama-server:cpu-v3-cpu", "500 Internal Server Error"}, false},
		{"403 on blob uploads", publishtest.Refuse(http.MethodPost, "/blobs/uploads", http.StatusForbidden, "DENIED", "quota exceeded"),
			[]string{"pushing", ":cpu-v3-cpu", "quota exceeded"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := publishtest.Memory(t, tt.wrap)
			fx := newFixture(t, "cpu-v3")
			opts := optsFor(t, reg.Host)
			res, err := Publish(context.Background(), fx.plans, opts, fx.images)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Err == nil {
				t.Fatalf("publish succeeded against a refusing registry: %+v", res[0])
			}
			for _, w := range tt.want {
				if !strings.Contains(res[0].Err.Error(), w) {
					t.Errorf("error = %v, want it to contain %q", res[0].Err, w)
				}
			}
			// The identity tag is written last: a refused push never leaves it behind.
			if _, err := remote.Head(opts.Repository.Tag(res[0].Tags[0])); err == nil {
				t.Errorf("identity tag %s exists after a failed push", res[0].Tags[0])
			}
		})
	}
}

func TestPublishWithWrongCredentialsFailsWithoutQuotingThem(t *testing.T) {
	reg := publishtest.Memory(t, publishtest.BasicAuth("bot", "right-password"))
	fx := newFixture(t, "cpu-v3")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	creds := &Credentials{Host: reg.Host, User: "bot", Password: "wrong-password-123"}
	opts := optsFor(t, reg.Host, remote.WithAuthFromKeychain(Keychain(creds)))
	res, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil {
		t.Fatal("publish succeeded with the wrong password")
	}
	msg := NewRedactor(creds).Redact(res[0].Err.Error())
	if !strings.Contains(msg, "UNAUTHORIZED") || strings.Contains(msg, "wrong-password-123") {
		t.Errorf("redacted error = %q, want UNAUTHORIZED and no password", msg)
	}
	if !strings.Contains(res[0].Err.Error(), "wrong-password-123") {
		t.Log("note: the registry's body did not echo the password, so redaction was not exercised here")
	}
	if fx.calls.Load() != 0 {
		t.Error("a plan was built although the registry could not be read")
	}

	creds.Password = "right-password"
	opts = optsFor(t, reg.Host, remote.WithAuthFromKeychain(Keychain(creds)))
	if res, err := Publish(context.Background(), fx.plans, opts, fx.images); err != nil || res[0].Err != nil {
		t.Errorf("publish with the right password: %v %v", err, res[0].Err)
	}
}

func TestPublishUsesTheDockerConfig(t *testing.T) {
	reg := publishtest.Memory(t, publishtest.BasicAuth("docker-user", "docker-pass"))
	fx := newFixture(t, "cpu-v3")
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	cfg := `{"auths":{"` + reg.Host + `":{"auth":"` + "ZG9ja2VyLXVzZXI6ZG9ja2VyLXBhc3M=" + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := optsFor(t, reg.Host, remote.WithAuthFromKeychain(Keychain(nil)))
	res, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish with the Docker config's credentials: %v %v", err, res[0].Err)
	}
	if _, err := remote.Head(opts.Repository.Tag("cpu-v3"), remote.WithAuth(&authn.Basic{Username: "docker-user", Password: "docker-pass"})); err != nil {
		t.Errorf("cpu-v3 not readable after publish: %v", err)
	}
}

func TestPublishChecksTemplatesBeforeContactingTheRegistry(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newFixture(t, "cpu-v3")
	tmpl, err := ParseTemplates([]string{"{{.Target}}-{{.ShortHash}}", "{{.Target}}:latest"})
	if err != nil {
		t.Fatal(err)
	}
	opts := optsFor(t, reg.Host)
	opts.Templates = tmpl
	_, err = Publish(context.Background(), fx.plans, opts, fx.images)
	if err == nil || !strings.Contains(err.Error(), `holds ':'`) {
		t.Errorf("Publish() error = %v, want the invalid tag named", err)
	}
	if n := len(reg.Counter.Requests); n != 0 || fx.calls.Load() != 0 {
		t.Errorf("%d requests and %d builds before the template error, want none", n, fx.calls.Load())
	}
}

func TestPublishStopsWhenCancelled(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newFixture(t, "cpu-v3")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Publish(ctx, fx.plans, optsFor(t, reg.Host), fx.images)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "context canceled") || fx.calls.Load() != 0 {
		t.Errorf("result %+v after %d builds, want a cancellation error and no build", res[0], fx.calls.Load())
	}
}

func TestWriteDigestFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "digests.tsv")
	if err := os.WriteFile(f, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	results := []Result{
		{Target: "olares-one", Ref: "r/x@sha256:aa"},
		{Target: "b70", Err: os.ErrInvalid},
		{Target: "cpu-v3", Ref: "r/x@sha256:bb"},
	}
	if err := atomicfile.WriteFile(f, DigestLines(results), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if want := "olares-one\tr/x@sha256:aa\ncpu-v3\tr/x@sha256:bb\n"; string(b) != want {
		t.Errorf("digest file = %q, want %q", b, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "missing", "d.tsv"), []byte("x"), 0o644); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
	if b, _ := os.ReadFile(f); len(b) == 0 {
		t.Error("a failed write damaged the previous file")
	}
}
