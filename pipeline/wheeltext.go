package pipeline

import (
	"fmt"
	"io"
)

// WriteText writes the wheel plan as `llbuild plan --recipe wheel` prints it: the plan of the
// wheel recipe, then how a wheel build carries it out (CMake's arguments go into CMAKE_ARGS of
// a Python build rather than to cmake directly).
func (w *WheelPlan) WriteText(out io.Writer) error {
	if err := w.Plan.WriteText(out); err != nil {
		return err
	}
	fmt.Fprintf(out, "wheel:         python -m build --wheel --no-isolation (%s), vendor/llama.cpp replaced by %s @ %s\n", w.Interpreter(), w.Plan.Vendor.URL, w.Plan.Vendor.Commit)
	fmt.Fprintf(out, "CMAKE_ARGS:    %s\n", w.CMakeArgsEnv(SourceDirToken))
	fmt.Fprintf(out, "version label: +%s (index %s)\n", w.LocalVersion, w.Variant)
	_, err := fmt.Fprintf(out, "wheel plan:    %s\n", w.ShortHash())
	return err
}

// Print writes w as `llbuild plan --recipe wheel` prints it: its JSON with asJSON, else its text.
func (w *WheelPlan) Print(out io.Writer, asJSON bool) error {
	if asJSON {
		_, err := out.Write(w.JSON())
		return err
	}
	return w.WriteText(out)
}

// Print writes p as `llbuild plan` prints it: its JSON with asJSON, else its text.
func (p *Plan) Print(out io.Writer, asJSON bool) error {
	if asJSON {
		_, err := out.Write(p.JSON())
		return err
	}
	return p.WriteText(out)
}
