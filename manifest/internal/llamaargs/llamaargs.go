// Package llamaargs reads llama.cpp's command-line options, with the environment variable
// each one answers to, from the source (common/arg.cpp and the patch series' additions to it)
// and renders them as the Go table the manifest checks launch settings against.
package llamaargs

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/internal/digest"

	"github.com/llbuild/llbuild/patches"
)

// Option is one common_arg of llama.cpp.
type Option struct {
	// Flags are the option's names (-t, --threads); Neg the names of its negated form
	// (--no-context-shift), set only for boolean options.
	Flags, Neg []string
	// Value says whether the option takes a value on the command line.
	Value bool
	// Env is the variable llama.cpp reads the option from (set_env), or empty. An option
	// with Neg also answers to Env with LLAMA_ARG_ replaced by LLAMA_ARG_NO_.
	Env string
}

// Parse reads the options that a common/arg.cpp declares with common_arg(...). Options only
// a preset file can set (set_preset_only) are left out: they are not flags.
func Parse(src []byte) ([]Option, error) {
	s := stripComments(string(src))
	var opts []Option
	var errs []error
	for i := 0; ; {
		j := strings.Index(s[i:], "common_arg(")
		if j < 0 {
			break
		}
		start := i + j
		i = start + len("common_arg(")
		if start > 0 && isIdent(s[start-1]) {
			continue
		}
		args, end, err := callArgs(s, i-1)
		if err != nil {
			errs = append(errs, fmt.Errorf("common_arg at line %d: %w", lineOf(s, start), err))
			continue
		}
		i = end
		o, err := option(args)
		if err != nil {
			errs = append(errs, fmt.Errorf("common_arg at line %d: %w", lineOf(s, start), err))
			continue
		}
		presetOnly := false
		// Follow the chain of setters: ).set_env("X").set_examples({...}) ...
		for {
			k := skipSpace(s, i)
			if k >= len(s) || s[k] != '.' {
				break
			}
			k = skipSpace(s, k+1)
			n := k
			for n < len(s) && isIdent(s[n]) {
				n++
			}
			name := s[k:n]
			n = skipSpace(s, n)
			if name == "" || n >= len(s) || s[n] != '(' {
				break
			}
			sargs, send, err := callArgs(s, n)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s at line %d: %w", name, lineOf(s, k), err))
				break
			}
			i = send
			switch name {
			case "set_preset_only":
				presetOnly = true
			case "set_env":
				if len(sargs) != 1 {
					errs = append(errs, fmt.Errorf("set_env at line %d: %d arguments, want 1", lineOf(s, k), len(sargs)))
					continue
				}
				if v, err := strconv.Unquote(sargs[0]); err == nil {
					o.Env = v
				} else if !isName(sargs[0]) {
					errs = append(errs, fmt.Errorf("set_env at line %d: %s is neither a string nor a macro", lineOf(s, k), sargs[0]))
				}
				// A macro names a preset-only key, checked through presetOnly.
			}
		}
		if presetOnly {
			continue
		}
		if o.Env != "" && !strings.HasPrefix(o.Env, "LLAMA_ARG_") && !isName(o.Env) {
			errs = append(errs, fmt.Errorf("%s: environment variable %q is not a name", o.Flags[0], o.Env))
		}
		opts = append(opts, o)
	}
	if len(opts) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no common_arg found: is this common/arg.cpp?"))
	}
	return opts, errors.Join(errs...)
}

// option interprets the arguments of one of common_arg's constructors (common/arg.h):
// (args, help, handler), (args, args_neg, help, handler), (args, hint, help, handler) and
// (args, hint, hint2, help, handler).
func option(args []string) (Option, error) {
	if len(args) < 3 || len(args) > 5 {
		return Option{}, fmt.Errorf("%d arguments, want 3 to 5", len(args))
	}
	flags, err := stringList(args[0])
	if err != nil || len(flags) == 0 {
		return Option{}, fmt.Errorf("first argument %.40q is not a list of flags", args[0])
	}
	o := Option{Flags: flags}
	switch {
	case strings.HasPrefix(args[1], "{"):
		if o.Neg, err = stringList(args[1]); err != nil {
			return Option{}, fmt.Errorf("%s: negated flags: %w", flags[0], err)
		}
	case len(args) > 3:
		o.Value = true
	}
	return o, nil
}

// Merge adds the options of later sources (the patch series) to those of earlier ones; an
// option whose first flag is already known replaces the earlier one, as a patch does.
func Merge(sets ...[]Option) []Option {
	var out []Option
	at := map[string]int{}
	for _, set := range sets {
		for _, o := range set {
			if i, ok := at[o.Flags[0]]; ok {
				out[i] = o
				continue
			}
			at[o.Flags[0]] = len(out)
			out = append(out, o)
		}
	}
	return out
}

// Added returns the lines a unified diff adds to the file at path (a/ b/ prefixes
// stripped), joined: the code a patch brings to that file, to be parsed on its own.
func Added(patch []byte, path string) []byte {
	var out bytes.Buffer
	in := false
	for _, line := range strings.Split(string(patch), "\n") {
		switch {
		case strings.HasPrefix(line, "+++ "):
			in = strings.TrimPrefix(strings.TrimPrefix(line, "+++ "), "b/") == path
		case strings.HasPrefix(line, "diff "), strings.HasPrefix(line, "--- "):
			if strings.HasPrefix(line, "diff ") {
				in = false
			}
		case in && strings.HasPrefix(line, "+"):
			out.WriteString(line[1:])
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// Input names one source the table was made from, for the generated file's header.
type Input struct {
	Name string
	Data []byte
}

// Generate renders opts as Go source for package pkg: a variable llamaOptions of type
// []llamaOption, which the package declares. The header names the inputs by sha256, so a
// stale table is told from a current one.
func Generate(pkg string, opts []Option, inputs []Input) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by manifest/internal/llamaargs/generate; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	b.WriteString("// llamaOptions are llama-server's command-line options, with the environment variable\n// each answers to, read from:\n")
	for _, in := range inputs {
		fmt.Fprintf(&b, "//   - %s (sha256 %s)\n", in.Name, digest.SHA256Hex(in.Data))
	}
	b.WriteString("var llamaOptions = []llamaOption{\n")
	sorted := append([]Option(nil), opts...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Flags[0] < sorted[j].Flags[0] })
	for _, o := range sorted {
		fmt.Fprintf(&b, "\t{flags: %s", goList(o.Flags))
		if len(o.Neg) > 0 {
			fmt.Fprintf(&b, ", neg: %s", goList(o.Neg))
		}
		if o.Value {
			b.WriteString(", value: true")
		}
		if o.Env != "" {
			fmt.Fprintf(&b, ", env: %q", o.Env)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func goList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[]string{" + strings.Join(q, ", ") + "}"
}

// stringList parses a C++ initializer list of string literals: { "-t", "--threads" }.
func stringList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil, fmt.Errorf("%.40q is not a braced list", s)
	}
	var out []string
	for _, part := range splitTop(s[1 : len(s)-1]) {
		v, err := strconv.Unquote(part)
		if err != nil {
			return nil, fmt.Errorf("%.40q is not a string literal", part)
		}
		out = append(out, v)
	}
	return out, nil
}

// callArgs splits the argument list of the call whose '(' is at s[open], returning the
// top-level arguments, trimmed, and the index after the closing ')'.
func callArgs(s string, open int) ([]string, int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			end, err := skipLiteral(s, i)
			if err != nil {
				return nil, 0, err
			}
			i = end - 1
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
			if depth == 0 {
				if c != ')' {
					return nil, 0, fmt.Errorf("unbalanced %q", c)
				}
				return splitTop(s[open+1 : i]), i + 1, nil
			}
		}
	}
	return nil, 0, errors.New("no closing parenthesis")
}

// splitTop splits s at its top-level commas.
func splitTop(s string) []string {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			end, err := skipLiteral(s, i)
			if err != nil {
				return append(out, strings.TrimSpace(s[from:]))
			}
			i = end - 1
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[from:i]))
				from = i + 1
			}
		}
	}
	if last := strings.TrimSpace(s[from:]); last != "" {
		out = append(out, last)
	}
	return out
}

// skipLiteral returns the index after the string or character literal starting at s[i].
func skipLiteral(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1, nil
		case '\n':
			return 0, fmt.Errorf("unterminated literal at line %d", lineOf(s, i))
		}
	}
	return 0, fmt.Errorf("unterminated literal at line %d", lineOf(s, i))
}

// stripComments blanks // and /* */ comments outside literals, keeping line numbers.
func stripComments(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"' || b[i] == '\'' && i > 0 && !isIdent(b[i-1]):
			// A quote after an identifier character is a digit separator (1'000), not a literal.
			if end, err := skipLiteral(s, i); err == nil {
				i = end - 1
			}
		case b[i] == 'R' && i+2 < len(b) && b[i+1] == '"':
			// Raw strings R"delim( ... )delim" may hold anything.
			open := strings.IndexByte(s[i+2:], '(')
			if open < 0 {
				continue
			}
			delim := s[i+2 : i+2+open]
			end := strings.Index(s[i+2+open:], ")"+delim+"\"")
			if end >= 0 {
				i = i + 2 + open + end + len(delim) + 1
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				b[i] = ' '
				i++
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/') {
				if b[i] != '\n' {
					b[i] = ' '
				}
				i++
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	return i
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isIdent(s[i]) {
			return false
		}
	}
	return s != ""
}

func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// ArgCPP is the file of llama.cpp that declares its options.
const ArgCPP = "common/arg.cpp"

// Table renders the table for package pkg from the llama.cpp source tree at srcDir and the
// patch series that llbuild applies to it.
func Table(pkg, srcDir string, series []patches.Patch) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(srcDir, filepath.FromSlash(ArgCPP)))
	if err != nil {
		return nil, err
	}
	opts, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ArgCPP, err)
	}
	sets := [][]Option{opts}
	inputs := []Input{{Name: "llama.cpp " + ArgCPP, Data: src}}
	for _, p := range series {
		add := Added(p.Data, ArgCPP)
		if len(bytes.TrimSpace(add)) == 0 {
			continue
		}
		// A patch's added lines may hold no complete common_arg (a changed help text): only
		// the whole options it adds are taken.
		o, err := Parse(add)
		if err != nil && len(o) == 0 && !strings.Contains(string(add), "common_arg(") {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("patch %s, additions to %s: %w", p.Name, ArgCPP, err)
		}
		sets = append(sets, o)
		inputs = append(inputs, Input{Name: "patches/" + p.Name, Data: p.Data})
	}
	return Generate(pkg, Merge(sets...), inputs)
}
