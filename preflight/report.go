package preflight

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/llbuild/llbuild/targets"
)

// Status is a check's outcome.
type Status string

// Outcomes.
const (
	OK      Status = "ok"
	Fail    Status = "would fail"
	Unknown Status = "unknown"
	// Dispatched is a CPU verdict: the instructions the CPU lacks lie only in functions an
	// ifunc resolver chooses at run time by CPUID (glibc's string functions, gcc's
	// target_clones), so they run only if the file's own CPU check picks them.
	Dispatched Status = "dispatched at run time"
)

// Check names.
const (
	CheckCPU         = "cpu"
	CheckGGMLVariant = "ggml-cpu-variant"
	// CheckGGMLBackends is the backend ggml would load for each device, in a build that
	// dlopens its backends.
	CheckGGMLBackends = "ggml-backends"
	CheckCUDADriver   = "cuda-driver"
	CheckCUDARuntime  = "cuda-runtime"
	CheckGPUKernels   = "gpu-kernels"
	CheckSYCL         = "sycl-device"
	CheckLibraries    = "libraries"
)

// Verdict is one check's outcome for one subject (a file, a directory or an image).
type Verdict struct {
	Check    string   `json:"check"`
	Subject  string   `json:"subject"`
	Status   Status   `json:"status"`
	Reason   string   `json:"reason"`
	Fix      string   `json:"fix,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
}

// Report is every verdict for one input against one host.
type Report struct {
	Input    string       `json:"input"`
	Host     targets.Host `json:"host"`
	HostName string       `json:"hostName"`
	GGML     []GGMLChoice `json:"ggml,omitempty"`
	Verdicts []Verdict    `json:"verdicts"`
	Binaries []*Binary    `json:"binaries"`
	// Read says what was read where it was not the whole input (an image's config alone).
	Read string `json:"read,omitempty"`
}

// ExitCode is 0 when every check passed (ok, or dispatched at run time), 1 when something
// would fail, 2 when nothing would fail but something could not be checked, or when there
// was nothing to check (no ELF file in the input).
func (r *Report) ExitCode() int {
	if len(r.Verdicts) == 0 {
		return 2
	}
	code := 0
	for _, v := range r.Verdicts {
		switch v.Status {
		case Fail:
			return 1
		case Unknown:
			code = 2
		}
	}
	return code
}

// checkOrder is the order checks are printed in.
var checkOrder = []string{CheckLibraries, CheckGGMLBackends, CheckGGMLVariant, CheckCPU, CheckCUDADriver, CheckCUDARuntime, CheckGPUKernels, CheckSYCL}

var checkTitles = map[string]string{
	CheckLibraries:    "libraries the loader would load",
	CheckGGMLVariant:  "ggml CPU variant (the one ggml's loader would pick)",
	CheckGGMLBackends: "ggml backends (the one ggml would load for each device)",
	CheckCPU:          "CPU instructions",
	CheckCUDADriver:   "driver against the image's NVIDIA_REQUIRE_CUDA",
	CheckCUDARuntime:  "driver against the CUDA runtime the binaries link",
	CheckGPUKernels:   "GPU kernel images",
	CheckSYCL:         "SYCL ahead-of-time device",
}

// WriteText writes the report as one table per check, then a summary line.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "preflight %s against %s\n", r.Input, r.HostName)
	fmt.Fprintf(ew, "host: %s\n", describeHost(r.Host))
	if r.Read != "" {
		fmt.Fprintf(ew, "read: %s\n", r.Read)
	}
	for _, check := range checkOrder {
		var vs []Verdict
		for _, v := range r.Verdicts {
			if v.Check == check {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		fmt.Fprintf(ew, "\n%s\n", checkTitles[check])
		tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STATUS\tSUBJECT\tREASON")
		for _, v := range vs {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Status, v.Subject, v.Reason)
		}
		tw.Flush()
		for _, v := range vs {
			if v.Status == OK || (len(v.Evidence) == 0 && v.Fix == "") {
				continue
			}
			fmt.Fprintf(ew, "  %s:\n", v.Subject)
			for _, e := range v.Evidence {
				fmt.Fprintf(ew, "      %s\n", e)
			}
			if v.Fix != "" {
				fmt.Fprintf(ew, "      fix: %s\n", v.Fix)
			}
		}
	}
	counts := map[Status]int{}
	for _, v := range r.Verdicts {
		counts[v.Status]++
	}
	if len(r.Verdicts) == 0 {
		fmt.Fprintln(ew, "\nnothing to check: no ELF files found")
	} else {
		disp := ""
		if n := counts[Dispatched]; n > 0 {
			disp = fmt.Sprintf(", %d dispatched at run time", n)
		}
		fmt.Fprintf(ew, "\n%d ok%s, %d would fail, %d unknown\n", counts[OK], disp, counts[Fail], counts[Unknown])
	}
	return ew.err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*Report
		ExitCode int `json:"exitCode"`
	}{r, r.ExitCode()})
}

func describeHost(h targets.Host) string {
	var parts []string
	cpu := h.CPU.Model
	if cpu == "" {
		cpu = "CPU"
	}
	fs := make([]string, 0, len(h.CPU.Features))
	for _, f := range h.CPU.FeatureSet().Sorted() {
		fs = append(fs, string(f))
	}
	parts = append(parts, fmt.Sprintf("%s [%s]", cpu, strings.Join(fs, " ")))
	for _, g := range h.GPUs {
		desc := string(g.Vendor) + " " + g.Name
		if g.ComputeCapability != "" {
			desc += " cc " + g.ComputeCapability
		}
		if g.Brand != "" {
			desc += " brand " + g.Brand
		}
		if g.PCIID != "" {
			desc += " pci " + g.PCIID
		}
		parts = append(parts, strings.TrimSpace(desc))
	}
	if h.Driver.Version != "" || h.Driver.CUDA != "" {
		parts = append(parts, fmt.Sprintf("driver %s (CUDA %s)", h.Driver.Version, h.Driver.CUDA))
	}
	if len(h.GPUs) == 0 {
		parts = append(parts, "no GPU")
	}
	return strings.Join(parts, "; ")
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
