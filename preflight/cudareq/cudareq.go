package cudareq

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Driver is what nvidia-container-cli knows about the host driver.
type Driver struct {
	// CUDA is cuDriverGetVersion as major.minor ("13.1"); empty when unknown.
	CUDA string
	// Version is the kernel module (NVRM) version ("590.44.01"); empty when unknown.
	Version string
}

// Device is what nvidia-container-cli knows about one visible GPU.
type Device struct {
	// Arch is the compute capability, major.minor ("12.0").
	Arch string
	// Brand is NVML's brand as nvidia-container-cli names it (geforce, tesla, nvidia,
	// nvidiartx, quadro, ...); compared case-insensitively. Empty when unknown.
	Brand string
}

// ErrInvalid is returned for an expression nvidia-container-cli would reject as invalid.
var ErrInvalid = errors.New("invalid expression")

// UnsatisfiedError is a requirement the host does not meet.
type UnsatisfiedError struct {
	// Requirement is the whole requirement string that failed.
	Requirement string
	// Device is the index of the GPU it failed for, or -1 when evaluated without devices.
	Device int
}

// Error returns the message nvidia-container-cli prints after "requirement error: ". Like
// nvidia-container-cli it quotes only the requirement's first space-separated term,
// whichever term failed, and adds the driver advice when that term starts with "cuda>=".
func (e *UnsatisfiedError) Error() string {
	first, _, _ := strings.Cut(e.Requirement, " ")
	if strings.HasPrefix(first, "cuda>=") {
		return "unsatisfied condition: " + first + ", please update your driver to a newer version, or use an earlier cuda container"
	}
	return "unsatisfied condition: " + first
}

// CLIMessage returns the line nvidia-container-cli writes for an error from Check.
func CLIMessage(err error) string {
	if err == nil {
		return ""
	}
	var u *UnsatisfiedError
	if errors.As(err, &u) {
		return "nvidia-container-cli: requirement error: " + u.Error()
	}
	if errors.Is(err, ErrInvalid) {
		return "nvidia-container-cli: requirement error: invalid expression"
	}
	return "nvidia-container-cli: " + err.Error()
}

// Requirements returns the requirement strings the NVIDIA container toolkit derives from an
// image's environment: none when NVIDIA_DISABLE_REQUIRE is true (as strconv.ParseBool
// reads it); otherwise every NVIDIA_REQUIRE_* value except NVIDIA_REQUIRE_JETPACK*, in
// variable-name order, plus "cuda>=MAJOR.MINOR" from CUDA_VERSION when the image sets
// CUDA_VERSION but not NVIDIA_REQUIRE_CUDA.
func Requirements(env map[string]string) ([]string, error) {
	if v, ok := env["NVIDIA_DISABLE_REQUIRE"]; ok {
		if d, _ := strconv.ParseBool(v); d {
			return nil, nil
		}
	}
	var names []string
	for k := range env {
		if strings.HasPrefix(k, "NVIDIA_REQUIRE_") && !strings.HasPrefix(k, "NVIDIA_REQUIRE_JETPACK") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var reqs []string
	for _, k := range names {
		reqs = append(reqs, env[k])
	}
	if cv := env["CUDA_VERSION"]; cv != "" && env["NVIDIA_REQUIRE_CUDA"] == "" {
		mm, err := majorMinor(cv)
		if err != nil {
			return nil, fmt.Errorf("CUDA_VERSION %q: %w", cv, err)
		}
		reqs = append(reqs, "cuda>="+mm)
	}
	return reqs, nil
}

// majorMinor reduces a semantic version ("13.1.1", "v12.4") to "13.1"; a bare major gets ".0".
func majorMinor(v string) (string, error) {
	v = strings.TrimPrefix(v, "v")
	core, _, _ := strings.Cut(v, "-")
	core, _, _ = strings.Cut(core, "+")
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return "", errors.New("invalid version string")
	}
	for _, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return "", errors.New("invalid version string")
		}
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return "", errors.New("invalid version string")
		}
	}
	if len(parts) == 1 {
		return parts[0] + ".0", nil
	}
	return parts[0] + "." + parts[1], nil
}

// UndecidedError is a requirement whose outcome depends on a fact of a device the caller
// does not know (an empty Device.Brand or Device.Arch): nvidia-container-cli reads it from
// NVML, so it may go either way.
type UndecidedError struct {
	// Requirement is the whole requirement string.
	Requirement string
	// Device is the index of the GPU whose fact is missing.
	Device int
	// Field is the missing fact: "brand" or "arch".
	Field string
}

func (e *UndecidedError) Error() string {
	first, _, _ := strings.Cut(e.Requirement, " ")
	return fmt.Sprintf("whether %s (or its other terms) holds depends on GPU %d's %s, which is unknown", first, e.Device, e.Field)
}

// Check evaluates every requirement for every device as nvidia-container-cli does: each
// device must satisfy each requirement; without devices they are evaluated once with arch
// and brand conditions taken as true. It returns nil, an *UnsatisfiedError, an error
// wrapping ErrInvalid, or, when nothing fails for certain but a device's unknown brand or
// arch decides a requirement, an *UndecidedError.
func Check(reqs []string, drv Driver, devs []Device) error {
	if len(devs) == 0 {
		for _, r := range reqs {
			if err := evaluate(r, drv, nil); err != nil {
				if errors.Is(err, errUnsatisfied) {
					return &UnsatisfiedError{Requirement: r, Device: -1}
				}
				return err
			}
		}
		return nil
	}
	var undecided error
	for i := range devs {
		for _, r := range reqs {
			err := evaluateDevice(r, drv, devs[i])
			var u *UndecidedError
			switch {
			case err == nil:
			case errors.As(err, &u):
				if undecided == nil {
					u.Requirement, u.Device = r, i
					undecided = u
				}
			case errors.Is(err, errUnsatisfied):
				return &UnsatisfiedError{Requirement: r, Device: i}
			default:
				return err
			}
		}
	}
	return undecided
}

// evaluateDevice evaluates req for dev. A brand the caller does not know is tried as every
// brand req names and as one it does not: any brand behaves like one of those under = and
// !=. When they disagree the result is an *UndecidedError. An unknown arch under an arch
// condition is undecided outright.
func evaluateDevice(req string, drv Driver, dev Device) error {
	brands, hasArch := mentioned(req)
	if dev.Arch == "" && hasArch {
		return &UndecidedError{Field: "arch"}
	}
	if dev.Brand != "" || len(brands) == 0 {
		return evaluate(req, drv, &dev)
	}
	// NUL never appears in a requirement, so this brand matches none of its terms.
	candidates := append(brands, "\x00another brand")
	var first error
	for i, b := range candidates {
		d := dev
		d.Brand = b
		err := evaluate(req, drv, &d)
		if i == 0 {
			first = err
			continue
		}
		if outcome(err) != outcome(first) {
			return &UndecidedError{Field: "brand"}
		}
	}
	return first
}

func outcome(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUnsatisfied):
		return 1
	}
	return 2
}

// mentioned returns the values req's brand conditions compare against and whether it has an
// arch condition.
func mentioned(req string) (brands []string, arch bool) {
	seen := map[string]bool{}
	for _, term := range strings.Split(req, " ") {
		for _, cond := range strings.Split(term, ",") {
			n := strings.IndexAny(cond, "<>=!")
			if n <= 0 {
				continue
			}
			switch strings.ToLower(cond[:n]) {
			case "arch":
				arch = true
			case "brand":
				v := strings.ToLower(strings.TrimLeft(cond[n:], "<>=!"))
				if !seen[v] {
					seen[v] = true
					brands = append(brands, v)
				}
			}
		}
	}
	return brands, arch
}

var errUnsatisfied = errors.New("unsatisfied")

// evaluate applies one requirement: terms separated by spaces are alternatives, conditions
// separated by commas within a term must all hold. Empty terms and conditions are skipped.
// Conditions after the first failing one in a term are not evaluated, so a malformed
// condition there goes unnoticed, as in nvidia-container-cli.
func evaluate(req string, drv Driver, dev *Device) error {
	ok := true
	for _, term := range strings.Split(req, " ") {
		if term == "" {
			continue
		}
		all := true
		for _, cond := range strings.Split(term, ",") {
			if cond == "" {
				continue
			}
			r, err := condition(cond, drv, dev)
			if err != nil {
				return err
			}
			ok = r
			if !r {
				all = false
				break
			}
		}
		if all {
			// A term whose conditions all held ends the search. A term with no conditions
			// at all also ends it, keeping the previous result, as nvidia-container-cli does.
			break
		}
	}
	if !ok {
		return errUnsatisfied
	}
	return nil
}

type comparator int

const (
	eq comparator = iota
	ne
	lt
	le
	gt
	ge
)

var operators = map[string]comparator{"=": eq, "!=": ne, "<": lt, "<=": le, ">": gt, ">=": ge}

func condition(cond string, drv Driver, dev *Device) (bool, error) {
	n := strings.IndexAny(cond, "<>=!")
	if n <= 0 {
		return false, fmt.Errorf("%q: %w", cond, ErrInvalid)
	}
	name, rest := cond[:n], cond[n:]
	m := 0
	for m < len(rest) && strings.IndexByte("<>=!", rest[m]) >= 0 {
		m++
	}
	cmp, ok := operators[rest[:m]]
	val := rest[m:]
	if !ok || val == "" {
		return false, fmt.Errorf("%q: %w", cond, ErrInvalid)
	}
	var (
		r   bool
		err error
	)
	switch strings.ToLower(name) {
	case "cuda":
		if drv.CUDA == "" {
			return true, nil
		}
		r, err = compareVersion(drv.CUDA, cmp, val)
	case "driver":
		if drv.Version == "" {
			return true, nil
		}
		r, err = compareVersion(drv.Version, cmp, val)
	case "arch":
		if dev == nil {
			return true, nil
		}
		r, err = compareVersion(dev.Arch, cmp, val)
	case "brand":
		if dev == nil {
			return true, nil
		}
		switch cmp {
		case eq:
			r = strings.EqualFold(dev.Brand, val)
		case ne:
			r = !strings.EqualFold(dev.Brand, val)
		default:
			err = errors.New("brand takes = or !=")
		}
	default:
		err = fmt.Errorf("unknown key %q", name)
	}
	if err != nil {
		return false, fmt.Errorf("%q: %v: %w", cond, err, ErrInvalid)
	}
	return r, nil
}

// compareVersion compares dotted numeric versions component by component, numerically.
// When one runs out first, trailing zero components of the other do not count ("13.1"
// equals "13.1.0") and any other remainder makes it the greater ("590.44.01" > "590").
func compareVersion(a string, cmp comparator, b string) (bool, error) {
	if strings.Trim(a, "0123456789.") != "" || strings.Trim(b, "0123456789.") != "" {
		return false, fmt.Errorf("%q or %q is not a dotted number", a, b)
	}
	for a != "" && b != "" {
		n1, ra, err := leadingNumber(a)
		if err != nil {
			return false, err
		}
		n2, rb, err := leadingNumber(b)
		if err != nil {
			return false, err
		}
		if n1 != n2 {
			switch cmp {
			case eq:
				return false, nil
			case ne:
				return true, nil
			case lt, le:
				return n1 < n2, nil
			default:
				return n1 > n2, nil
			}
		}
		a, b = strings.TrimLeft(ra, "."), strings.TrimLeft(rb, ".")
	}
	a, b = strings.TrimLeft(a, ".0"), strings.TrimLeft(b, ".0")
	switch cmp {
	case ne:
		return a != "" || b != "", nil
	case eq:
		return a == "" && b == "", nil
	case le:
		return a == "", nil
	case ge:
		return b == "", nil
	case lt:
		return a == "" && b != "", nil
	default:
		return a != "" && b == "", nil
	}
}

func leadingNumber(s string) (uint64, string, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, s, fmt.Errorf("%q does not start with a number", s)
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil || n == ^uint64(0) {
		return 0, s, fmt.Errorf("%q: number out of range", s[:i])
	}
	return n, s[i:], nil
}
