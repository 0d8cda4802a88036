// Command gittree writes one commit's tree of a git repository into a directory, leaving out the
// files whose blobs the repository lacks (the history in ../shared holds no vocabulary GGUFs), as
// llbuild's host executor prepares a source from a mirror. scripts/provision.sh uses it for a
// pinned commit that ../shared has no tarball of (upstream's history holds every commit of it).
//
//	go run ./internal/tools/gittree -repo llrange.git -commit 3f545becc -exclude 'models/*.gguf*' -o src
//
// -exclude leaves out the files matching a pattern too (path.Match on the path in the tree), so
// that the tree is the one ../shared/llama.cpp/README.md's tarballs hold (git archive with
// ':(exclude)models/*.gguf*').
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
)

func main() {
	repo := flag.String("repo", "", "git `REPOSITORY` (bare, shallow or with blobs missing)")
	commit := flag.String("commit", "", "`COMMIT` whose tree to write (any revision the repository knows)")
	out := flag.String("o", "", "`DIR` to write the tree into (created, or empty)")
	exclude := flag.String("exclude", "", "leave out the files whose path in the tree matches `PATTERN` (path.Match) too")
	flag.Parse()
	if *repo == "" || *commit == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: gittree -repo REPOSITORY -commit COMMIT [-exclude PATTERN] -o DIR")
		os.Exit(2)
	}
	if _, err := path.Match(*exclude, ""); err != nil {
		fmt.Fprintf(os.Stderr, "gittree: -exclude %q: %v\n", *exclude, err)
		os.Exit(2)
	}
	if err := run(context.Background(), *repo, *commit, *exclude, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gittree:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, repo, rev, exclude, out string) error {
	c, err := gitref.Resolve(ctx, repo, rev)
	if err != nil {
		return err
	}
	missing, err := gitref.MissingBlobs(ctx, repo, c.Hash)
	if err != nil {
		return err
	}
	skip := missing
	if exclude != "" {
		files, err := gitref.Git(ctx, repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", c.Hash)
		if err != nil {
			return err
		}
		for _, f := range strings.Split(strings.TrimRight(files, "\x00"), "\x00") {
			if ok, _ := path.Match(exclude, f); ok && !slices.Contains(missing, f) {
				skip = append(skip, f)
			}
		}
	}
	if err := gitref.Archive(ctx, repo, c.Hash, out, skip); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gittree: %s %s into %s (left out: %d files whose blobs are missing, %d more matching %q)\n",
		c.Short(), c.Subject, out, len(missing), len(skip)-len(missing), exclude)
	return nil
}
