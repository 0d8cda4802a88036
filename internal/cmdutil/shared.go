package cmdutil

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/manifest"
)

// JudgeFlags are the judge's settings, the same flags and defaults on every command that
// decides from measured speed (bench, publish's gate, bisect).
func JudgeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "alpha", Value: bench.DefaultAlpha, Usage: "the judge's level, `P`: faster or slower is said only when Wilcoxon's signed-rank test of the rounds' log ratios gives a two-sided p at or below it"},
		&cli.Float64Flag{Name: "min-step", Value: bench.DefaultMinStep, Usage: "the least |median ratio - 1| the judge calls a difference, `FRACTION`"},
	}
}

// JudgeOf reads the judge's flags.
func JudgeOf(c *cli.Context) (bench.Judge, error) {
	j := bench.Judge{Alpha: c.Float64("alpha"), MinStep: c.Float64("min-step"), Test: bench.TestSignedRank}
	if err := j.Validate(); err != nil {
		return j, UsageError{err}
	}
	return j, nil
}

// OpenBundle is manifest.OpenDir with its errors as usage errors: a bundle named on the command
// line that is neither a bundle directory nor an archive is the caller's to fix.
func OpenBundle(ctx context.Context, name string) (string, func(), error) {
	dir, cleanup, err := manifest.OpenDir(ctx, name)
	if err != nil {
		return "", nil, UsageError{err}
	}
	return dir, cleanup, nil
}
