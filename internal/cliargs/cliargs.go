package cliargs

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/llbuild/llbuild/targets"
)

// FlagsFirst returns the command line (args[0] the program) with each command's flags moved
// before its positional arguments, so that flags may follow them (llbuild verify ARCHIVE --json)
// although urfave/cli stops reading flags at the first argument; `--` ends the flags. It walks
// the command path as urfave dispatches it and knows from each command's declared flags which
// take a value. app must have had its Setup, which adds --help and --version.
//
// The mistakes urfave would report with the standard flag package's one-dash names it reports
// as usage errors, naming flags as help does (--target; a one-letter flag keeps its one dash):
// an unknown flag, a flag without its value, a value the flag refuses, a required flag left
// out, a flag given an empty value (--out ""). A one-value flag given twice with two values (--out a ... --out b) is refused, as is one
// after the arguments repeating one before them: which was meant is not clear.
func FlagsFirst(app *cli.App, args []string) ([]string, error) {
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
	given := map[string]bool{}    // by the flag's first name
	values := map[string]string{} // the value each one-value flag was given
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if len(pos) == 0 {
				if sub := FindCommand(cmds, a); sub != nil {
					rest, err := commandArgs(sub, args[i+1:])
					return append(append(out, a), rest...), err
				}
				if len(cmds) > 0 && (cmd == nil || cmd.Action == nil) && a != "help" && a != "h" {
					// urfave says "No help topic" and exits 3; and a misspelt subcommand's
					// flags were reported as unknown flags after the arguments
					return nil, unknownCommand(cmds, cmd, a)
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
		decl := FlagOf(flags, name)
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
		if value == "" {
			// --out "$UNSET" is a script's mistake: taken as the flag left out, it did the
			// default (recipe bump rewrote llbuild's own recipe; preflight checked this machine)
			return nil, usagef("%s is empty: give it a value, or leave the flag out", flagName(name))
		}
		if err := set.Set(name, value); err != nil {
			return nil, usagef("invalid value %q for flag %s: %v", value, flagName(name), err)
		}
		if s, ok := decl.(cli.DocGenerationSliceFlag); given[first] && !(ok && s.IsSliceFlag()) && (len(pos) > 0 || values[first] != value) {
			return nil, usagef("%s is given twice (%q, then %q): it takes one value; give it once", flagName(name), values[first], value)
		}
		given[first], values[first] = true, value
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

// unknownCommand is the usage error for name, which names none of cmds (the subcommands of
// cmd, or the app's commands where cmd is nil), with the nearest name where one is near.
func unknownCommand(cmds []*cli.Command, cmd *cli.Command, name string) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	where, help := "llbuild", "llbuild --help"
	if cmd != nil {
		where, help = "llbuild "+cmd.Name, "llbuild "+cmd.Name+" --help"
	}
	msg := fmt.Sprintf("%s has no command %q", where, name)
	if near := targets.Nearest(name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return usagef("%s: its commands are %s (%s)", msg, strings.Join(names, ", "), help)
}

// commandArgs orders the arguments of cmd, with the help flag urfave gives every command.
func commandArgs(cmd *cli.Command, args []string) ([]string, error) {
	flags := append([]cli.Flag{}, cmd.Flags...)
	if !cmd.HideHelp && cli.HelpFlag != nil && FlagOf(flags, "help") == nil {
		flags = append(flags, cli.HelpFlag)
	}
	return orderFlags(flags, cmd.Subcommands, cmd, args)
}

// FindCommand is the command of cmds named name (or aliased so), nil when none is.
func FindCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// FlagOf is the flag of flags named name (or aliased so), nil when none is.
func FlagOf(flags []cli.Flag, name string) cli.Flag {
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

// Error is a mistake in the command line's flags: the caller's to fix (exit 2).
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }
