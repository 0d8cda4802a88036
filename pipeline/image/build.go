package image

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/progress"
)

// Output says where Build sends the image and how it reports.
type Output struct {
	// File, if set, receives the image as an OCI archive (a path ending in / as an OCI layout).
	File string
	// Push lists the references the image is pushed to.
	Push []string
	// Log gets what Build does, with the target; nil logs nothing.
	Log *slog.Logger
	// Term and Every are where and how often writing and pushing report their bytes (a CUDA
	// image takes minutes): Term's status line, or a log line every Every where Term is nil.
	Term  *progress.Term
	Every time.Duration
}

// Build assembles the runtime image from the artifacts in dir on base, writes and pushes it
// as out asks, and returns its digest.
func Build(ctx context.Context, dir string, base v1.Image, out Output) (string, error) {
	a, err := artifacts.Open(dir)
	if err != nil {
		return "", err
	}
	p, err := PlanOf(a)
	if err != nil {
		return "", err
	}
	img, err := Assemble(base, a)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	log := out.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("target", p.Target)
	rep := progress.Reporter{Term: out.Term, Log: log, Every: out.Every}
	if f := out.File; f != "" {
		log.Info("exporting image", "to", f)
		var pr Progress
		task := rep.Start(pr.ExportState("to", f))
		err := WriteOCI(f, img, "llama-server:"+p.Target, Counting(&pr))
		task.Stop()
		if err != nil {
			return "", fmt.Errorf("writing %s: %w", f, err)
		}
	}
	if refs := out.Push; len(refs) > 0 {
		log.Info("pushing image", "to", strings.Join(refs, ","))
		var pr Progress
		task := rep.Start(pr.PushState("to", strings.Join(refs, ",")))
		err := PushCounting(ctx, img, refs, &pr)
		task.Stop()
		if err != nil {
			return "", err
		}
	}
	return digest.String(), nil
}
