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
	"github.com/llbuild/llbuild/internal/shellquote"
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
	var errs []error
	for _, s := range Refspecs(ref) {
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

// Refspecs are the refspecs that fetch ref to where Resolve finds it by that name, to try in
// order: a full hash as itself; refs/X to refs/X; a pull request head (pull/N/head) to
// refs/pull/N/head, which git's lookup of pull/N/head tries; a tag or a branch to refs/tags/X or
// refs/heads/X, whichever upstream has. A plain fetch of a name only writes FETCH_HEAD, which
// Resolve never reads.
func Refspecs(ref string) []string {
	switch {
	case hexCommit.MatchString(ref):
		return []string{ref}
	case strings.HasPrefix(ref, "refs/"):
		return []string{"+" + ref + ":" + ref}
	case strings.HasPrefix(ref, "pull/"):
		return []string{"+refs/" + ref + ":refs/" + ref}
	}
	return []string{"+refs/tags/" + ref + ":refs/tags/" + ref, "+refs/heads/" + ref + ":refs/heads/" + ref}
}

// FetchHint says how to fetch ref into repo so that Resolve (or any lookup of the name by git
// rev-parse) finds it: "fetch it where llbuild looks: COMMAND", each command last or followed
// by a space, so that it can be copied as it is.
func FetchHint(repo, ref string) string {
	cmd := func(spec string) string {
		return "git -C " + shellquote.Quote(repo) + " fetch origin " + shellquote.Quote(spec)
	}
	if hexPrefix.MatchString(ref) && !hexCommit.MatchString(ref) {
		return "give the full hash, or fetch the history that holds it: git -C " + shellquote.Quote(repo) + " fetch origin"
	}
	specs := Refspecs(ref)
	if len(specs) == 1 {
		return "fetch it where llbuild looks: " + cmd(specs[0])
	}
	return "fetch it where llbuild looks: " + cmd(specs[0]) + " for a tag; " + cmd(specs[1]) + " for a branch"
}

var hexPrefix = regexp.MustCompile(`^[0-9a-f]{4,40}$`)

// redactURL drops credentials from a URL for messages.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "@"); j >= 0 {
			return u[:i+3] + "***@" + u[i+3+j+1:]
		}
	}
	return u
}
