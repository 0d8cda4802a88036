package main

import (
	"flag"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/bench"
)

// flagsFirst returns the command line (args[0] the program) with each command's flags moved
// before its positional arguments, so that flags may follow them (llbuild verify ARCHIVE --json)
// although urfave/cli stops reading flags at the first argument; `--` ends the flags. It walks
// the command path as urfave dispatches it and knows from each command's declared flags which
// take a value. app must have had its Setup, which adds --help and --version.
//
// The mistakes urfave would report with the standard flag package's one-dash names it reports
// as usage errors, naming flags as help does (--target; a one-letter flag keeps its one dash):
// an unknown flag, a flag without its value, a value the flag refuses, a required flag left
// out. A one-value flag after the arguments may not repeat one given before them: which was
// meant is not clear.
func flagsFirst(app *cli.App, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	last := args[len(args)-1]
	if last == "--generate-bash-completion" || last == "-generate-bash-completion" {
		return args, nil // urfave completes the words as they are
	}
	rest, err := orderFlags(app.Flags, app.Commands, nil, args[1:])
	return append([]string{args[0]}, rest...), err
}

// orderFlags orders one command's arguments: its flags, then its positional arguments. The
// first positional argument naming one of cmds (the command's subcommands, or the app's
// commands where cmd is nil) hands the rest to that command, as urfave dispatches it.
func orderFlags(flags []cli.Flag, cmds []*cli.Command, cmd *cli.Command, args []string) ([]string, error) {
	set := flag.NewFlagSet("", flag.ContinueOnError)
	set.SetOutput(io.Discard)
	for _, f := range flags {
		if err := f.Apply(set); err != nil {
			return args, err
		}
	}
	var out, pos []string
	given := map[string]bool{} // by the flag's first name
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if len(pos) == 0 {
				if sub := findCommand(cmds, a); sub != nil {
					rest, err := commandArgs(sub, args[i+1:])
					return append(append(out, a), rest...), err
				}
				if cmd == nil || (len(cmds) > 0 && (a == "help" || a == "h")) {
					// Not a command urfave knows (it says so), or the help urfave adds to a
					// command's subcommands: the rest is theirs, as it is.
					return append(out, args[i:]...), nil
				}
			}
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name == "" || name[0] == '-' {
			return nil, usagef("bad flag syntax: %s", a)
		}
		f := set.Lookup(name)
		if f == nil {
			if len(pos) > 0 {
				return nil, usagef("unknown flag %s after the arguments (put -- before an argument that starts with -)", flagName(name))
			}
			return nil, usagef("flag provided but not defined: %s", flagName(name))
		}
		decl := flagOf(flags, name)
		first := decl.Names()[0]
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if !hasValue {
				value = "true"
			}
			if err := set.Set(name, value); err != nil {
				return nil, usagef("invalid boolean value %q for %s: %v", value, flagName(name), err)
			}
			given[first] = true
			out = append(out, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, usagef("flag needs an argument: %s", flagName(name))
			}
			i++
			value = args[i]
		}
		if err := set.Set(name, value); err != nil {
			return nil, usagef("invalid value %q for flag %s: %v", value, flagName(name), err)
		}
		if s, ok := decl.(cli.DocGenerationSliceFlag); len(pos) > 0 && given[first] && !(ok && s.IsSliceFlag()) {
			return nil, usagef("%s is given twice", strings.TrimSuffix(a, "="+value))
		}
		given[first] = true
		if hasValue {
			out = append(out, a)
		} else {
			out = append(out, args[i-1], value)
		}
	}
	if cmd != nil && !given["help"] {
		var missing []string
		for _, f := range cmd.Flags {
			if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() && !given[f.Names()[0]] && !inEnv(f) {
				missing = append(missing, f.Names()[0])
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			return nil, usagef("Required flag %q not set", missing[0])
		default:
			return nil, usagef("Required flags %q not set", strings.Join(missing, ", "))
		}
	}
	for _, p := range pos {
		if len(p) > 1 && p[0] == '-' {
			out = append(out, "--") // urfave would read it as a flag
			break
		}
	}
	return append(out, pos...), nil
}

// commandArgs orders the arguments of cmd, with the help flag urfave gives every command.
func commandArgs(cmd *cli.Command, args []string) ([]string, error) {
	flags := append([]cli.Flag{}, cmd.Flags...)
	if !cmd.HideHelp && cli.HelpFlag != nil && flagOf(flags, "help") == nil {
		flags = append(flags, cli.HelpFlag)
	}
	return orderFlags(flags, cmd.Subcommands, cmd, args)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func flagOf(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// flagName writes a flag as help writes it: --target, and -t for a one-letter flag.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// inEnv says whether one of f's environment variables is set, which urfave counts as giving it.
func inEnv(f cli.Flag) bool {
	e, ok := f.(interface{ GetEnvVars() []string })
	if !ok {
		return false
	}
	for _, v := range e.GetEnvVars() {
		if _, set := os.LookupEnv(v); set {
			return true
		}
	}
	return false
}

// judgeFlags are the judge's settings, the same flags and defaults on every command that
// decides from measured speed (bench, publish's gate, bisect).
func judgeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "alpha", Value: bench.DefaultAlpha, Usage: "the judge's level, `P`: faster or slower is said only when Wilcoxon's signed-rank test of the rounds' log ratios gives a two-sided p at or below it"},
		&cli.Float64Flag{Name: "min-step", Value: bench.DefaultMinStep, Usage: "the least |median ratio - 1| the judge calls a difference, `FRACTION`"},
	}
}

// judgeOf reads the judge's flags.
func judgeOf(c *cli.Context) (bench.Judge, error) {
	j := bench.Judge{Alpha: c.Float64("alpha"), MinStep: c.Float64("min-step"), Test: bench.TestSignedRank}
	if err := j.Validate(); err != nil {
		return j, usageError{err}
	}
	return j, nil
}
