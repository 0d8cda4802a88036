package targets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/jsonout"
)

// Default is the target built when none is named: it runs on any x86-64-v3 machine.
const Default = "cpu-v3"

// Spec names a target as a command line does: a built-in target by Name, or a target File.
type Spec struct{ Name, File string }

// Specs reads the targets of a command line: the names (each may be comma-separated) in order,
// then the files.
func Specs(names, files []string) []Spec {
	var specs []Spec
	for _, t := range names {
		for _, n := range strings.Split(t, ",") {
			if n = strings.TrimSpace(n); n != "" {
				specs = append(specs, Spec{Name: n})
			}
		}
	}
	for _, f := range files {
		specs = append(specs, Spec{File: f})
	}
	return specs
}

// Load resolves s (Resolve). Naming no target, both a name and a file, a name that is not
// built in, a file that does not exist and a target file that does not validate are
// inputerr.Errors (the user's to mend: exit 2 in every command alike); a built-in target that
// does not validate is not (llbuild's own).
func (s Spec) Load() (*Target, error) {
	if s.Name == "" && s.File == "" {
		return nil, inputerr.Errorf("no target given: use --target (one of %s) or --target-file", strings.Join(Names(), ", "))
	}
	if s.Name != "" && s.File != "" {
		return nil, inputerr.Errorf("give --target or --target-file, not both")
	}
	t, err := Resolve(s.Name, s.File)
	if err != nil && (errors.Is(err, ErrUnknownTarget) || errors.Is(err, fs.ErrNotExist) || s.File != "") {
		return nil, &inputerr.Error{Err: err}
	}
	return t, err
}

// WriteList writes the built-in targets as `llbuild targets` lists them: a row per target with
// its backend, its first GPU (and the architectures or device built for it), its driver and its
// CPU features, or with asJSON the targets in JSON.
func WriteList(w io.Writer, asJSON bool) error {
	var all []*Target
	for _, n := range Names() {
		t, err := Load(n)
		if err != nil {
			return err
		}
		all = append(all, t)
	}
	if asJSON {
		return jsonout.Write(w, all)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBACKEND\tGPU\tDRIVER\tCPU FEATURES")
	for _, t := range all {
		gpu, drv := "-", "-"
		if len(t.Host.GPUs) > 0 {
			gpu = t.Host.GPUs[0].Name
			switch {
			case t.Build.CUDA != nil:
				gpu += " (sm_" + strings.Join(t.Build.CUDA.Architectures, ",") + ")"
			case t.Build.SYCL != nil:
				gpu += " (" + t.Build.SYCL.DeviceArch + ")"
			}
		}
		if t.Host.Driver.Version != "" {
			drv = t.Host.Driver.Version + " (CUDA " + t.Host.Driver.CUDA + ")"
		}
		features := make([]string, len(t.Host.CPU.Features))
		for i, f := range t.Host.CPU.Features {
			features[i] = string(f)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Build.Backend, gpu, drv, strings.Join(features, " "))
	}
	return tw.Flush()
}

// Detected renders the target FromHost makes for h as a target file, with FromHost's warnings
// (also when it cannot be rendered); a rendering that does not load back as it is adds a
// warning that says what needs editing.
func Detected(name string, h Host) ([]byte, []string, error) {
	t, warnings := FromHost(name, h)
	data, err := t.Marshal()
	if err != nil {
		return nil, warnings, err
	}
	if _, err := Parse("detected", data); err != nil {
		warnings = append(warnings, fmt.Sprintf("the detected target needs editing before use:\n%v", err))
	}
	return data, warnings, nil
}
