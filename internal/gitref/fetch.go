package gitref

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
)

var hexCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FetchRef says where ref is resolved: --source when it is a git repository, else a cache of
// the recipe's source holding its commits (no trees or files: a commit's time and its count of
// ancestors are all a plan needs), fetched now.
func FetchRef(ctx context.Context, ref, source, url string) (string, error) {
	if source != "" {
		if IsRepository(ctx, source) {
			return source, nil
		}
		return "", inputerr.Errorf("--ref %s needs the history: --source %s is not a git repository (give a checkout or mirror, or leave --source out to fetch from %s)", ref, source, url)
	}
	if url == "" {
		return "", inputerr.Errorf("--ref %s: the recipe names no source URL to fetch it from; give --source with a git mirror", ref)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(url))
	dir := filepath.Join(cache, "llbuild", "refs", hex.EncodeToString(sum[:8])+".git")
	if !IsRepository(ctx, dir) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if _, err := Git(ctx, dir, "init", "--quiet", "--bare"); err != nil {
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
		_, err := Git(ctx, dir, args...)
		if err != nil && strings.Contains(err.Error(), "filter") {
			// a server without partial clone: the whole history, once
			_, err = Git(ctx, dir, "fetch", "--quiet", "--no-tags", url, s)
		}
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", inputerr.Errorf("--ref %s: fetching it from %s: %v (give --source with a mirror that holds it)", ref, redactURL(url), errors.Join(errs...))
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
