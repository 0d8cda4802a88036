package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
)

// Options say where and how to publish.
type Options struct {
	// Repository receives every target's image, told apart by tag.
	Repository name.Repository
	Templates  *Templates
	// Version is llbuild's version, for templates.
	Version string
	// Remote are options for every registry call: authentication, transport.
	Remote []remote.Option
	// Jobs bounds how many targets talk to the registry at once (at least 1).
	Jobs   int
	Logger *slog.Logger
	// Progress is stderr's status line where it is a terminal: each push's bytes are drawn
	// there instead of logged every 30 s.
	Progress *progress.Term
	// Gate, when set, must admit each image, by its digest, before it is pushed or any tag is
	// moved to it. An image the registry already holds for the plan is made again from the
	// plan's artifacts (not uploaded) so that the gate judges exactly that digest.
	Gate Admitter
}

// Admitter admits an image of a plan for publishing, or says why not.
type Admitter interface {
	Admit(ctx context.Context, p *pipeline.Plan, digest string) error
}

// ImageFunc makes the runtime images of plans that are not yet published, one result per
// plan in the order given. It is called once per Publish, and not at all when every plan is
// already in the registry: that is where building happens.
type ImageFunc func(ctx context.Context, plans []*pipeline.Plan) []Built

// Built is an ImageFunc's result for one plan.
type Built struct {
	Image v1.Image
	Err   error
}

// Result is the outcome of publishing one plan.
type Result struct {
	Target string
	// Tags are the rendered tags, identity tag first.
	Tags []string
	// Digest is the image manifest's digest (sha256:...).
	Digest string
	// Ref is Repository@Digest.
	Ref string
	// Existing is true when the identity tag was already there: nothing was built or
	// uploaded.
	Existing bool
	// Moved are the tags pointed at Digest because they pointed elsewhere or nowhere.
	Moved []string
	Err   error
}

// Publish puts each plan's image in the registry under its tags and returns one Result per
// plan in plan order.
//
// Idempotency: when the identity tag (the first template's, which names the plan hash)
// already exists and its image carries the plan's hash label, the plan is not built and no
// blob is uploaded; its digest is reported, and any other tag that does not point at it is
// moved to it, because publishing a plan means "this is now the image for these tags" even
// when the image itself is old. When it does not exist, the image is made by images and
// pushed under every tag, the identity tag last, so that its presence means every tag was
// written; a run that stopped half way is finished by the next.
//
// Tags are rendered and checked before anything else; a bad template fails the whole call
// before the registry is contacted.
func Publish(ctx context.Context, plans []*pipeline.Plan, opts Options, images ImageFunc) ([]Result, error) {
	if opts.Templates == nil {
		t, err := ParseTemplates(nil)
		if err != nil {
			return nil, err
		}
		opts.Templates = t
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	tags, err := opts.Templates.RenderAll(plans, opts.Version)
	if err != nil {
		return nil, err
	}
	for i, p := range plans {
		if !p.Reproducible {
			opts.Logger.Warn("the plan is not reproducible: its plan-hash tag does not pin the base image's content", "target", p.Target, "warnings", strings.Join(p.Warnings, "; "))
		}
		opts.Logger.Info("publishing", "target", p.Target, "plan", p.ShortHash(), "repository", opts.Repository.Name(), "tags", strings.Join(tags[i], ","))
	}
	jobs := max(opts.Jobs, 1)
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)
	results := make([]Result, len(plans))
	existing := make([]*remote.Descriptor, len(plans))

	// Which plans are published already?
	var g errgroup.Group
	g.SetLimit(jobs)
	for i, p := range plans {
		results[i] = Result{Target: p.Target, Tags: tags[i]}
		g.Go(func() error {
			r := &results[i]
			d, err := lookup(opts.Repository.Tag(r.Tags[0]), p, ropts)
			if err != nil {
				r.Err = fmt.Errorf("target %s: %w", p.Target, err)
				return nil
			}
			if d != nil {
				r.Existing = true
				r.Digest = d.Digest.String()
				opts.Logger.InfoContext(ctx, "already published", "target", p.Target, "tag", r.Tags[0], "digest", r.Digest)
				if opts.Gate != nil {
					existing[i] = d // judged before any tag moves to it
					return nil
				}
				r.Moved, r.Err = retag(opts.Repository, r.Tags[1:], d, ropts)
				if r.Err != nil {
					r.Err = fmt.Errorf("target %s: %w", p.Target, r.Err)
				}
			}
			return nil
		})
	}
	_ = g.Wait()

	var todo []int
	for i := range results {
		if results[i].Err == nil && (!results[i].Existing || existing[i] != nil) {
			todo = append(todo, i)
		}
	}
	if len(todo) > 0 && images == nil {
		return nil, errors.New("publish: plans need building but no image maker was given")
	}
	if len(todo) > 0 {
		sub := make([]*pipeline.Plan, len(todo))
		for k, i := range todo {
			sub[k] = plans[i]
		}
		built := images(ctx, sub)
		if len(built) != len(sub) {
			return nil, fmt.Errorf("publish: the image maker returned %d results for %d plans", len(built), len(sub))
		}
		for k, i := range todo {
			if built[k].Err != nil {
				results[i].Err = fmt.Errorf("target %s: %w", plans[i].Target, built[k].Err)
			}
		}
		if opts.Gate != nil {
			admit(ctx, opts, plans, todo, built, existing, results)
		}
		upload := make([]Built, len(built))
		for k, i := range todo {
			if results[i].Err == nil && existing[i] == nil {
				upload[k] = built[k]
			} else {
				upload[k] = Built{Err: errors.New("not uploaded")}
			}
		}
		for k, err := range uploadShared(ctx, opts, upload, jobs) {
			if i := todo[k]; results[i].Err == nil {
				results[i].Err = fmt.Errorf("target %s: %w", plans[i].Target, err)
			}
		}
		for k, i := range todo {
			p, r, b := plans[i], &results[i], built[k]
			if r.Err != nil {
				continue
			}
			if d := existing[i]; d != nil {
				g.Go(func() error {
					if r.Moved, r.Err = retag(opts.Repository, r.Tags[1:], d, ropts); r.Err != nil {
						r.Err = fmt.Errorf("target %s: %w", p.Target, r.Err)
					}
					return nil
				})
				continue
			}
			g.Go(func() error {
				r.Digest, r.Err = push(ctx, opts, p, b.Image, r.Tags)
				if r.Err != nil {
					r.Err = fmt.Errorf("target %s: %w", p.Target, r.Err)
					return nil
				}
				r.Moved = append([]string(nil), r.Tags...)
				opts.Logger.InfoContext(ctx, "pushed", "target", p.Target, "tags", len(r.Tags), "digest", r.Digest)
				return nil
			})
		}
		_ = g.Wait()
	}
	for i, r := range results {
		if r.Err == nil {
			results[i].Ref = opts.Repository.Name() + "@" + r.Digest
			if r.Existing {
				opts.Logger.Info("already published", "target", r.Target, "ref", results[i].Ref, "moved", strings.Join(r.Moved, ","))
			}
		}
	}
	return results, nil
}

// admit asks the gate about each image made: one the registry holds must be the image its
// artifacts make (else the verdict would be for another image than the tags would get), and
// nothing is pushed or moved for one the gate does not admit.
func admit(ctx context.Context, opts Options, plans []*pipeline.Plan, todo []int, built []Built, existing []*remote.Descriptor, results []Result) {
	for k, i := range todo {
		p, r := plans[i], &results[i]
		if r.Err != nil {
			continue
		}
		d, err := built[k].Image.Digest()
		if err != nil {
			r.Err = fmt.Errorf("target %s: digest of the image: %w", p.Target, err)
			continue
		}
		if e := existing[i]; e != nil && e.Digest != d {
			r.Err = fmt.Errorf("target %s: the registry's image for plan %s is %s, but its artifacts here make %s: the gate cannot judge the image the tags would point at; nothing moved (rebuild the artifacts with llbuild build, or publish without the gate)", p.Target, p.ShortHash(), e.Digest, d)
			continue
		}
		if err := opts.Gate.Admit(ctx, p, d.String()); err != nil {
			what := "not pushed"
			if existing[i] != nil {
				what = "no tag moved to the image the registry holds"
			}
			r.Err = fmt.Errorf("target %s: %s: %w", p.Target, what, err)
		}
	}
}

// lookup finds the image under the identity tag; nil when the tag does not exist. An image
// there that was not built from p is an error: the tag is not publish's to overwrite.
func lookup(ref name.Tag, p *pipeline.Plan, ropts []remote.Option) (*remote.Descriptor, error) {
	d, err := remote.Get(ref, ropts...)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up %s: %w%s", ref, err, authHint(err))
	}
	if !d.MediaType.IsImage() {
		return nil, fmt.Errorf("%s is a %s, not an image manifest: not llbuild's, so not overwritten", ref, d.MediaType)
	}
	img, err := d.Image()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config of %s: %w", ref, err)
	}
	if got := cf.Config.Labels[image.LabelPlanHash]; got != p.Hash {
		return nil, fmt.Errorf("%s exists but its %s label is %q, not plan %s: refusing to overwrite a tag llbuild did not write for this plan", ref, image.LabelPlanHash, got, p.Hash)
	}
	return d, nil
}

// retag points each tag at d unless it already points there, and returns the tags it moved.
func retag(repo name.Repository, tags []string, d *remote.Descriptor, ropts []remote.Option) ([]string, error) {
	var moved []string
	for _, t := range tags {
		ref := repo.Tag(t)
		cur, err := remote.Head(ref, ropts...)
		if err == nil && cur.Digest == d.Digest {
			continue
		}
		var te *transport.Error
		if err != nil && !(errors.As(err, &te) && te.StatusCode == http.StatusNotFound) {
			return moved, fmt.Errorf("looking up %s: %w", ref, err)
		}
		if err := remote.Tag(ref, d, ropts...); err != nil {
			return moved, fmt.Errorf("tagging %s: %w", ref, err)
		}
		moved = append(moved, t)
	}
	return moved, nil
}

// uploadShared uploads, once each, the layers that more than one of the built images
// holds, before any image is pushed, and returns the error of each image (by index) whose
// shared layer could not be uploaded. Pushed concurrently, two images would each find the
// layer missing and upload it at the same time, and registries do not all survive that:
// distribution's filesystem storage rewrites the repository's link file for the blob in
// place, and a manifest checked meanwhile reads it empty (DIGEST_INVALID and
// MANIFEST_BLOB_UNKNOWN on the manifest PUT). Uploaded first, the layer is found by every
// image's push and written by none.
func uploadShared(ctx context.Context, opts Options, built []Built, jobs int) map[int]error {
	type shared struct {
		layer  v1.Layer
		images []int
	}
	byDigest := map[v1.Hash]*shared{}
	var order []v1.Hash
	failed := map[int]error{}
	for k, b := range built {
		if b.Err != nil {
			continue
		}
		layers, err := b.Image.Layers()
		if err != nil {
			failed[k] = fmt.Errorf("listing the image's layers: %w", err)
			continue
		}
		seen := map[v1.Hash]bool{}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				failed[k] = fmt.Errorf("digest of a layer: %w", err)
				break
			}
			if seen[d] {
				continue
			}
			seen[d] = true
			if byDigest[d] == nil {
				byDigest[d] = &shared{layer: l}
				order = append(order, d)
			}
			byDigest[d].images = append(byDigest[d].images, k)
		}
	}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(jobs)
	for _, d := range order {
		s := byDigest[d]
		if len(s.images) < 2 {
			continue
		}
		g.Go(func() error {
			if err := image.PushLayer(ctx, opts.Repository, s.layer, opts.Remote...); err != nil {
				mu.Lock()
				for _, k := range s.images {
					if failed[k] == nil {
						failed[k] = fmt.Errorf("uploading layer %s: %w%s", d, err, authHint(err))
					}
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return failed
}

// push uploads img under every tag, the identity tag (tags[0]) last, and returns its digest.
func push(ctx context.Context, opts Options, p *pipeline.Plan, img v1.Image, tags []string) (string, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("reading the image config: %w", err)
	}
	if got := cf.Config.Labels[image.LabelPlanHash]; got != p.Hash {
		return "", fmt.Errorf("the image's %s label is %q, not the plan's %s", image.LabelPlanHash, got, p.Hash)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	refs := make([]string, 0, len(tags))
	for _, t := range append(append([]string(nil), tags[1:]...), tags[0]) {
		refs = append(refs, opts.Repository.Tag(t).String())
	}
	// A CUDA image's upload takes minutes: it reports its bytes as it goes.
	var pr image.Progress
	task := progress.Reporter{Term: opts.Progress, Log: opts.Logger.With("target", p.Target)}.Start(pr.PushState("to", opts.Repository.String()))
	err = image.PushCounting(ctx, img, refs, &pr, opts.Remote...)
	task.Stop()
	if err != nil {
		return "", fmt.Errorf("%w%s", err, authHint(err))
	}
	return d.String(), nil
}

// authHint says where credentials come from when the registry refused them.
func authHint(err error) string {
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized {
		return " (the registry refused the credentials: they come from the Docker config, or " + EnvUser + " and " + EnvPassword + ")"
	}
	return ""
}
