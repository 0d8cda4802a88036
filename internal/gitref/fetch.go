package gitref

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
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
	if strings.ContainsAny(ref, "~^@:{") || strings.HasPrefix(ref, "HEAD") {
		// an expression (HEAD~99999, master^2, @{u}): no fetch makes it name a commit that
		// is not in the history already
		return "the expression names no commit in this history (it may reach past its start): give a commit, tag or branch it holds"
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

// SourceURL is the URL a build of commit from the local repository repo records as where its
// source comes from: url (the recipe's), unless repo has a remote of url's repository whose
// remote-tracking refs do not hold the commit while another remote's do (a branch of the
// user's fork, fetched beside upstream): then that remote's URL, as an https URL (scp-like and
// ssh:// forms rewritten, credentials masked; a remote of any other form, a local path among
// them, leaves url). A remote holds the commit when one of its remote-tracking refs
// (refs/remotes/NAME/), or for a mirror (remote.NAME.mirror) a branch or tag, contains it.
// Where nothing says upstream lacks the commit, url stays: the plan's hash, which the URL is
// part of, then does not depend on where the commit was resolved.
func SourceURL(ctx context.Context, repo, commit, url string) string {
	out, err := Git(ctx, repo, "config", "--get-regexp", `^remote\..*\.(url|mirror)$`)
	if err != nil || out == "" {
		return url
	}
	urls, mirror := map[string]string{}, map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		key, val, _ := strings.Cut(line, " ")
		name := strings.TrimPrefix(key, "remote.")
		if n, ok := strings.CutSuffix(name, ".url"); ok {
			urls[n] = val
		} else if n, ok := strings.CutSuffix(name, ".mirror"); ok {
			mirror[n] = val == "true"
		}
	}
	upstreamKnown := false
	for _, u := range urls {
		upstreamKnown = upstreamKnown || sameRepoURL(u, url)
	}
	if !upstreamKnown {
		return url
	}
	refs, err := Git(ctx, repo, "for-each-ref", "--format=%(refname)", "--contains", commit, "refs/remotes", "refs/heads", "refs/tags")
	if err != nil {
		return url
	}
	holds := map[string]bool{}
	for _, ref := range strings.Fields(refs) {
		if rest, ok := strings.CutPrefix(ref, "refs/remotes/"); ok {
			if name, _, ok := strings.Cut(rest, "/"); ok {
				holds[name] = true
			}
			continue
		}
		for name := range mirror {
			if mirror[name] {
				holds[name] = true
			}
		}
	}
	var names []string
	for name := range holds {
		u, ok := urls[name]
		if !ok {
			continue
		}
		if sameRepoURL(u, url) {
			return url // upstream holds it
		}
		if httpsURL(u) != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return url
	}
	sort.Slice(names, func(i, j int) bool { return names[i] == "origin" || (names[j] != "origin" && names[i] < names[j]) })
	return redactURL(httpsURL(urls[names[0]]))
}

// httpsURL is a remote URL as https://HOST/PATH (what a recipe's source takes): https URLs as
// they are, scp-like git@HOST:PATH and ssh://[USER@]HOST/PATH rewritten; "" for any other
// form (a local path, file://, http://).
func httpsURL(u string) string {
	switch {
	case strings.HasPrefix(u, "https://"):
		return u
	case strings.HasPrefix(u, "ssh://"):
		rest := strings.TrimPrefix(u, "ssh://")
		host, path, ok := strings.Cut(rest, "/")
		if !ok {
			return ""
		}
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		host, _, _ = strings.Cut(host, ":") // the ssh port is not the https one
		return "https://" + host + "/" + path
	case !strings.Contains(u, "://"):
		h, p, ok := strings.Cut(u, ":")
		if !ok || strings.Contains(h, "/") || !strings.Contains(h, "@") || p == "" {
			return ""
		}
		return "https://" + h[strings.LastIndex(h, "@")+1:] + "/" + strings.TrimPrefix(p, "/")
	}
	return ""
}

// sameRepoURL says whether two remote URLs name one repository: scheme, user, a trailing
// ".git" or "/" and scp-like syntax (git@host:owner/name) aside, and host and path compared
// without case, as the forges compare them.
func sameRepoURL(a, b string) bool {
	return repoKey(a) == repoKey(b)
}

func repoKey(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	} else if h, p, ok := strings.Cut(u, ":"); ok && !strings.Contains(h, "/") {
		u = h + "/" + p // git@github.com:owner/name
	}
	if at := strings.LastIndex(strings.SplitN(u, "/", 2)[0], "@"); at >= 0 {
		u = u[at+1:]
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return strings.ToLower(u)
}
