package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
)

// FromArtifacts makes the runtime images of plans (an ImageFunc) from their artifacts: those
// already under Out when they verify and are of the plan, otherwise a build.
type FromArtifacts struct {
	// Out is the artifact directory (artifacts.Dir's root).
	Out string
	// Executor starts the executor for the plans that need building; it is called only when
	// one does.
	Executor func() (pipeline.Executor, error)
	// Jobs is how many plans build at once.
	Jobs int
	// RuntimeBase, if set, is where the runtime base image comes from instead of the plan's
	// reference (image.LoadBase's spec).
	RuntimeBase string
	Remote      []remote.Option
	Logger      *slog.Logger
}

// Images is an ImageFunc.
func (f FromArtifacts) Images(ctx context.Context, plans []*pipeline.Plan) []Built {
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	built := make([]Built, len(plans))
	dirs := make([]string, len(plans))
	var need []*pipeline.Plan
	var needAt []int
	for i, p := range plans {
		dir := artifacts.Dir(f.Out, p.Target, p.Hash)
		a, err := artifacts.Open(dir)
		switch {
		case err == nil && a.Manifest.PlanHash == p.Hash:
			log.Info("reusing artifacts", "target", p.Target, "dir", dir)
			dirs[i] = dir
			continue
		case err == nil:
			log.Warn("artifacts are for another plan; rebuilding", "dir", dir, "have", a.Manifest.PlanHash, "want", p.Hash)
		case !errors.Is(err, os.ErrNotExist):
			log.Warn("artifacts do not verify; rebuilding", "dir", dir, "err", err)
		}
		need = append(need, p)
		needAt = append(needAt, i)
	}
	if len(need) > 0 {
		ex, err := f.Executor()
		if err != nil {
			for _, i := range needAt {
				built[i].Err = err
			}
		} else {
			for k, r := range pipeline.BuildAll(ctx, ex, need, f.Out, f.Jobs) {
				dirs[needAt[k]], built[needAt[k]].Err = r.Dir, r.Err
			}
		}
	}
	for i, p := range plans {
		if built[i].Err != nil {
			continue
		}
		built[i].Image, built[i].Err = f.image(ctx, dirs[i], p)
	}
	return built
}

// image assembles the runtime image of the artifacts in dir, which must be want's.
func (f FromArtifacts) image(ctx context.Context, dir string, want *pipeline.Plan) (v1.Image, error) {
	a, err := artifacts.Open(dir)
	if err != nil {
		return nil, err
	}
	p, err := image.PlanOf(a)
	if err != nil {
		return nil, err
	}
	if p.Hash != want.Hash {
		return nil, fmt.Errorf("%s holds plan %s, want %s", dir, p.ShortHash(), want.ShortHash())
	}
	b, err := image.LoadBase(ctx, f.RuntimeBase, p.Images.Runtime, f.Remote...)
	if err != nil {
		return nil, err
	}
	img, err := image.Assemble(b, a)
	if err != nil {
		return nil, fmt.Errorf("assembling the image: %w", err)
	}
	return img, nil
}

// PublishArtifacts is Publish with the images made by from, which takes its Remote, Jobs and
// Logger from opts.
func PublishArtifacts(ctx context.Context, plans []*pipeline.Plan, opts Options, from FromArtifacts) ([]Result, error) {
	from.Remote, from.Jobs, from.Logger = opts.Remote, opts.Jobs, opts.Logger
	return Publish(ctx, plans, opts, from.Images)
}
