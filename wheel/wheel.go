package wheel

import (
	"archive/zip"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/preflight/fatbin"
	"github.com/llbuild/llbuild/targets"
)

// Filename is a wheel file name split into its parts (PEP 427):
// {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl.
type Filename struct {
	Distribution, Version, Build, Python, ABI, Platform string
}

// ParseFilename splits a wheel's file name.
func ParseFilename(name string) (Filename, error) {
	base, ok := strings.CutSuffix(name, ".whl")
	if !ok || strings.ContainsAny(base, "/\\") {
		return Filename{}, fmt.Errorf("%q is not a wheel file name (want NAME-VERSION-PY-ABI-PLATFORM.whl)", name)
	}
	p := strings.Split(base, "-")
	var f Filename
	switch len(p) {
	case 5:
		f = Filename{p[0], p[1], "", p[2], p[3], p[4]}
	case 6:
		f = Filename{p[0], p[1], p[2], p[3], p[4], p[5]}
	default:
		return Filename{}, fmt.Errorf("%q is not a wheel file name: %d dash-separated parts, want 5 or 6", name, len(p))
	}
	for _, s := range []string{f.Distribution, f.Version, f.Python, f.ABI, f.Platform} {
		if s == "" {
			return Filename{}, fmt.Errorf("%q is not a wheel file name: an empty part", name)
		}
	}
	return f, nil
}

// LocalLabel is the version's local label (after '+'), or "".
func (f Filename) LocalLabel() string {
	_, l, _ := strings.Cut(f.Version, "+")
	return l
}

var nameSeparators = regexp.MustCompile(`[-_.]+`)

// NormalizeName is a project name as PEP 503 writes it in index URLs: runs of -, _ and .
// become one -, all lower-case.
func NormalizeName(name string) string {
	return strings.ToLower(nameSeparators.ReplaceAllString(name, "-"))
}

// Wheel is what a wheel file says about itself.
type Wheel struct {
	File Filename
	// Name and Version are from its METADATA.
	Name, Version  string
	RequiresPython string
	// Files are the archive's members, in archive order.
	Files []string
}

// Read opens a wheel and reads its file list and METADATA.
func Read(r io.ReaderAt, size int64, name string) (*Wheel, *zip.Reader, error) {
	fn, err := ParseFilename(path.Base(name))
	if err != nil {
		return nil, nil, err
	}
	z, err := zip.NewReader(r, size)
	if err != nil {
		return nil, nil, fmt.Errorf("reading wheel %s: %w", name, err)
	}
	w := &Wheel{File: fn}
	var meta *zip.File
	for _, f := range z.File {
		w.Files = append(w.Files, f.Name)
		if d, base := path.Split(f.Name); base == "METADATA" && strings.HasSuffix(d, ".dist-info/") && strings.Count(d, "/") == 1 {
			meta = f
		}
	}
	if meta == nil {
		return nil, nil, fmt.Errorf("wheel %s has no .dist-info/METADATA", name)
	}
	b, err := readMember(meta, 1<<20)
	if err != nil {
		return nil, nil, fmt.Errorf("wheel %s: %w", name, err)
	}
	w.Name, w.Version, w.RequiresPython = parseMetadata(b)
	if w.Name == "" || w.Version == "" {
		return nil, nil, fmt.Errorf("wheel %s: METADATA lacks Name or Version", name)
	}
	return w, z, nil
}

// parseMetadata reads the header fields of a core metadata file (RFC 822 style).
func parseMetadata(b []byte) (name, version, requiresPython string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the body (description) follows
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "name":
			name = v
		case "version":
			version = v
		case "requires-python":
			requiresPython = v
		}
	}
	return name, version, requiresPython
}

func readMember(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d read", f.Name, f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	return b, nil
}

// maxLibrary bounds how much of one shared library is read into memory (a CUDA backend for
// many architectures is a few hundred MB).
const maxLibrary = 2 << 30

// Libraries reads the ELF facts of every shared library in the wheel (names ending .so or
// containing .so.), decoding x86-64 code.
func Libraries(z *zip.Reader) ([]*preflight.Binary, error) {
	var out []*preflight.Binary
	for _, f := range z.File {
		base := path.Base(f.Name)
		if !strings.HasSuffix(base, ".so") && !strings.Contains(base, ".so.") {
			continue
		}
		b, err := readMember(f, maxLibrary)
		if err != nil {
			return nil, err
		}
		bin, err := preflight.ReadBinary(f.Name, bytes.NewReader(b))
		if errors.Is(err, preflight.ErrNotELF) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, bin)
	}
	return out, nil
}

// Expect is what a wheel built for a target must be.
type Expect struct {
	// Version is the full version, local label included.
	Version string
	// Host and HostName are the target the wheel must run on.
	Host     targets.Host
	HostName string
	// CUDAArchitectures are ggml's names of the architectures built (86, 120a, 90-virtual):
	// the wheel's cubins must be exactly these, and its PTX only for these.
	CUDAArchitectures []string
}

// Result is the outcome of checking a wheel.
type Result struct {
	Wheel *Wheel
	// Report is preflight's verdicts on the wheel's libraries against the target.
	Report *preflight.Report
	// Problems are the reasons the wheel is refused; empty when it passes.
	Problems []string
}

// Err is the refusal as one error, or nil.
func (r *Result) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("wheel %s would not run on %s: %s", r.Wheel.File.Distribution+"-"+r.Wheel.File.Version, r.Report.HostName, strings.Join(r.Problems, "; "))
}

var driverLibrary = regexp.MustCompile(`(^|/)libcuda\.so(\.|$)`)

// Check reads a wheel and checks it against what it must be: its version, no CUDA driver
// library inside, every library's instructions and GPU kernels fit for the target, and the
// fatbin architectures exactly the requested ones. Problems are collected, not returned as
// errors; an error means the wheel could not be read.
func Check(r io.ReaderAt, size int64, name string, want Expect) (*Result, error) {
	w, z, err := Read(r, size, name)
	if err != nil {
		return nil, err
	}
	res := &Result{Wheel: w}
	if want.Version != "" && w.Version != want.Version {
		res.Problems = append(res.Problems, fmt.Sprintf("its version is %s, want %s", w.Version, want.Version))
	}
	if want.Version != "" && w.File.Version != want.Version {
		res.Problems = append(res.Problems, fmt.Sprintf("its file name says version %s, want %s", w.File.Version, want.Version))
	}
	for _, f := range w.Files {
		if driverLibrary.MatchString(f) {
			res.Problems = append(res.Problems, fmt.Sprintf("it contains the CUDA driver library %s, which must come from the host's driver", f))
		}
	}
	libs, err := Libraries(z)
	if err != nil {
		return nil, fmt.Errorf("wheel %s: %w", name, err)
	}
	if len(libs) == 0 {
		res.Problems = append(res.Problems, "it holds no shared library")
	}
	res.Report = preflight.Check(want.Host, want.HostName, preflight.Input{Name: name, Binaries: libs})
	// A library installed under its SONAME links is in the wheel several times, byte for byte:
	// one problem names all its copies.
	var order []string
	subjects := map[string][]string{}
	for _, v := range res.Report.Verdicts {
		if v.Status != preflight.Fail {
			continue
		}
		p := v.Reason
		if v.Fix != "" {
			p += " (" + v.Fix + ")"
		}
		if _, seen := subjects[p]; !seen {
			order = append(order, p)
		}
		subjects[p] = append(subjects[p], v.Subject)
	}
	for _, p := range order {
		res.Problems = append(res.Problems, strings.Join(subjects[p], ", ")+": "+p)
	}
	res.Problems = append(res.Problems, fatbinProblems(libs, want.CUDAArchitectures)...)
	return res, nil
}

// fatbinProblems compares the wheel's CUDA kernels with the requested architectures: a cubin
// for each real architecture and none other, PTX only for requested ones.
func fatbinProblems(libs []*preflight.Binary, archs []string) []string {
	wantCubin, allowPTX := map[string]bool{}, map[string]bool{}
	for _, a := range archs {
		base, virtual := strings.CutSuffix(a, "-virtual")
		base, real := strings.CutSuffix(base, "-real")
		if !virtual {
			wantCubin["sm_"+base] = true
		}
		if !real {
			allowPTX["compute_"+base] = true
		}
	}
	gotCubin := map[string]bool{}
	var extra []string
	anyFatbin := false
	for _, b := range libs {
		for _, e := range b.Fatbin {
			anyFatbin = true
			n := e.Arch()
			switch {
			case e.Kind == fatbin.Cubin:
				gotCubin[n] = true
				if !wantCubin[n] {
					extra = append(extra, path.Base(b.Path)+" "+n)
				}
			case !allowPTX[n]:
				extra = append(extra, path.Base(b.Path)+" "+n)
			}
		}
	}
	var out []string
	if len(archs) == 0 {
		if anyFatbin {
			out = append(out, "it holds CUDA kernels but the plan builds no CUDA")
		}
		return out
	}
	var missing []string
	for a := range wantCubin {
		if !gotCubin[a] {
			missing = append(missing, a)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		out = append(out, "no cubin for "+strings.Join(missing, ", ")+", which the plan requested")
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		extra = dedupe(extra)
		out = append(out, "kernels for architectures the plan did not request: "+strings.Join(extra, ", "))
	}
	return out
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
