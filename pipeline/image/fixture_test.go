package image

import (
	"context"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/hostexec"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

// Two host builds of the fixture in separate directories give the same image digest: the
// compiler's output, the artifacts and the layer are all reproducible.
func TestImagesOfTwoFixtureBuildsAreIdentical(t *testing.T) {
	fixture.NeedTools(t, "cmake", "ninja", "g++", "git")
	base := imagetest.BaseImage(t)
	series := fixture.Patches(t, "0001-server-greeting.patch")
	var digests []string
	for i := 0; i < 2; i++ {
		ex, err := hostexec.New(hostexec.Options{Source: fixture.Source(), WorkDir: t.TempDir(), CacheDir: t.TempDir(), Series: series, Builder: pipeline.Builder{Version: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		plan := planFor(t, base, "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON")
		dir, err := ex.Build(context.Background(), plan, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		a, err := artifacts.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadBase(context.Background(), "oci-layout:"+imagetest.WriteLayout(t, base), plan.Images.Runtime)
		if err != nil {
			t.Fatal(err)
		}
		img, err := Assemble(loaded, a)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Image(img); err != nil {
			t.Fatalf("validate.Image() = %v", err)
		}
		d, _ := img.Digest()
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("image digests of two builds: %s and %s, want one", digests[0], digests[1])
	}
}
