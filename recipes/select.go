package recipes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/jsonout"
)

// LoadServer loads the server recipe that --recipe names: "" or "server" the built-in one, a
// FILE.yaml one recorded beside its series, or, where builtinNames, any built-in name. A name
// or file that is not a server recipe is an inputerr.Error.
func LoadServer(name string, builtinNames bool) (*Recipe, error) {
	if name == "" {
		name = "server"
	}
	if !builtinNames && name != "server" && !strings.HasSuffix(name, ".yaml") {
		return nil, inputerr.Errorf("--recipe takes a server recipe FILE.yaml, got %q (the built-in one is used without the flag)", name)
	}
	r, err := Load(name)
	if err != nil {
		return nil, &inputerr.Error{Err: err}
	}
	if r.Name != "server" {
		return nil, inputerr.Errorf("--recipe %s is the %q recipe; this command builds the server recipe", name, r.Name)
	}
	return r, nil
}

// AtRef is the recipe moved (At) to the commit ref names: resolved in source when that is a git
// repository, else in the commits gitref.FetchRef fetches from the recipe's source URL. A ref
// that names no commit there is an inputerr.Error; log (when not nil) gets the commit it
// resolved to. Resolved in source, the recipe's URL gives way to the remote's that holds the
// commit where that is another repository (gitref.SourceURL: a fork's branch).
func (r Recipe) AtRef(ctx context.Context, ref, source string, log *slog.Logger) (*Recipe, error) {
	repo, err := gitref.FetchRef(ctx, ref, source, r.Source.URL)
	if err != nil {
		return nil, err
	}
	commit, err := gitref.Resolve(ctx, repo, ref)
	if err != nil {
		return nil, &inputerr.Error{Err: err}
	}
	at, err := r.At(ctx, repo, commit, ref)
	if err != nil {
		return nil, &inputerr.Error{Err: err}
	}
	if source != "" {
		// a branch of a fork in the user's checkout: the plan says where that commit lives
		if u := gitref.SourceURL(ctx, repo, commit.Hash, r.Source.URL); u != r.Source.URL {
			if log != nil {
				log.Info("the commit is on a remote other than the recipe's repository: the plan records that remote's URL", "commit", commit.Hash, "url", u, "recipe url", r.Source.URL)
			}
			at.Source.URL = u
		}
	}
	if log != nil {
		log.Info("ref resolved", "ref", ref, "commit", commit.Hash, "subject", commit.Subject, "build", at.Source.BuildNumber, "in", repo)
	}
	return at, nil
}

// WriteList writes the built-in recipes as `llbuild recipes` lists them: a row per recipe with
// its source, commit and build targets, or with asJSON the recipes in JSON.
func WriteList(w io.Writer, asJSON bool) error {
	var all []*Recipe
	for _, n := range Names() {
		r, err := Load(n)
		if err != nil {
			return err
		}
		all = append(all, r)
	}
	if asJSON {
		return jsonout.Write(w, all)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tCOMMIT\tBUILDS")
	for _, r := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Source.URL, r.Source.Commit, strings.Join(r.BuildTargets, ","))
	}
	return tw.Flush()
}
