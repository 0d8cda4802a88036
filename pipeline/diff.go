package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/preflight/cudareq"
	"github.com/llbuild/llbuild/targets"
)

// Change is one difference between two plans: what A has and what B has ("" where one has
// nothing).
type Change struct {
	What string `json:"what"`
	A    string `json:"a,omitempty"`
	B    string `json:"b,omitempty"`
}

// Group is the changes of one part of a plan.
type Group struct {
	Name    string   `json:"name"`
	Changes []Change `json:"changes"`
}

// The groups of a PlanDiff, in the order they are reported.
const (
	GroupSource     = "source commit"
	GroupPatches    = "patches"
	GroupImages     = "base images"
	GroupApt        = "apt"
	GroupCMake      = "cmake arguments"
	GroupEnv        = "environment"
	GroupCUDA       = "cuda architectures"
	GroupRuntimeEnv = "runtime env"
	GroupLabels     = "labels"
)

// PlanDiff is what differs between plans A and B, grouped; groups without changes are left out.
type PlanDiff struct {
	A, B   string  `json:"-"`
	Groups []Group `json:"groups"`
}

// DiffPlans compares two plans. With partial, only the source, patches and base images are
// compared: a bundle manifest of version 1 records those of its build, not the rest of the plan.
func DiffPlans(a, b *Plan, partial bool) *PlanDiff {
	d := &PlanDiff{A: a.Hash, B: b.Hash}
	add := func(group string, cs []Change) {
		if len(cs) > 0 {
			d.Groups = append(d.Groups, Group{Name: group, Changes: cs})
		}
	}
	var src []Change
	src = appendIf(src, "commit", a.Source.Commit, b.Source.Commit)
	src = appendIf(src, "url", a.Source.URL, b.Source.URL)
	// a plain directory built instead of a fetch of the commit: its bytes are the build's
	src = appendIf(src, "tree", treeString(a.Source.Tree), treeString(b.Source.Tree))
	if a.Source.Epoch != 0 && b.Source.Epoch != 0 {
		src = appendIf(src, "epoch", fmt.Sprint(a.Source.Epoch), fmt.Sprint(b.Source.Epoch))
	}
	src = appendIf(src, "vendored", sourceString(a.Vendor), sourceString(b.Vendor))
	add(GroupSource, src)
	add(GroupPatches, diffPatches(a.Patches, b.Patches))
	var im []Change
	im = appendIf(im, "devel", a.Images.Devel.Ref, b.Images.Devel.Ref)
	im = appendIf(im, "runtime", a.Images.Runtime.Ref, b.Images.Runtime.Ref)
	add(GroupImages, im)
	if partial {
		return d
	}
	add(GroupApt, diffMaps("", aptMap(a.Apt), aptMap(b.Apt)))
	add(GroupCMake, diffList(a.Configure, b.Configure))
	add(GroupEnv, diffMaps("", a.Env, b.Env))
	var cu []Change
	ca, cb := a.CUDA, b.CUDA
	if ca == nil {
		ca = &CUDAPlan{}
	}
	if cb == nil {
		cb = &CUDAPlan{}
	}
	cu = appendIf(cu, "toolkit", ca.Toolkit, cb.Toolkit)
	cu = appendIf(cu, "architectures", strings.Join(ca.Architectures, ";"), strings.Join(cb.Architectures, ";"))
	cu = appendIf(cu, "built as", strings.Join(ca.BuiltAs, ";"), strings.Join(cb.BuiltAs, ";"))
	add(GroupCUDA, cu)
	add(GroupRuntimeEnv, diffMaps("", a.Runtime.Env, b.Runtime.Env))
	add(GroupLabels, diffMaps("", a.Runtime.Labels, b.Runtime.Labels))
	return d
}

func appendIf(cs []Change, what, a, b string) []Change {
	if a != b {
		cs = append(cs, Change{What: what, A: a, B: b})
	}
	return cs
}

// treeString names a plan's source tree: a plain directory's content hash, or the fetch.
func treeString(tree string) string {
	if tree == "" {
		return "(the commit, fetched)"
	}
	return tree + " (a plain directory, unverified)"
}

func sourceString(s *Source) string {
	if s == nil {
		return ""
	}
	return s.URL + " @ " + s.Commit
}

func aptMap(a *Apt) map[string]string {
	m := map[string]string{}
	if a == nil {
		return m
	}
	if a.Snapshot != "" {
		m["snapshot"] = a.Snapshot
	}
	for _, p := range a.Packages {
		m[p.Name] = p.Version
		if p.Version == "" {
			m[p.Name] = "(unpinned)"
		}
	}
	return m
}

// diffPatches reports patches removed, added and changed (same name, another digest), and a
// new order when the patches both have are applied in another one.
func diffPatches(a, b []Patch) []Change {
	var cs []Change
	ina, inb := map[string]string{}, map[string]string{}
	for _, p := range a {
		ina[p.Name] = p.SHA256
	}
	for _, p := range b {
		inb[p.Name] = p.SHA256
	}
	var ca, cb []string
	for _, p := range a {
		switch d, ok := inb[p.Name]; {
		case !ok:
			cs = append(cs, Change{What: "removed " + p.Name, A: "sha256:" + p.SHA256})
		case d != p.SHA256:
			cs = append(cs, Change{What: "changed " + p.Name, A: "sha256:" + p.SHA256, B: "sha256:" + d})
			ca = append(ca, p.Name)
		default:
			ca = append(ca, p.Name)
		}
	}
	for _, p := range b {
		if _, ok := ina[p.Name]; !ok {
			cs = append(cs, Change{What: "added " + p.Name, B: "sha256:" + p.SHA256})
		} else {
			cb = append(cb, p.Name)
		}
	}
	if !slices.Equal(ca, cb) {
		cs = append(cs, Change{What: "order", A: strings.Join(ca, ","), B: strings.Join(cb, ",")})
	}
	return cs
}

// diffMaps reports keys removed, added and changed, in key order.
func diffMaps(prefix string, a, b map[string]string) []Change {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var cs []Change
	for _, k := range sorted {
		cs = appendIf(cs, prefix+k, a[k], b[k])
	}
	return cs
}

// diffList reports CMake arguments by the variable they define: removed, added or given
// another value; and, when both define the same things in another order, the order.
func diffList(a, b []string) []Change {
	defOf := func(arg string) (string, string) {
		if k, v, ok := strings.Cut(arg, "="); ok {
			return k, v
		}
		return arg, "(given)"
	}
	ma, mb := map[string]string{}, map[string]string{}
	for i := 0; i < len(a); i++ {
		k, v := defOf(a[i])
		if a[i] == "-G" && i+1 < len(a) {
			i++
			v = a[i]
		}
		ma[k] = v
	}
	for i := 0; i < len(b); i++ {
		k, v := defOf(b[i])
		if b[i] == "-G" && i+1 < len(b) {
			i++
			v = b[i]
		}
		mb[k] = v
	}
	cs := diffMaps("", ma, mb)
	if len(cs) == 0 && !slices.Equal(a, b) {
		cs = append(cs, Change{What: "order", A: strings.Join(a, " "), B: strings.Join(b, " ")})
	}
	return cs
}

// DriverCheck says whether a target's driver can start an image of a plan.
type DriverCheck struct {
	Target string `json:"target"`
	// Driver is the target's driver version and the CUDA version it runs, "" when it names none.
	Driver string `json:"driver,omitempty"`
	// Plan is "A" or "B"; Require the plan's NVIDIA_REQUIRE_CUDA.
	Plan    string `json:"plan"`
	Require string `json:"require"`
	// Holds is false only when nvidia-container-cli would refuse the image; Reason says why,
	// or, with Holds, that the outcome depends on a GPU fact the host does not give.
	Holds  bool   `json:"holds"`
	Reason string `json:"reason,omitempty"`
}

// DriverChecks checks plans A and B's NVIDIA_REQUIRE_CUDA against the driver of each host
// given (the target each side is for, nil where unknown): moving a target to B is safe only
// if its driver meets B's requirement. A host is checked once, hosts without a CUDA driver
// and plans without a requirement not at all.
func DriverChecks(plans [2]*Plan, hosts [2]*targets.Target) []DriverCheck {
	var checks []DriverCheck
	seen := map[string]bool{}
	for _, t := range hosts {
		if t == nil || seen[t.Name] || t.Host.Driver.CUDA == "" {
			continue
		}
		seen[t.Name] = true
		for i, p := range plans {
			if p.CUDA == nil || p.CUDA.RequireCUDA == "" {
				continue
			}
			ch := DriverCheck{Target: t.Name, Driver: t.Host.Driver.Version + " (CUDA " + t.Host.Driver.CUDA + ")", Plan: string(rune('A' + i)), Require: p.CUDA.RequireCUDA, Holds: true}
			var undecided *cudareq.UndecidedError
			if err := checkDriverSatisfies(t, ch.Require); errors.As(err, &undecided) {
				// Not known to fail: nvidia-container-cli reads the missing fact from NVML.
				ch.Reason = "undecided: " + err.Error()
			} else if err != nil {
				ch.Holds, ch.Reason = false, err.Error()
			}
			checks = append(checks, ch)
		}
	}
	return checks
}
