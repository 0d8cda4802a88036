package pipeline

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/llbuild/llbuild/internal/jsonout"
)

// DiffSide names one plan of a diff: the argument that gave it, its target and hash, and
// whether it records only part of a plan (a bundle from before manifest.json version 2).
type DiffSide struct {
	Arg     string `json:"arg"`
	Target  string `json:"target"`
	Hash    string `json:"hash,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

// SideOf is the DiffSide of p as arg gave it.
func SideOf(arg string, p *Plan, partial bool) DiffSide {
	return DiffSide{Arg: arg, Target: p.Target, Hash: p.Hash, Partial: partial}
}

// DiffReport is a plan diff as `plan diff --json` prints it: both sides, the groups of changes
// and the driver checks, the lists empty rather than null.
type DiffReport struct {
	A       DiffSide      `json:"a"`
	B       DiffSide      `json:"b"`
	Groups  []Group       `json:"groups"`
	Drivers []DriverCheck `json:"drivers"`
}

// NewDiffReport is the DiffReport of d and checks between sides.
func NewDiffReport(sides [2]DiffSide, d *PlanDiff, checks []DriverCheck) DiffReport {
	return DiffReport{A: sides[0], B: sides[1], Groups: jsonout.NonNil(d.Groups), Drivers: jsonout.NonNil(checks)}
}

// StartError is why plan diff fails: B would not start on a target's driver (the reasons of
// B's checks that do not hold); nil when every check of B holds.
func (r DiffReport) StartError() error {
	var failed []string
	for _, ch := range r.Drivers {
		if ch.Plan == "B" && !ch.Holds {
			failed = append(failed, ch.Reason)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return errors.New("B would not start: " + strings.Join(failed, "; "))
}

// WriteText writes r as `plan diff` prints it: a line per side, the changes by group
// (+ added, - removed, a -> b changed), then each driver check.
func (r DiffReport) WriteText(w io.Writer) error {
	var b strings.Builder
	for i, s := range [2]DiffSide{r.A, r.B} {
		h := s.Hash
		if len(h) > 12 {
			h = h[:12]
		}
		fmt.Fprintf(&b, "%c: %s (target %s, plan %s)", 'A'+i, s.Arg, s.Target, h)
		if s.Partial {
			b.WriteString(" — a bundle from an earlier llbuild (manifest.json version 1): only its source, patches and base images are compared; rebundle it to compare the whole plan")
		}
		b.WriteString("\n")
	}
	if len(r.Groups) == 0 {
		b.WriteString("no differences\n")
	}
	for _, g := range r.Groups {
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
	if len(r.Drivers) > 0 {
		b.WriteString("\ndriver cap:\n")
	}
	for _, ch := range r.Drivers {
		verdict := "holds"
		if !ch.Holds {
			verdict = "DOES NOT HOLD: " + ch.Reason
		}
		fmt.Fprintf(&b, "  target %s, driver %s: %s needs %s: %s\n", ch.Target, ch.Driver, ch.Plan, ch.Require, verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
