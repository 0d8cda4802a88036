package recorded

import (
	"context"
	"fmt"
	"io"
	"strings"

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
	var b strings.Builder
	fmt.Fprintf(&b, "\nwhat differs between the builds of %s and %s (llbuild plan diff):\n", d.A, d.B)
	if d.Error != "" {
		fmt.Fprintf(&b, "  cannot compare the plans: %s\n", d.Error)
		_, err := io.WriteString(w, b.String())
		return err
	}
	for i, p := range d.plans {
		h := p.Plan.Hash
		if len(h) > 12 {
			h = h[:12]
		}
		fmt.Fprintf(&b, "%c: %s (target %s, plan %s)", 'A'+i, []string{d.A, d.B}[i], p.Plan.Target, h)
		if p.Partial {
			b.WriteString(" — a bundle from an earlier llbuild (manifest.json version 1): only its source, patches and base images are compared; rebundle it to compare the whole plan")
		}
		b.WriteString("\n")
	}
	if len(d.Groups) == 0 {
		b.WriteString("no differences\n")
	}
	for _, g := range d.Groups {
		fmt.Fprintf(&b, "\n%s:\n", g.Name)
		for _, c := range g.Changes {
			switch {
			case c.A == "":
				fmt.Fprintf(&b, "  %s: + %s\n", c.What, c.B)
			case c.B == "":
				fmt.Fprintf(&b, "  %s: - %s\n", c.What, c.A)
			default:
				fmt.Fprintf(&b, "  %s: %s -> %s\n", c.What, c.A, c.B)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
