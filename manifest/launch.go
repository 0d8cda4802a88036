package manifest

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Launch is how to start a bundle's llama-server: the command, its arguments (without
// --host and --port), the variables to add to the environment it inherits, and its working
// directory. It maps onto shim.Options: ServerPath, ServerArgs, Env (appended to
// os.Environ()) and Dir.
type Launch struct {
	// Path is the program to execute, absolute: llama-server, or the bundle's loader.
	Path string
	// Args are the program's arguments.
	Args []string
	// Env holds KEY=VALUE pairs, sorted, to append to the inherited environment.
	Env []string
	// Dir is the bundle's root, absolute; relative paths in Args resolve against it.
	Dir string
}

// Launch returns the command that starts the llama-server of the bundle at dir. It checks
// the manifest first, so a manifest whose arguments reach outside the bundle is refused.
func (m *Manifest) Launch(dir string) (Launch, error) {
	if err := m.Validate(); err != nil {
		return Launch{}, fmt.Errorf("manifest of %s: %w", dir, err)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return Launch{}, err
	}
	abs := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	var libs []string
	for _, d := range m.Server.LibraryPath {
		libs = append(libs, abs(d))
	}
	l := Launch{Dir: root}
	for k, v := range m.Server.Env {
		l.Env = append(l.Env, k+"="+v)
	}
	if m.Server.Loader != "" {
		// Executed through the bundle's loader, llama-server and every library come from
		// the bundle; the host's C library is never mixed in. ggml then finds dlopened
		// backends beside the loader (the "executable"), in the library directory.
		l.Path = abs(m.Server.Loader)
		l.Args = append([]string{"--library-path", strings.Join(libs, ":"), abs(m.Server.Executable)}, m.Server.Args...)
	} else {
		l.Path = abs(m.Server.Executable)
		l.Args = append([]string(nil), m.Server.Args...)
		if len(libs) > 0 {
			l.Env = append(l.Env, "LD_LIBRARY_PATH="+strings.Join(libs, ":"))
		}
	}
	sort.Strings(l.Env)
	return l, nil
}

// Flags of llama-server (upstream common/arg.cpp) whose value is a file it reads: in a
// bundle the value must be a file of the bundle.
var inputFlags = names(
	"-m", "--model",
	"-md", "--model-draft", "--spec-draft-model",
	"-mm", "--mmproj",
	"--lora", "--control-vector",
	"--chat-template-file", "--grammar-file", "-jf", "--json-schema-file",
	"-mv", "--model-vocoder", "--tts-speaker-file",
	"-f", "--file", "-sysf", "--system-prompt-file", "-bf", "--binary-file",
	"-lcs", "--lookup-cache-static",
	"--context-file", "--in-file", "--positive-file", "--negative-file",
	"--ui-config-file", "--webui-config-file",
)

// Flags that make llama-server write files, fetch from the network, or that the
// entrypoint sets itself: a bundle may not use them.
var refusedFlags = map[string]string{}

func init() {
	for _, f := range []string{"--log-file", "--slot-save-path", "--prompt-cache", "-o", "--output", "--output-file",
		"-lcd", "--lookup-cache-dynamic", "--logits-output-dir", "--log-prompts-dir", "--save-all-logits", "--kl-divergence-base"} {
		refusedFlags[f] = "writes files; a bundle is read-only and its digests must hold"
	}
	for _, f := range []string{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hfv", "-hfrv", "--hf-repo-v", "-hffv", "--hf-file-v",
		"-hfd", "-hfrd", "--hf-repo-draft", "--spec-draft-hf", "-mu", "--model-url", "-dr", "--docker-repo", "-hft", "--hf-token",
		"--path", "--models-dir", "--models-preset", "--media-path", "-mmu", "--mmproj-url"} {
		refusedFlags[f] = "reads files from outside the bundle or the network"
	}
	refusedFlags["--rpc"] = "sends the model and the work to other hosts (RPC servers); a bundle runs on the machine that serves it"
	for _, f := range []string{"--tools", "--tools-runtime", "--mcp-servers-config", "--mcp-servers-json", "--ui-mcp-proxy", "--webui-mcp-proxy"} {
		refusedFlags[f] = "lets the server's clients read and write files, run commands or reach other hosts from the serving host; a bundle serves completions only"
	}
	for _, f := range []string{"--host", "--port", "--api-key", "--api-key-file", "--ssl-key-file", "--ssl-cert-file"} {
		refusedFlags[f] = "is set by the entrypoint, which listens in front of llama-server"
	}
}

func names(ns ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range ns {
		m[n] = true
	}
	return m
}

// llamaFlags maps each of llama-server's flags, plain and negated, to its option;
// llamaEnv maps each environment variable an option answers to onto the flag it stands for.
var llamaFlags, llamaEnv = func() (map[string]*llamaOption, map[string]envFlag) {
	flags, env := map[string]*llamaOption{}, map[string]envFlag{}
	for i := range llamaOptions {
		o := &llamaOptions[i]
		for _, f := range append(append([]string(nil), o.flags...), o.neg...) {
			flags[f] = o
		}
		if o.env == "" {
			continue
		}
		env[o.env] = envFlag{flag: longest(o.flags), value: o.value}
		if len(o.neg) > 0 {
			// common_arg::get_value_from_env: LLAMA_ARG_NO_X turns a boolean option off.
			env[strings.Replace(o.env, "LLAMA_ARG_", "LLAMA_ARG_NO_", 1)] = envFlag{flag: longest(o.neg)}
		}
	}
	return flags, env
}()

// envFlag is the command-line form of an environment variable llama-server reads.
type envFlag struct {
	flag  string
	value bool
}

func longest(ss []string) string {
	l := ss[0]
	for _, s := range ss {
		if len(s) > len(l) {
			l = s
		}
	}
	return l
}

// classify says whether flag, or another name of the same option, reads a file of the
// bundle (input) or is refused, and why.
func classify(flag string) (input bool, refused string) {
	names := []string{flag}
	if o, ok := llamaFlags[flag]; ok {
		if slices.Contains(o.neg, flag) {
			return false, "" // turning an option off reaches nothing
		}
		names = append(names, o.flags...)
	}
	for _, n := range names {
		if why, ok := refusedFlags[n]; ok {
			return false, why
		}
		if inputFlags[n] {
			input = true
		}
	}
	return input, ""
}

// checkArgs reports arguments that reach outside the bundle: files that are not listed,
// absolute or escaping paths, and flags a bundle may not use. kinds maps listed paths to
// their kind.
func checkArgs(args []string, kinds map[string]string) []string {
	var errs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, value, hasValue := a, "", false
		if strings.HasPrefix(a, "--") {
			if f, v, ok := strings.Cut(a, "="); ok {
				flag, value, hasValue = f, v, true
			}
		}
		input, why := classify(flag)
		if why != "" {
			errs = append(errs, fmt.Sprintf("%s %s", flag, why))
			if o, known := llamaFlags[flag]; !hasValue && (!known || o.value) {
				i++
			}
			continue
		}
		if input {
			if !hasValue {
				if i+1 >= len(args) {
					errs = append(errs, fmt.Sprintf("%s has no value", flag))
					continue
				}
				i++
				value = args[i]
			}
			if err := CheckPath(value); err != nil {
				errs = append(errs, fmt.Sprintf("%s %v", flag, err))
			} else if _, ok := kinds[value]; !ok {
				errs = append(errs, fmt.Sprintf("%s %s is not a file of the bundle", flag, value))
			}
			continue
		}
		if escapes(a) || hasValue && escapes(value) {
			errs = append(errs, fmt.Sprintf("argument %q names a path outside the bundle", a))
		}
	}
	return errs
}

// escapes says whether an argument of unknown meaning looks like a path outside the
// bundle: absolute, or with a .. component.
func escapes(a string) bool {
	if strings.HasPrefix(a, "/") || strings.HasPrefix(a, "~/") {
		return true
	}
	for _, part := range strings.Split(a, "/") {
		if part == ".." {
			return true
		}
	}
	return strings.Contains(a, "/") && path.IsAbs(a)
}

//go:generate go run ./internal/llamaargs/generate -o llamaargs_gen.go

// llamaOption is one of llama-server's options (llamaargs_gen.go).
type llamaOption struct {
	flags, neg []string
	value      bool
	env        string
}
