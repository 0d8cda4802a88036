package llamaargs

import (
	"reflect"
	"strings"
	"testing"
)

const sampleArgCPP = `
common_arg & common_arg::set_env(const char * env) { return *this; }
void f() {
    add_opt(common_arg(
        {"-t", "--threads"}, "N",
        string_format("threads, see \"(x)\" (default: %d)", n), // a comment with common_arg(
        [](common_params & params, int value) { params.n = value; }
    ).set_env("LLAMA_ARG_THREADS"));
    /* add_opt(common_arg({"--commented-out"}, "x", [](common_params &) {})); */
    add_opt(common_arg(
        {"--context-shift"},
        {"--no-context-shift"},
        "whether to shift",
        [](common_params & params, bool value) { params.ctx_shift = value; }
    ).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_CONTEXT_SHIFT"));
    add_opt(common_arg({"--verbose-prompt"}, "print", [](common_params & params) { params.v = true; }));
    add_opt(common_arg(
        {"--override-kv"}, "KEY=TYPE:VALUE", "V2",
        "override",
        [](common_params & params, const std::string & a, const std::string & b) {}
    ));
    args.push_back(common_arg(
        {"load-on-startup"}, "NAME", "preset only",
        [](common_params &, const std::string &) {}
    ).set_env(COMMON_ARG_PRESET_LOAD_ON_STARTUP).set_preset_only());
}
`

func TestParseReadsFlagsValuesAndEnv(t *testing.T) {
	got, err := Parse([]byte(sampleArgCPP))
	if err != nil {
		t.Fatal(err)
	}
	want := []Option{
		{Flags: []string{"-t", "--threads"}, Value: true, Env: "LLAMA_ARG_THREADS"},
		{Flags: []string{"--context-shift"}, Neg: []string{"--no-context-shift"}, Env: "LLAMA_ARG_CONTEXT_SHIFT"},
		{Flags: []string{"--verbose-prompt"}},
		{Flags: []string{"--override-kv"}, Value: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse() = %+v, want %+v", got, want)
	}
}

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	for _, src := range []string{
		"int main() {}",
		`add_opt(common_arg({"-x"}, "help"));`,
		`add_opt(common_arg(flags, "help", handler));`,
		`add_opt(common_arg({"-x"}, "help", [](common_params &) {}).set_env("A", "B"));`,
	} {
		if _, err := Parse([]byte(src)); err == nil {
			t.Errorf("Parse(%q) = nil error, want one", src)
		}
	}
}

func TestAddedTakesOnlyTheFilesAddedLines(t *testing.T) {
	patch := strings.Join([]string{
		"diff --git a/common/arg.cpp b/common/arg.cpp",
		"--- a/common/arg.cpp",
		"+++ b/common/arg.cpp",
		"@@ -1,2 +1,3 @@",
		" context",
		"-removed",
		"+added one",
		"diff --git a/tools/server/server.cpp b/tools/server/server.cpp",
		"--- a/tools/server/server.cpp",
		"+++ b/tools/server/server.cpp",
		"+elsewhere",
	}, "\n")
	if got, want := string(Added([]byte(patch), ArgCPP)), "added one\n"; got != want {
		t.Errorf("Added() = %q, want %q", got, want)
	}
}

func TestMergeLetsLaterSourcesReplace(t *testing.T) {
	got := Merge([]Option{{Flags: []string{"-a"}}, {Flags: []string{"-b"}}}, []Option{{Flags: []string{"-a"}, Value: true}, {Flags: []string{"-c"}}})
	want := []Option{{Flags: []string{"-a"}, Value: true}, {Flags: []string{"-b"}}, {Flags: []string{"-c"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Merge() = %+v, want %+v", got, want)
	}
}
