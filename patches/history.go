package patches

import (
	"context"
	"fmt"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
)

// RangeReport is where each patch of a series stopped applying, or became upstream, over a
// range of first-parent history.
type RangeReport struct {
	Source string `json:"source"`
	// From and To are the range's ends, full hashes: From is where the series is known (the old
	// pin), To the commit to move to.
	From string `json:"from"`
	To   string `json:"to"`
	// Commits is the number of first-parent commits after From up to To.
	Commits int `json:"commits"`
	// Probes is how many commits the bisection applied the series to, the ends included.
	Probes  int           `json:"probes"`
	Patches []RangeResult `json:"patches"`
}

// RangeResult is one patch's history over the range.
type RangeResult struct {
	Name string `json:"name"`
	// AtFrom and AtTo are the patch's state at the range's ends.
	AtFrom State `json:"atFrom"`
	AtTo   State `json:"atTo"`
	// Change is the first commit where the patch's state is no longer the one it had at From
	// (applies, already upstream, or broken: conflicts or depends), with its state there; nil
	// when the state at To is the one at From.
	Change *Change `json:"change,omitempty"`
}

// Change is the first commit of the range at which a patch's state changed.
type Change struct {
	Commit  string `json:"commit"`
	Subject string `json:"subject"`
	Time    int64  `json:"time"`
	// Position is the commit's place in the range, 1 for the first commit after From.
	Position int `json:"position"`
	// Result is the patch's state at the commit (hunks, the patch it depends on).
	Result Result `json:"result"`
}

// class groups states the way a user cares about them: whether the patch goes in as it is,
// has been merged upstream, or needs work.
func class(s State) string {
	switch s {
	case Applies, Upstream:
		return string(s)
	}
	return "broken"
}

// StatusRange finds, for each patch of series, the first commit on the first-parent path
// from..to (from excluded) at which its state is no longer the one it had at from: where it
// stopped applying, or became upstream. It bisects, so it checks about log2(N) commits per
// change instead of all N, and it assumes that a state, once changed, stays so; where history
// went back and forth it finds one of the changes. Like Status, it never writes the repository.
func StatusRange(ctx context.Context, repo, from, to string, series []Patch) (*RangeReport, error) {
	g, tmp, cleanup, err := openIndexGit(ctx, repo)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if g.plain {
		return nil, fmt.Errorf("source %s is a plain tree, not a git repository, so it has no history to search: give a checkout or mirror (git clone --mirror https://github.com/ggml-org/llama.cpp)%w", repo, ErrNoCommit)
	}
	ends := [2]string{}
	for i, rev := range []string{from, to} {
		full, err := g.run(ctx, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
		if err != nil {
			return nil, fmt.Errorf("%s has no commit %q: give another range, or %s%w", repo, rev, gitref.FetchHint(repo, rev), ErrNoCommit)
		}
		ends[i] = strings.TrimSpace(full)
	}
	if out, err := g.run(ctx, "merge-base", "--is-ancestor", ends[0], ends[1]); err != nil {
		if strings.TrimSpace(out) != "" {
			return nil, fmt.Errorf("comparing %s and %s: %s", from, to, oneLine(out))
		}
		return nil, fmt.Errorf("%s is not an ancestor of %s: give the range oldest first, as A..B with A the commit the series was made for%w", from, to, ErrNoCommit)
	}
	out, err := g.run(ctx, "rev-list", "--first-parent", "--reverse", ends[0]+".."+ends[1])
	if err != nil {
		return nil, fmt.Errorf("listing %s..%s: %s", from, to, oneLine(out))
	}
	// path[0] is from, path[len-1] is to
	path := append([]string{ends[0]}, strings.Fields(out)...)
	if path[len(path)-1] != ends[1] {
		return nil, fmt.Errorf("%s is not on the first-parent path to %s (it was merged from a side branch): give a commit of the main line", from, to)
	}
	p := &prober{g: g, tmp: tmp, repo: repo, series: series, path: path, reports: map[int]*Report{}}
	first, err := p.at(ctx, 0)
	if err != nil {
		return nil, err
	}
	last, err := p.at(ctx, len(path)-1)
	if err != nil {
		return nil, err
	}
	rep := &RangeReport{Source: repo, From: ends[0], To: ends[1], Commits: len(path) - 1}
	for i, s := range series {
		res := RangeResult{Name: s.Name, AtFrom: first.Patches[i].State, AtTo: last.Patches[i].State}
		if class(res.AtFrom) != class(res.AtTo) {
			lo, hi := 0, len(path)-1
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				r, err := p.at(ctx, mid)
				if err != nil {
					return nil, err
				}
				if class(r.Patches[i].State) == class(res.AtFrom) {
					lo = mid
				} else {
					hi = mid
				}
			}
			r := p.reports[hi]
			ch := &Change{Commit: r.Commit, Time: r.CommitTime, Position: hi, Result: r.Patches[i]}
			if out, err := g.run(ctx, "log", "-1", "--no-walk", "--format=%s", r.Commit); err == nil {
				ch.Subject = strings.TrimSpace(out)
			}
			res.Change = ch
		}
		rep.Patches = append(rep.Patches, res)
	}
	rep.Probes = len(p.reports)
	return rep, nil
}

// prober applies the series at commits of a path, once each.
type prober struct {
	g       *indexGit
	tmp     string
	repo    string
	series  []Patch
	path    []string
	reports map[int]*Report
}

func (p *prober) at(ctx context.Context, i int) (*Report, error) {
	if r, ok := p.reports[i]; ok {
		return r, nil
	}
	rep, err := p.g.loadCommit(ctx, p.repo, p.path[i])
	if err != nil {
		return nil, err
	}
	rep, err = applySeries(ctx, p.g, p.tmp, rep, p.series)
	if err != nil {
		return nil, err
	}
	p.reports[i] = rep
	return rep, nil
}
