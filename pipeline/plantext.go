package pipeline

import (
	"fmt"
	"io"
	"strings"

	"github.com/llbuild/llbuild/internal/shellquote"
)

// WriteText writes the plan as `llbuild plan` prints it: what a build will do, one line per
// fact, the configure step as the command it runs.
func (p *Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s  target %s  recipe %s  backend %s\n", p.ShortHash(), p.Target, p.Recipe, p.Backend)
	if !p.Reproducible {
		b.WriteString("NOT REPRODUCIBLE\n")
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	fmt.Fprintf(&b, "devel image:   %s\nruntime image: %s\n", p.Images.Devel.Ref, p.Images.Runtime.Ref)
	fmt.Fprintf(&b, "source:        %s @ %s\n", p.Source.URL, p.Source.Commit)
	if p.Source.Tree != "" {
		fmt.Fprintf(&b, "source tree:   %s, a plain directory: UNVERIFIED, nothing checks that it is %s\n", p.Source.Tree, p.Source.Commit)
	}
	if p.Source.Ref != "" {
		fmt.Fprintf(&b, "ref:           %s\n", p.Source.Ref)
	}
	if p.Vendor != nil {
		fmt.Fprintf(&b, "vendored:      %s @ %s\n", p.Vendor.URL, p.Vendor.Commit)
	}
	for _, pt := range p.Patches {
		fmt.Fprintf(&b, "patch:         %s sha256:%s\n", pt.Name, pt.SHA256)
	}
	if p.Series != "" {
		fmt.Fprintf(&b, "series:        %s\n", p.Series)
	}
	if a := p.Apt; a != nil {
		snap := a.Snapshot
		if snap == "" {
			snap = "none: apt reads the archive as it is on the day (not reproducible)"
		}
		distro := a.Distro
		if distro == "" {
			distro = "distribution not set"
		}
		fmt.Fprintf(&b, "apt snapshot:  %s (%s)\n", snap, distro)
		for _, src := range a.Sources {
			fmt.Fprintf(&b, "apt source:    %s\n", src)
		}
		if len(a.Bootstrap) > 0 {
			fmt.Fprintf(&b, "apt bootstrap: %s (when the image lacks it: fetched before TLS can be verified)\n", strings.Join(a.BootstrapArgs(), " "))
		}
		fmt.Fprintf(&b, "apt:           %s\n", strings.Join(a.InstallArgs(), " "))
	}
	for _, e := range SortedEnv(p.Env) {
		fmt.Fprintf(&b, "env:           %s\n", e)
	}
	b.WriteString("configure:     cmake -S " + SourceDirToken + " -B build \\\n")
	for i := 0; i < len(p.Configure); i++ {
		a := shellquote.Quote(p.Configure[i])
		if p.Configure[i] == "-G" && i+1 < len(p.Configure) {
			i++
			a += " " + shellquote.Quote(p.Configure[i])
		}
		sep := " \\"
		if i == len(p.Configure)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "                 %s%s\n", a, sep)
	}
	if p.Recipe != "wheel" {
		fmt.Fprintf(&b, "build:         cmake --build build --target %s\n", strings.Join(p.BuildTargets, " "))
	}
	for _, o := range p.Outputs {
		fmt.Fprintf(&b, "output:        %s (%s)\n", o.Glob, o.Kind)
	}
	if p.CUDA != nil {
		fmt.Fprintf(&b, "cuda:          toolkit %s, architectures %s built as %s, requires %s\n", p.CUDA.Toolkit, strings.Join(p.CUDA.Architectures, ";"), strings.Join(p.CUDA.BuiltAs, ";"), p.CUDA.RequireCUDA)
	}
	for _, e := range SortedEnv(p.Runtime.Env) {
		fmt.Fprintf(&b, "runtime env:   %s\n", e)
	}
	if p.Recipe == "wheel" {
		// a wheel is no image: its labels are only the plan's
		for _, l := range SortedEnv(p.Runtime.Labels) {
			fmt.Fprintf(&b, "label:         %s\n", l)
		}
	} else {
		// every label the image carries, so that a script can rely on one before building
		for _, l := range SortedEnv(p.ImageLabels()) {
			fmt.Fprintf(&b, "label:         %s\n", l)
		}
		fmt.Fprintf(&b, "label:         %s=<this plan, as compact JSON>\n", LabelPlan)
		fmt.Fprintf(&b, "label:         %s=<the version of the llbuild that builds it>\n", LabelVersion)
		b.WriteString("label:         (and the runtime image's own labels, unless one above replaces it)\n")
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := w.Write([]byte(b.String()))
	return err
}
