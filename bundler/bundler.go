package bundler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/llbuild/llbuild/imagebundle"
	"github.com/llbuild/llbuild/internal/digest"
	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/targets"
)

// Options is a bundle to make: its input (the target loaded), and where it goes.
type Options struct {
	In manifest.BundleInput
	// Image, when set, is the runtime image the server comes out of instead of In.Artifacts.
	Image string
	Out   manifest.BundleOutput
}

// Result is what Make wrote: the manifest's sha256, the bundle directory and archive (either
// may be ""), the target and the number of files.
type Result struct {
	ManifestSHA256 string `json:"manifestSha256"`
	Dir            string `json:"dir"`
	Archive        string `json:"archive,omitempty"`
	Target         string `json:"target"`
	Files          int    `json:"files"`
}

// Make checks the inputs, warns of what the bundle's server lacks and writes the bundle (and
// archive) as o.Out says.
func Make(ctx context.Context, log *slog.Logger, o Options) (*Result, error) {
	in, out := o.In, o.Out
	if o.Image != "" {
		server, cleanup, err := imagebundle.Server(ctx, log, o.Image, imagebundle.OutputDir(out), in.Target)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		in.Server = server
	}
	plan, err := manifest.PlanBundle(in)
	if err != nil {
		return nil, err
	}
	WarnStalePlan(log, in.Target, plan.Manifest.Build)
	manifest.WarnMissingPatches(log, plan.Manifest, in.Knobs.ScoresAlone)
	m, err := manifest.WriteBundle(ctx, plan, out)
	if err != nil {
		return nil, err
	}
	b, err := m.Encode()
	if err != nil {
		return nil, err
	}
	for _, where := range []string{out.Dir, out.Archive} {
		if where != "" {
			log.Info("bundle written", "path", where, "files", len(m.Files), "target", m.Target.Name)
		}
	}
	return &Result{digest.SHA256Hex(b), out.Dir, out.Archive, m.Target.Name, len(m.Files)}, nil
}

// WriteText writes one line per thing written, the directory first: the manifest's sha256
// and the path, as sha256sum prints them.
func (r *Result) WriteText(w io.Writer) error {
	for _, where := range []string{r.Dir, r.Archive} {
		if where == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s  %s\n", r.ManifestSHA256, where); err != nil {
			return err
		}
	}
	return nil
}

// WarnStalePlan warns when the artifacts were built from another plan than the one t and the
// built-in server recipe and series resolve to now (the recipe, the patches or the target
// changed since the build). The artifacts are still the target's, so it is not an error; a
// foreign image's server has no plan to compare.
func WarnStalePlan(log *slog.Logger, t *targets.Target, b manifest.Build) {
	if b.PlanHash == "" {
		return
	}
	// a plain directory's build: the current plan of that tree
	var src struct {
		Source struct{ Tree string }
	}
	_ = json.Unmarshal(b.Plan, &src)
	series, err := patches.Series()
	if err != nil {
		return
	}
	p, err := pipeline.ResolveRecipe(t, "server", series, pipeline.Options{AllowFloating: true, SourceTree: src.Source.Tree})
	if err != nil {
		log.Debug("cannot resolve the current plan to compare", "err", err)
		return
	}
	if p.Hash != b.PlanHash {
		log.Warn("the artifacts were built from another plan than the current one for this target (recipe, patches or target changed since)",
			"built", b.PlanHash[:min(12, len(b.PlanHash))], "current", p.ShortHash())
	}
}

// EpochFromEnv is the time stamp of a bundle archive's entries: SOURCE_DATE_EPOCH read through
// getenv and parsed by pipeline.ParseSourceDateEpoch, or the Unix epoch when it is unset.
func EpochFromEnv(getenv func(string) string) (time.Time, error) {
	s := getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	return pipeline.ParseSourceDateEpoch(s)
}
