package manifest

import (
	"maps"
	"slices"
	"strings"
)

// Settings are the llama-server options a bundle sets, from its arguments and from the
// LLAMA_ARG_* variables of its environment, keyed by each option's longest flag
// ("--ubatch-size" for -ub). A value option maps to its value; a switch maps to "true", or to
// "false" when its negated form (--no-x, LLAMA_ARG_NO_X) was given. As in llama.cpp, an
// argument wins over the environment. Arguments llama-server does not know are left out.
type Settings map[string]string

// Settings returns the options the manifest's server sets.
func (m *Manifest) Settings() Settings {
	s := Settings{}
	for _, k := range slices.Sorted(maps.Keys(m.Server.Env)) {
		ef, ok := llamaEnv[k]
		if !ok {
			continue
		}
		o := llamaFlags[ef.flag]
		s.set(o, ef.flag, m.Server.Env[k], true)
	}
	args := m.Server.Args
	for i := 0; i < len(args); i++ {
		flag, value, hasValue := args[i], "", false
		if strings.HasPrefix(flag, "--") {
			if f, v, ok := strings.Cut(flag, "="); ok {
				flag, value, hasValue = f, v, true
			}
		}
		o, ok := llamaFlags[flag]
		if !ok {
			continue
		}
		if o.value && !hasValue && i+1 < len(args) {
			i++
			value, hasValue = args[i], true
		}
		s.set(o, flag, value, hasValue)
	}
	return s
}

func (s Settings) set(o *llamaOption, given, value string, hasValue bool) {
	key := longest(o.flags)
	switch {
	case o.value:
		s[key] = value
	case isNeg(o, given):
		s[key] = "false"
	case hasValue && (value == "0" || strings.EqualFold(value, "false") || strings.EqualFold(value, "off")):
		s[key] = "false" // LLAMA_ARG_X=false
	default:
		s[key] = "true"
	}
}

func isNeg(o *llamaOption, flag string) bool {
	for _, n := range o.neg {
		if n == flag {
			return true
		}
	}
	return false
}

// Lookup returns the value of the option one of whose names is flag ("-ub" finds
// --ubatch-size), and whether the bundle sets it.
func (s Settings) Lookup(flag string) (string, bool) {
	o, ok := llamaFlags[flag]
	if !ok {
		v, ok := s[flag]
		return v, ok
	}
	v, ok := s[longest(o.flags)]
	return v, ok
}

// SameServerSettings says whether o starts llama-server as m does, as far as llbuild can tell:
// the same options (Settings: an option given under another name or in the environment is the
// same option) and the same other environment variables. An option one gives and the other
// leaves to llama-server's default counts as different.
func (m *Manifest) SameServerSettings(o *Manifest) bool {
	other := func(env map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range env {
			if _, ok := llamaEnv[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	return maps.Equal(m.Settings(), o.Settings()) && maps.Equal(other(m.Server.Env), other(o.Server.Env))
}
