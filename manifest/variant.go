package manifest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// Setting is one llama-server setting a variant changes: a flag ("--poll") and its value, or an
// environment variable (no leading dash) and its value.
type Setting struct {
	Name, Value string
}

// IsFlag says whether the setting is a command-line flag rather than a variable.
func (s Setting) IsFlag() bool { return strings.HasPrefix(s.Name, "-") }

// With returns m with other settings: its llama-server arguments give each flag its new value
// (replacing the bundle's under any of the option's names, or added where the bundle does not
// give it; a switch is on or off, see setOption) and its environment sets each variable. The
// result is checked as a bundle's manifest is; m is not changed.
func (m *Manifest) With(set []Setting) (*Manifest, error) {
	v := *m
	v.Server.Args = slices.Clone(m.Server.Args)
	v.Server.Env = maps.Clone(m.Server.Env)
	if v.Server.Env == nil {
		v.Server.Env = map[string]string{}
	}
	for _, s := range set {
		if !s.IsFlag() {
			v.Server.Env[s.Name] = s.Value
			continue
		}
		o, known := llamaFlags[s.Name]
		if !known {
			// a flag llama-server's table does not name: taken to carry a value, under one name
			o = &llamaOption{flags: []string{s.Name}, value: true}
		}
		args, err := setOption(v.Server.Args, o, s)
		if err != nil {
			return nil, err
		}
		v.Server.Args = args
		if o.env != "" {
			// an argument wins over the environment, but a switch the environment turns on
			// can be turned off only there: the variant's own setting is the only one
			delete(v.Server.Env, o.env)
			delete(v.Server.Env, strings.Replace(o.env, "LLAMA_ARG_", "LLAMA_ARG_NO_", 1))
		}
	}
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("the variant's manifest would be invalid: %w", err)
	}
	return &v, nil
}

// WriteVariant writes at dst the bundle at src with the manifest v (Manifest.With of src's):
// the same files, hard-linked where the filesystem allows (a sweep's variants share one model
// on disk). dst, replaced if it exists, is assembled beside itself and renamed into place.
func WriteVariant(ctx context.Context, src, dst string, v *Manifest) error {
	data, err := v.Encode()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".llbuild-variant-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range v.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		to := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		from := filepath.Join(src, filepath.FromSlash(f.Path))
		if f.Link != "" {
			if err := os.Symlink(f.Link, to); err != nil {
				return err
			}
			continue
		}
		if os.Link(from, to) == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return fmt.Errorf("copying %s: %w", f.Path, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, FileName), data, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return nil
}

// setOption returns args with option o set as s says, wherever the bundle gave it under any of
// its names (-ub or --ubatch-size; a switch or its --no- form): the new setting takes the place
// of the first, the others are removed. A value option gets s.Value. A switch (on or off, see
// switchValue) is on with s.Name given, off with its opposite form (--no-x for --x, and the
// reverse), or, where it has none, with neither.
func setOption(args []string, o *llamaOption, s Setting) ([]string, error) {
	names := append(slices.Clone(o.flags), o.neg...)
	var out []string
	at := -1
	for i := 0; i < len(args); i++ {
		flag, _, hasValue := strings.Cut(args[i], "=")
		if !strings.HasPrefix(args[i], "--") {
			flag, hasValue = args[i], false
		}
		if !slices.Contains(names, flag) {
			out = append(out, args[i])
			continue
		}
		if at < 0 {
			at = len(out)
		}
		if o.value && !hasValue && i+1 < len(args) {
			i++ // its value goes with it
		}
	}
	var with []string
	if o.value {
		with = []string{s.Name, s.Value}
	} else {
		on, err := switchValue(s)
		if err != nil {
			return nil, err
		}
		switch {
		case on:
			with = []string{s.Name}
		case isNeg(o, s.Name):
			with = []string{longest(o.flags)}
		case len(o.neg) > 0:
			with = []string{longest(o.neg)}
		}
	}
	if at < 0 {
		at = len(out)
	}
	return slices.Concat(out[:at], with, out[at:]), nil
}

// switchValue reads a switch's value in a sweep: on, true, 1 or yes; off, false, 0 or no.
func switchValue(s Setting) (bool, error) {
	switch strings.ToLower(s.Value) {
	case "on", "true", "1", "yes":
		return true, nil
	case "off", "false", "0", "no":
		return false, nil
	}
	return false, inputerr.Errorf("%s is a switch (it takes no value): sweep it with on and off, not %q", s.Name, s.Value)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, _, err := CopyAndHashFile(context.Background(), out, in, nil); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Grid reads --sweep SETTING=V1,V2,... flags into every combination of their values
// (64 at most), each a list of settings in the flags' order.
func Grid(sweeps []string) ([][]Setting, error) {
	type axis struct {
		setting string
		values  []string
	}
	// The CLI splits a slice flag's value at commas: "--poll=0,50" arrives as "--poll=0" and
	// "50". A piece with "=" starts a setting, one without is another value of the one before.
	var joined []string
	for _, sw := range sweeps {
		if !strings.Contains(sw, "=") && len(joined) > 0 {
			joined[len(joined)-1] += "," + sw
			continue
		}
		joined = append(joined, sw)
	}
	var axes []axis
	for _, sw := range joined {
		k, vs, ok := strings.Cut(sw, "=")
		if !ok || k == "" || vs == "" {
			return nil, inputerr.Errorf("--sweep %q: want SETTING=V1,V2,... (a flag such as --poll, or an environment switch)", sw)
		}
		a := axis{setting: k}
		for _, v := range strings.Split(vs, ",") {
			if v = strings.TrimSpace(v); v != "" {
				a.values = append(a.values, v)
			}
		}
		if len(a.values) < 2 {
			return nil, inputerr.Errorf("--sweep %q: give two values or more", sw)
		}
		if o, known := llamaFlags[k]; known && o.value {
			for _, v := range a.values {
				if msg := CheckKnobSetting(longest(o.flags), v); msg != "" {
					return nil, inputerr.Errorf("--sweep %q: %s", sw, msg)
				}
			}
		}
		if seen := map[string]bool{}; true {
			for _, v := range a.values {
				if seen[v] {
					return nil, inputerr.Errorf("--sweep %q: %s is given twice; each value makes one variant", sw, v)
				}
				seen[v] = true
			}
		}
		if o, known := llamaFlags[k]; known && !o.value {
			for i, v := range a.values {
				on, err := switchValue(Setting{Name: k, Value: v})
				if err != nil {
					return nil, inputerr.Errorf("--sweep %q: %v", sw, err)
				}
				a.values[i] = map[bool]string{true: "on", false: "off"}[on]
			}
			if len(slices.Compact(slices.Sorted(slices.Values(a.values)))) < 2 {
				return nil, inputerr.Errorf("--sweep %q: a switch has two values, on and off: give both", sw)
			}
		}
		axes = append(axes, a)
	}
	grid := [][]Setting{nil}
	for _, a := range axes {
		var next [][]Setting
		for _, g := range grid {
			for _, v := range a.values {
				next = append(next, append(slices.Clone(g), Setting{Name: a.setting, Value: v}))
			}
		}
		grid = next
	}
	if len(grid) > 64 {
		return nil, inputerr.Errorf("--sweep makes %d variants; keep a sweep to 64 or fewer", len(grid))
	}
	return grid, nil
}
