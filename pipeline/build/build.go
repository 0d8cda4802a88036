package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/jsonout"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/image"
)

// Options is what Run is asked to do with the plans.
type Options struct {
	// Out is the artifact directory; Jobs how many plans build at once.
	Out  string
	Jobs int
	// ImageOut and Push ask for the runtime image (one plan only): an OCI archive or layout
	// written to ImageOut, pushed to each of Push.
	ImageOut string
	Push     []string
	// RuntimeBase replaces the plan's runtime base image ("": the plan's own).
	RuntimeBase string
	// JSON reports the Results as a JSON array instead of a line per target.
	JSON bool
	Log  *slog.Logger
	// Term and Every are where and how often the image's writing and pushing report progress.
	Term  *progress.Term
	Every time.Duration
}

// Imaging says whether the runtime image is asked for.
func (o Options) Imaging() bool { return o.ImageOut != "" || len(o.Push) > 0 }

// Check refuses, as an inputerr.Error, a runtime image asked of several targets, or fewer than
// one build at once.
func (o Options) Check(targets int) error {
	if o.Imaging() && targets > 1 {
		return inputerr.Errorf("--image-out and --push take one target, got %d", targets)
	}
	if o.Jobs < 1 {
		return inputerr.Errorf("--jobs must be at least 1")
	}
	return nil
}

// Result is what came out of one plan, as the JSON report gives it.
type Result struct {
	Target   string `json:"target"`
	PlanHash string `json:"planHash"`
	Dir      string `json:"dir,omitempty"`
	Image    string `json:"image,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Run builds plans with the executor newExecutor starts (closed afterwards where it is an
// io.Closer) and, when o asks, the runtime image of each built plan; it writes to stdout a line
// per target that came out, its artifact directory or image digest, or with o.JSON the Results.
// The runtime base is checked before anything builds. Every failure is in the error, joined;
// one does not stop the other targets.
func Run(ctx context.Context, plans []*pipeline.Plan, newExecutor func() (pipeline.Executor, error), o Options, stdout io.Writer) error {
	var runtimeBase v1.Image
	if o.Imaging() {
		var err error
		// A wrong --base runtime (another digest than the plan's) must not cost a whole build first.
		if runtimeBase, err = image.LoadBase(ctx, o.RuntimeBase, plans[0].Images.Runtime); err != nil {
			return fmt.Errorf("target %s: runtime base image, checked before building: %w", plans[0].Target, err)
		}
	}
	ex, err := newExecutor()
	if err != nil {
		return err
	}
	results := pipeline.BuildAll(ctx, ex, plans, o.Out, o.Jobs)
	if cl, ok := ex.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			o.Log.Warn("closing the engine session", "err", err)
		}
	}
	var report []Result
	var errs []error
	for _, r := range results {
		b := Result{Target: r.Plan.Target, PlanHash: r.Plan.Hash, Dir: r.Dir}
		if r.Err != nil {
			errs = append(errs, r.Err)
			b.Error = r.Err.Error()
			report = append(report, b)
			continue
		}
		if o.Imaging() {
			digest, err := image.Build(ctx, r.Dir, runtimeBase, image.Output{File: o.ImageOut, Push: o.Push, Log: o.Log, Term: o.Term, Every: o.Every})
			if err != nil {
				err = fmt.Errorf("target %s: image: %w", r.Plan.Target, err)
				errs = append(errs, err)
				b.Error = err.Error()
			}
			b.Image = digest
		}
		report = append(report, b)
		switch {
		case o.JSON || b.Error != "":
		case o.Imaging():
			fmt.Fprintln(stdout, b.Image)
		default:
			fmt.Fprintln(stdout, b.Dir)
		}
	}
	if o.JSON {
		if err := jsonout.Write(stdout, report); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
