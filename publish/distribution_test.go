package publish

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/llbuild/llbuild/publish/publishtest"
)

// The same push, re-find and refusal paths against a real registry server: Debian's
// docker-registry (distribution 2.8) with htpasswd authentication.
func TestPublishToDistribution(t *testing.T) {
	reg := publishtest.Distribution(t, publishtest.DistributionOptions{User: "ci", Password: "distribution-pw"})
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	fx := newFixture(t, "olares-one", "cpu-v3")
	creds := &Credentials{Host: reg.Host, User: "ci", Password: "distribution-pw"}
	auth := remote.WithAuthFromKeychain(Keychain(creds))
	opts := optsFor(t, reg.Host, auth)

	first, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range first {
		if r.Err != nil {
			t.Fatalf("%s: %v (registry log %s)", r.Target, r.Err, reg.Log)
		}
		for _, tag := range r.Tags {
			d, err := remote.Head(opts.Repository.Tag(tag), auth)
			if err != nil || d.Digest.String() != r.Digest {
				t.Errorf("%s: tag %s = %v (%v), want %s", r.Target, tag, d, err, r.Digest)
			}
		}
	}
	img, err := remote.Image(opts.Repository.Digest(first[0].Digest), auth)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := envOf(cf)["NVIDIA_REQUIRE_CUDA"]; got != "cuda>=13.1" {
		t.Errorf("olares-one NVIDIA_REQUIRE_CUDA = %q, want cuda>=13.1", got)
	}
	if got := cf.Config.Labels["io.llbuild.cuda.architectures"]; got != "120a" {
		t.Errorf("olares-one io.llbuild.cuda.architectures = %q, want 120a", got)
	}

	reg.Counter.Reset()
	second, err := Publish(context.Background(), fx.plans, opts, fx.images)
	if err != nil {
		t.Fatal(err)
	}
	if w := reg.Counter.WriteRequests(); len(w) != 0 {
		t.Errorf("the second publish wrote %v, want nothing", w)
	}
	for i := range second {
		if second[i].Err != nil || !second[i].Existing || second[i].Digest != first[i].Digest {
			t.Errorf("second publish of %s = %+v, want existing %s", second[i].Target, second[i], first[i].Digest)
		}
	}
	if fx.calls.Load() != 1 {
		t.Errorf("images made %d times, want 1", fx.calls.Load())
	}

	t.Run("wrong credentials", func(t *testing.T) {
		bad := &Credentials{Host: reg.Host, User: "ci", Password: "not-the-pw"}
		res, err := Publish(context.Background(), fx.plans[1:], optsFor(t, reg.Host, remote.WithAuthFromKeychain(Keychain(bad))), fx.images)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err == nil {
			t.Fatal("publish succeeded with a wrong password")
		}
		msg := NewRedactor(bad).Redact(res[0].Err.Error())
		if !strings.Contains(msg, "UNAUTHORIZED") || strings.Contains(msg, "not-the-pw") {
			t.Errorf("error = %q, want UNAUTHORIZED and no password", msg)
		}
	})
	t.Run("anonymous", func(t *testing.T) {
		_, err := remote.Head(opts.Repository.Tag("cpu-v3"), remote.WithAuth(authn.Anonymous))
		if err == nil {
			t.Error("the registry answered an anonymous client: authentication is not on, so the credential tests prove nothing")
		}
	})
}
