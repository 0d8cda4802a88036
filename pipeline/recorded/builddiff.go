package recorded

import (
	"context"
	"fmt"
	"io"

	"github.com/llbuild/llbuild/pipeline"
)

// BuildDiffs are the comparisons of the first of several builds with each other one.
type BuildDiffs []BuildDiff

// BuildDiff is what differs between the plans that the first of several builds and another
// record (as llbuild plan diff shows it): beside an A/B's verdict, the build change its ratio
// measures.
type BuildDiff struct {
	A      string           `json:"a"`
	B      string           `json:"b"`
	Groups []pipeline.Group `json:"groups"`
	// Error says why the plans could not be compared.
	Error string `json:"error,omitempty"`

	plans [2]*Plan
}

// DiffBuilds compares the plan recorded at dirs[0] with the one at each other dir (Open),
// names[i] being what the user called dirs[i]. A plan that cannot be read leaves that
// comparison's Error set; the others stand.
func DiffBuilds(ctx context.Context, names, dirs []string) BuildDiffs {
	var out BuildDiffs
	for i := 1; i < len(dirs); i++ {
		d := BuildDiff{A: names[0], B: names[i]}
		var err error
		for j, k := range []int{0, i} {
			if d.plans[j], err = Open(ctx, dirs[k]); err != nil {
				break
			}
		}
		if err != nil {
			d.Error = err.Error()
		} else {
			diff := pipeline.DiffPlans(d.plans[0].Plan, d.plans[1].Plan, d.plans[0].Partial || d.plans[1].Partial)
			d.Groups = diff.Groups
			if d.Groups == nil {
				d.Groups = []pipeline.Group{}
			}
		}
		out = append(out, d)
	}
	return out
}

// WriteText writes the comparison as llbuild bench prints it below its table: a heading, each
// side's plan, then each group's changes (or why the plans could not be compared).
func (d BuildDiff) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "\nwhat differs between the builds of %s and %s (llbuild plan diff):\n", d.A, d.B); err != nil {
		return err
	}
	if d.Error != "" {
		_, err := fmt.Fprintf(w, "  cannot compare the plans: %s\n", d.Error)
		return err
	}
	a, b := d.plans[0], d.plans[1]
	sides := [2]pipeline.DiffSide{pipeline.SideOf(d.A, a.Plan, a.Partial), pipeline.SideOf(d.B, b.Plan, b.Partial)}
	return pipeline.NewDiffReport(sides, &pipeline.PlanDiff{Groups: d.Groups}, nil).WriteText(w)
}

// WriteText writes each comparison (BuildDiff.WriteText).
func (ds BuildDiffs) WriteText(w io.Writer) error {
	for _, d := range ds {
		if err := d.WriteText(w); err != nil {
			return err
		}
	}
	return nil
}
