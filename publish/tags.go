package publish

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"

	"github.com/llbuild/llbuild/pipeline"
)

// DefaultTemplates are the tags every published image gets. The first is the identity tag:
// it names the plan hash, so its presence in the registry means this plan is published.
var DefaultTemplates = []string{
	"{{.Target}}-{{.ShortCommit}}-{{.ShortHash}}",
	"{{.Target}}-{{.Flavor}}",
	"{{.Target}}",
}

// ShortCommitLen is how many hex digits of the llama.cpp commit ShortCommit keeps.
const ShortCommitLen = 9

// TagData is what a tag template sees. Every field is derived from the plan alone, so a
// template renders the same tags for the same plan on any machine.
type TagData struct {
	// Target is the target's name, e.g. "olares-one".
	Target string
	// Recipe is the recipe's name, e.g. "server".
	Recipe string
	// Backend is "cuda", "sycl" or "cpu".
	Backend string
	// Commit is the full 40-hex llama.cpp commit built (the vendored one for a wheel).
	Commit string
	// ShortCommit is the first ShortCommitLen hex digits of Commit, e.g. "1425386fd".
	ShortCommit string
	// PlanHash is the full sha256 plan hash.
	PlanHash string
	// ShortHash is the plan hash's first 12 hex digits (pipeline.Plan.ShortHash).
	ShortHash string
	// CUDA is the toolkit's major.minor, e.g. "13.1"; empty unless Backend is cuda.
	CUDA string
	// CUDAToolkit is the toolkit's full version, e.g. "13.1.1"; empty unless Backend is cuda.
	CUDAToolkit string
	// SM is the CUDA architectures as the target gives them, joined by "_", e.g. "120" or
	// "86_90"; empty unless Backend is cuda.
	SM string
	// SYCLDevice is the SYCL ahead-of-time device, e.g. "bmg-g31"; empty unless Backend is sycl.
	SYCLDevice string
	// Flavor says what hardware the image is for: "cuda13.1-sm120", "sycl-bmg-g31" or "cpu".
	Flavor string
	// Version is llbuild's version.
	Version string
}

// DataOf derives a plan's TagData. version is llbuild's version.
func DataOf(p *pipeline.Plan, version string) TagData {
	d := TagData{
		Target:    p.Target,
		Recipe:    p.Recipe,
		Backend:   p.Backend,
		Commit:    p.Source.Commit,
		PlanHash:  p.Hash,
		ShortHash: shortOf(p.Hash, 12),
		Flavor:    "cpu",
		Version:   version,
	}
	if p.Vendor != nil {
		d.Commit = p.Vendor.Commit
	}
	d.ShortCommit = shortOf(d.Commit, ShortCommitLen)
	if c := p.CUDA; c != nil {
		d.CUDAToolkit = c.Toolkit
		parts := strings.SplitN(c.Toolkit, ".", 3)
		d.CUDA = strings.Join(parts[:min(2, len(parts))], ".")
		d.SM = strings.Join(c.Architectures, "_")
		d.Flavor = "cuda" + d.CUDA + "-sm" + d.SM
	}
	if p.SYCL != nil {
		d.SYCLDevice = p.SYCL.DeviceArch
		d.Flavor = "sycl-" + d.SYCLDevice
	}
	return d
}

func shortOf(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// tagGrammar is the OCI distribution spec's tag: at most 128 characters.
var tagGrammar = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// ValidTag reports whether tag matches the OCI tag grammar [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}.
func ValidTag(tag string) error {
	if tagGrammar.MatchString(tag) {
		return nil
	}
	switch {
	case tag == "":
		return errors.New("the tag is empty")
	case len(tag) > 128:
		return fmt.Errorf("the tag is %d characters long, more than the 128 the OCI spec allows", len(tag))
	case tag[0] == '.' || tag[0] == '-':
		return fmt.Errorf("tag %q starts with %q; a tag starts with a letter, digit or underscore", tag, tag[:1])
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return fmt.Errorf("tag %q holds %q; a tag holds only letters, digits and . _ -", tag, r)
		}
	}
	return fmt.Errorf("tag %q does not match the OCI tag grammar [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}", tag)
}

// Templates are parsed tag templates. The first gives the identity tag.
type Templates struct {
	src  []string
	tmpl []*template.Template
}

// ParseTemplates parses Go text/template tag templates (over TagData); none means
// DefaultTemplates. The first template must name the plan hash: publish looks for its tag to
// know whether a plan is already in the registry.
func ParseTemplates(srcs []string) (*Templates, error) {
	if len(srcs) == 0 {
		srcs = DefaultTemplates
	}
	t := &Templates{src: append([]string(nil), srcs...)}
	var errs []error
	for i, s := range srcs {
		tm, err := template.New(fmt.Sprintf("tag-template-%d", i+1)).Option("missingkey=error").Parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("tag template %d %q: %w", i+1, s, err))
			continue
		}
		t.tmpl = append(t.tmpl, tm)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Two plans that differ only in their hash must get different identity tags.
	a := TagData{Target: "t", Backend: "cpu", Flavor: "cpu", Commit: strings.Repeat("a", 40), ShortCommit: "aaaaaaaaa",
		PlanHash: strings.Repeat("1", 64), ShortHash: strings.Repeat("1", 12)}
	b := a
	b.PlanHash, b.ShortHash = strings.Repeat("2", 64), strings.Repeat("2", 12)
	ta, erra := t.render(0, a)
	tb, errb := t.render(0, b)
	if erra == nil && errb == nil && ta == tb {
		return nil, fmt.Errorf("the first tag template %q does not use the plan hash: it must (e.g. {{.ShortHash}}), because its tag is how publish knows a plan is already in the registry", srcs[0])
	}
	return t, nil
}

func (t *Templates) render(i int, d TagData) (string, error) {
	var b bytes.Buffer
	if err := t.tmpl[i].Execute(&b, d); err != nil {
		return "", fmt.Errorf("tag template %d %q: %w", i+1, t.src[i], err)
	}
	return b.String(), nil
}

// Render renders every template for d, the identity tag first, and checks each tag against
// the OCI grammar and against the others.
func (t *Templates) Render(d TagData) ([]string, error) {
	var tags []string
	var errs []error
	seen := map[string]int{}
	for i := range t.tmpl {
		tag, err := t.render(i, d)
		if err == nil {
			err = ValidTag(tag)
			if err != nil {
				err = fmt.Errorf("tag template %d %q gives an invalid tag for target %s: %w", i+1, t.src[i], d.Target, err)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if j, dup := seen[tag]; dup {
			errs = append(errs, fmt.Errorf("tag templates %d and %d both give tag %q for target %s", j+1, i+1, tag, d.Target))
			continue
		}
		seen[tag] = i
		tags = append(tags, tag)
	}
	return tags, errors.Join(errs...)
}

// RenderAll renders the tags of every plan, in plan order, and reports every problem
// together: invalid tags, and a tag two targets would share.
func (t *Templates) RenderAll(plans []*pipeline.Plan, version string) ([][]string, error) {
	out := make([][]string, len(plans))
	var errs []error
	owner := map[string]string{}
	for i, p := range plans {
		tags, err := t.Render(DataOf(p, version))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, tag := range tags {
			if o, ok := owner[tag]; ok && o != p.Target {
				errs = append(errs, fmt.Errorf("targets %s and %s would both be tagged %q: put {{.Target}} in every tag template", o, p.Target, tag))
			}
			owner[tag] = p.Target
		}
		out[i] = tags
	}
	return out, errors.Join(errs...)
}
