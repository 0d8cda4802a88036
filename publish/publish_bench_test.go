package publish

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
	"github.com/llbuild/llbuild/publish/publishtest"
)

// BenchmarkPublish compares a publish that pushes (a fresh repository each time) with one
// that finds the plan already published, against the in-memory registry over loopback HTTP.
// The image is assembled once, outside the timing: this measures registry traffic only.
func BenchmarkPublish(b *testing.B) {
	base := imagetest.BaseImage(b)
	p := resolve(b, publishtest.Target(b, "olares-one", base, nil))
	a := publishtest.ServerArtifacts(b, b.TempDir(), p)
	img, err := image.Assemble(base, a)
	if err != nil {
		b.Fatal(err)
	}
	images := func(context.Context, []*pipeline.Plan) []Built { return []Built{{Image: img}} }
	reg := publishtest.Memory(b, nil)
	run := func(b *testing.B, repo string) {
		r, err := name.NewRepository(reg.Host + "/" + repo)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Publish(context.Background(), []*pipeline.Plan{p}, Options{Repository: r}, images)
		if err != nil || res[0].Err != nil {
			b.Fatal(err, res[0].Err)
		}
	}
	b.Run("push", func(b *testing.B) {
		for i := range b.N {
			run(b, fmt.Sprintf("bench/push-%d", i))
		}
	})
	b.Run("already-published", func(b *testing.B) {
		run(b, "bench/noop")
		b.ResetTimer()
		for range b.N {
			run(b, "bench/noop")
		}
	})
}
