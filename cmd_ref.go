package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/pipeline"
)

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
