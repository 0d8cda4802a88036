package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/recipes"
)

// refFlag builds another commit than the recipe's pin, named as upstream names it.
var refFlag = &cli.StringFlag{Name: "ref", Usage: "build llama.cpp at `REF` instead of the recipe's pinned commit: a commit, a release tag (b10573), a branch or a PR head (pull/23398/head), resolved in --source when it is a git repository, else fetched (commits only) from the recipe's source URL; its commit time and build number come from the history"}

// serverInputs is what a server build is made from: the recipe (its source moved to --ref) and
// the series.
type serverInputs struct {
	recipe *recipes.Recipe
	series []patches.Patch
	// plainSource is --source when it is a plain directory, whose tree hash (tree, made by
	// resolveServerPlans once the plans resolve without it) is part of the plan.
	plainSource, tree string
	log               *slog.Logger
}

// serverInputsOf reads --recipe, --series and --ref; source is --source (may be empty).
// builtinNames lets --recipe name a built-in recipe (plan's flag) rather than only a file.
func serverInputsOf(c *cli.Context, source string, builtinNames bool) (*serverInputs, error) {
	name := c.String("recipe")
	if name == "" {
		name = "server"
	}
	if !builtinNames && name != "server" && !strings.HasSuffix(name, ".yaml") {
		return nil, usagef("--recipe takes a server recipe FILE.yaml, got %q (the built-in one is used without the flag)", name)
	}
	r, err := recipes.Load(name)
	if err != nil {
		return nil, usageError{err}
	}
	if r.Name != "server" {
		return nil, usagef("--recipe %s is the %q recipe; this command builds the server recipe", name, r.Name)
	}
	series, err := seriesOf(c)
	if err != nil {
		return nil, err
	}
	if ref := c.String("ref"); ref != "" {
		repo, err := refRepository(c.Context, ref, source, r.Source.URL)
		if err != nil {
			return nil, err
		}
		commit, err := gitref.Resolve(c.Context, repo, ref)
		if err != nil {
			return nil, usageError{err}
		}
		bn, err := gitref.BuildNumber(c.Context, repo, commit.Hash, &gitref.Anchor{Commit: r.Source.Commit, BuildNumber: r.Source.BuildNumber})
		if err != nil {
			return nil, usageError{err}
		}
		loggerOf(c).Info("ref resolved", "ref", ref, "commit", commit.Hash, "subject", commit.Subject, "build", bn, "in", repo)
		r.Source.Commit, r.Source.Epoch, r.Source.BuildNumber, r.Source.Ref = commit.Hash, commit.Time, bn, ref
	}
	in := &serverInputs{recipe: r, series: series, log: loggerOf(c)}
	if source != "" {
		if st, err := os.Stat(source); err == nil && st.IsDir() && !gitref.IsRepository(c.Context, source) {
			in.plainSource = source
		}
	}
	return in, nil
}

var hexCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// refRepository is where ref is resolved: --source when it is a git repository, else a cache of
// the recipe's source holding its commits (no trees or files: a commit's time and its count of
// ancestors are all a plan needs), fetched now.
func refRepository(ctx context.Context, ref, source, url string) (string, error) {
	if source != "" {
		if gitref.IsRepository(ctx, source) {
			return source, nil
		}
		return "", usagef("--ref %s needs the history: --source %s is not a git repository (give a checkout or mirror, or leave --source out to fetch from %s)", ref, source, url)
	}
	if url == "" {
		return "", usagef("--ref %s: the recipe names no source URL to fetch it from; give --source with a git mirror", ref)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(url))
	dir := filepath.Join(cache, "llbuild", "refs", hex.EncodeToString(sum[:8])+".git")
	if !gitref.IsRepository(ctx, dir) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if _, err := gitref.Git(ctx, dir, "init", "--quiet", "--bare"); err != nil {
			return "", err
		}
	}
	var spec []string
	switch {
	case hexCommit.MatchString(ref):
		spec = []string{ref}
	case strings.HasPrefix(ref, "refs/"):
		spec = []string{"+" + ref + ":" + ref}
	case strings.HasPrefix(ref, "pull/"):
		spec = []string{"+refs/" + ref + ":refs/" + ref}
	default:
		// a tag or a branch: whichever upstream has
		spec = []string{"+refs/tags/" + ref + ":refs/tags/" + ref, "+refs/heads/" + ref + ":refs/heads/" + ref}
	}
	var errs []error
	for _, s := range spec {
		args := []string{"fetch", "--quiet", "--no-tags", "--filter=tree:0", url, s}
		_, err := gitref.Git(ctx, dir, args...)
		if err != nil && strings.Contains(err.Error(), "filter") {
			// a server without partial clone: the whole history, once
			_, err = gitref.Git(ctx, dir, "fetch", "--quiet", "--no-tags", url, s)
		}
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", usagef("--ref %s: fetching it from %s: %v (give --source with a mirror that holds it)", ref, redactURL(url), errors.Join(errs...))
}

// redactURL drops credentials from a URL for messages.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "@"); j >= 0 {
			return u[:i+3] + "***@" + u[i+3+j+1:]
		}
	}
	return u
}

// targetSpec is a target named on the command line: built-in by name, or a file.
type targetSpec struct{ name, file string }

// targetSpecsOf reads the targets of build and publish: --target names (comma-separated or
// repeated) in order, then the target files.
func targetSpecsOf(names, files []string) []targetSpec {
	var specs []targetSpec
	for _, t := range names {
		for _, n := range strings.Split(t, ",") {
			if n = strings.TrimSpace(n); n != "" {
				specs = append(specs, targetSpec{name: n})
			}
		}
	}
	for _, f := range files {
		specs = append(specs, targetSpec{file: f})
	}
	return specs
}

// resolveServerPlans resolves each target's plan of the server recipe, in order: the one place
// build and publish turn targets into plans. A target given twice is a usage error; resolution
// errors of several targets are reported together.
func resolveServerPlans(specs []targetSpec, in *serverInputs, allowFloating bool) ([]*pipeline.Plan, error) {
	plans, err := resolveServerPlansWith(specs, in, allowFloating, "")
	if err != nil || in.plainSource == "" {
		return plans, err
	}
	// A plain directory's tree is part of the plan: read once the plans resolve without it, so
	// that a usage error is said before the source is read.
	if in.tree == "" {
		if in.tree, err = pipeline.TreeHash(in.plainSource); err != nil {
			return nil, fmt.Errorf("hashing the source directory %s: %w", in.plainSource, err)
		}
		if in.log != nil {
			in.log.Info("the source is a plain directory: its tree hash is part of the plan", "source", in.plainSource, "tree", in.tree)
		}
	}
	return resolveServerPlansWith(specs, in, allowFloating, in.tree)
}

func resolveServerPlansWith(specs []targetSpec, in *serverInputs, allowFloating bool, tree string) ([]*pipeline.Plan, error) {
	var plans []*pipeline.Plan
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		t, err := loadTarget(s.name, s.file)
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		p, err := pipeline.Resolve(t, in.recipe, in.series, nil, pipeline.Options{AllowFloating: allowFloating, SourceTree: tree})
		if err != nil {
			if err := usageOf(err); errors.As(err, new(usageError)) {
				return nil, err
			}
			errs = append(errs, fmt.Errorf("target %s: %w", t.Name, err))
			continue
		}
		if seen[p.Target] {
			return nil, usagef("target %s is given twice", p.Target)
		}
		seen[p.Target] = true
		plans = append(plans, p)
	}
	return plans, errors.Join(errs...)
}
