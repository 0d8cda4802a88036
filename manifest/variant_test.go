package manifest

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A sweep of a switch (a flag that takes no value, such as --backend-sampling) sweeps on and
// off: the values are read as such and named so, anything else is refused before a variant is
// made. Value options keep their values as given.
func TestGridReadsSwitchesAsOnAndOff(t *testing.T) {
	grid, err := Grid([]string{"--backend-sampling=true,0", "--spec-draft-n-max=3", "8"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range grid {
		var parts []string
		for _, s := range g {
			parts = append(parts, s.Name+"="+s.Value)
		}
		got = append(got, strings.Join(parts, " "))
	}
	want := []string{"--backend-sampling=on --spec-draft-n-max=3", "--backend-sampling=on --spec-draft-n-max=8",
		"--backend-sampling=off --spec-draft-n-max=3", "--backend-sampling=off --spec-draft-n-max=8"}
	if !slices.Equal(got, want) {
		t.Errorf("grid %q, want %q", got, want)
	}
	for sweep, why := range map[string]string{
		"--backend-sampling=on,fast": `is a switch (it takes no value): sweep it with on and off, not "fast"`,
		"-bs=1,yes":                  "a switch has two values, on and off: give both",
		"--no-spec-draft-backend-sampling=off,maybe": `not "maybe"`,
		"--threads=abc,2":       "--threads=abc: not a whole number",
		"--n-gpu-layers=all,-3": "--n-gpu-layers -3: llama-server takes -2 to",
		"--poll=-1,2":           "--poll -1: llama-server takes 0 to 100",
		"--poll=50,101":         "--poll 101: llama-server takes 0 to 100",
		"--ctx-size=-5,4096":    "--ctx-size -5: llama-server takes 0 to 2147483647",
		"--threads=1,1":         "1 is given twice",
		"GGML_SOMETHING=1,2,1":  "1 is given twice",
	} {
		if _, err := Grid([]string{sweep}); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("--sweep %s: %v, want %q", sweep, err, why)
		}
	}
	// what llama-server takes beside numbers in its range: -ngl's auto and all, -1 slots
	for _, sweep := range []string{"--n-gpu-layers=auto,all,40,-2", "--parallel=-1,2", "--threads=0,-1,4", "--bogus-flag=1,2"} {
		if _, err := Grid([]string{sweep}); err != nil {
			t.Errorf("--sweep %s: %v", sweep, err)
		}
	}
}

// A variant sets an option wherever the bundle gave it, under any of its names, and a switch on
// or off by its own form or its opposite; a switch that has no --no- form is off by its
// absence.
func TestSetOptionReplacesEveryNameOfTheOption(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		name, val string
		want      []string
	}{
		// a value option given under its short name, and with =
		{[]string{"-ub", "512", "--poll", "50"}, "--ubatch-size", "128", []string{"--ubatch-size", "128", "--poll", "50"}},
		{[]string{"--poll=50", "-t", "2"}, "--poll", "0", []string{"--poll", "0", "-t", "2"}},
		{[]string{"-t", "2", "--poll", "1", "--poll", "2"}, "--poll", "0", []string{"-t", "2", "--poll", "0"}},
		{[]string{"-t", "2"}, "--poll", "0", []string{"-t", "2", "--poll", "0"}},
		// a switch without a --no- form: on is the flag, off is its absence
		{[]string{"-t", "2"}, "--backend-sampling", "on", []string{"-t", "2", "--backend-sampling"}},
		{[]string{"-bs", "-t", "2"}, "--backend-sampling", "off", []string{"-t", "2"}},
		{[]string{"-bs", "-t", "2"}, "--backend-sampling", "on", []string{"--backend-sampling", "-t", "2"}},
		// a switch with one, on by default in llama-server: off must be said
		{nil, "--spec-draft-backend-sampling", "off", []string{"--no-spec-draft-backend-sampling"}},
		{[]string{"--no-spec-draft-backend-sampling"}, "--spec-draft-backend-sampling", "on", []string{"--spec-draft-backend-sampling"}},
		{[]string{"--spec-draft-backend-sampling"}, "--no-spec-draft-backend-sampling", "on", []string{"--no-spec-draft-backend-sampling"}},
		{[]string{"--spec-draft-backend-sampling"}, "--no-spec-draft-backend-sampling", "off", []string{"--spec-draft-backend-sampling"}},
	} {
		o := llamaFlags[tc.name]
		got, err := setOption(tc.args, o, Setting{Name: tc.name, Value: tc.val})
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q with %s=%s: %q (%v), want %q", tc.args, tc.name, tc.val, got, err, tc.want)
		}
	}
	if _, err := setOption(nil, llamaFlags["--backend-sampling"], Setting{Name: "--backend-sampling", Value: "8"}); err == nil {
		t.Error("--backend-sampling=8 made a variant; a switch takes on or off")
	}
}

// The variant's manifest: a switch swept on and off as llama-server reads it, the environment's
// own setting of that option removed (an argument cannot turn off what LLAMA_ARG_X turned on),
// and the rest of the bundle as it was.
func TestVariantSetsASwitchOnAndOff(t *testing.T) {
	m, contents := sample(t)
	m.Server.Args = append(m.Server.Args, "-bs")
	m.Server.Env["LLAMA_ARG_BACKEND_SAMPLING"] = "1"
	sortFiles(m)
	src := writeBundle(t, m, contents)
	for _, tc := range []struct {
		value string
		on    bool
	}{{"on", true}, {"off", false}} {
		dst := filepath.Join(t.TempDir(), "v")
		base, err := Load(src)
		if err != nil {
			t.Fatal(err)
		}
		v, err := base.With([]Setting{{Name: "--backend-sampling", Value: tc.value}, {Name: "--spec-draft-n-max", Value: "6"}})
		if err != nil {
			t.Fatalf("%s: %v", tc.value, err)
		}
		if err := WriteVariant(context.Background(), src, dst, v); err != nil {
			t.Fatalf("%s: %v", tc.value, err)
		}
		loaded, err := Load(dst)
		if err != nil {
			t.Fatal(err)
		}
		set := loaded.Settings()
		if got, ok := set.Lookup("--backend-sampling"); (got == "true") != tc.on || ok != tc.on {
			t.Errorf("--backend-sampling=%s: the variant's settings say %q (%v), args %q env %v", tc.value, got, ok, v.Server.Args, v.Server.Env)
		}
		if _, ok := loaded.Server.Env["LLAMA_ARG_BACKEND_SAMPLING"]; ok {
			t.Errorf("--backend-sampling=%s: LLAMA_ARG_BACKEND_SAMPLING still in the variant's environment", tc.value)
		}
		if got, _ := set.Lookup("--spec-draft-n-max"); got != "6" || loaded.Server.Env["GGML_SYCL_ENABLE_VMM"] != "0" {
			t.Errorf("--backend-sampling=%s: n-max %q, env %v", tc.value, got, loaded.Server.Env)
		}
		if !slices.Contains(loaded.Server.Args, "--model") || slices.Contains(loaded.Server.Args, "on") || slices.Contains(loaded.Server.Args, "off") {
			t.Errorf("--backend-sampling=%s: args %q", tc.value, loaded.Server.Args)
		}
	}
}

// Two manifests start llama-server alike when they give the same options, under whatever names
// and whether as arguments or LLAMA_ARG_ variables, and the same other variables.
func TestSameServerSettings(t *testing.T) {
	m, _ := sample(t)
	with := func(args []string, env map[string]string) *Manifest {
		o := *m
		o.Server.Args = append(slices.Clone(m.Server.Args), args...)
		o.Server.Env = maps.Clone(m.Server.Env)
		maps.Copy(o.Server.Env, env)
		return &o
	}
	for _, tc := range []struct {
		name string
		a, b *Manifest
		same bool
	}{
		{"itself", m, with(nil, nil), true},
		{"-ub and --ubatch-size", with([]string{"-ub", "128"}, nil), with([]string{"--ubatch-size=128"}, nil), true},
		{"an argument and its variable", with([]string{"-bs"}, nil), with(nil, map[string]string{"LLAMA_ARG_BACKEND_SAMPLING": "1"}), true},
		{"given and left to the default", m, with([]string{"--spec-draft-p-min", "0"}, nil), false},
		{"another value", with([]string{"-ub", "128"}, nil), with([]string{"-ub", "256"}, nil), false},
		{"a switch and its --no- form", with([]string{"--spec-draft-backend-sampling"}, nil), with([]string{"--no-spec-draft-backend-sampling"}, nil), false},
		{"another variable", m, with(nil, map[string]string{"GGML_SCHED_MAX_COPIES": "1"}), false},
	} {
		if got := tc.a.SameServerSettings(tc.b); got != tc.same {
			t.Errorf("%s: SameServerSettings %v, want %v", tc.name, got, tc.same)
		}
	}
}

// A flag llama-server's table does not name (a newer server's) is taken to carry a value: set
// where the bundle gives it, in either form, or added.
func TestWithSetsAFlagItDoesNotKnow(t *testing.T) {
	m, _ := sample(t)
	m.Server.Args = append(m.Server.Args, "--future-knob", "1", "--future-other=a")
	v, err := m.With([]Setting{{Name: "--future-knob", Value: "2"}, {Name: "--future-other", Value: "b"}, {Name: "--future-new", Value: "3"}})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(m.Server.Args[:len(m.Server.Args)-3]), "--future-knob", "2", "--future-other", "b", "--future-new", "3")
	if !slices.Equal(v.Server.Args, want) {
		t.Errorf("args %q, want %q", v.Server.Args, want)
	}
	if slices.Contains(m.Server.Args, "2") {
		t.Error("With changed the manifest it was given")
	}
}
