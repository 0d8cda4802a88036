package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/gguf"
)

func hexOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// tinyFacts are the facts of gguf's tiny test models.
func tinyFacts(t testing.TB, o gguf.TinyOptions) (gguf.Facts, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := gguf.WriteTinyLlama(&buf, o); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f.Facts(), buf.Bytes()
}

// sample returns a valid manifest and the contents of its files.
func sample(t testing.TB) (*Manifest, map[string][]byte) {
	t.Helper()
	modelFacts, model := tinyFacts(t, gguf.DefaultTiny())
	draftFacts, draft := tinyFacts(t, gguf.DraftTiny())
	contents := map[string][]byte{
		"bin/llama-server":    []byte("\x7fELF server"),
		"lib/libllama.so.0.1": []byte("\x7fELF lib"),
		"models/model.gguf":   model,
		"models/draft.gguf":   draft,
	}
	kinds := map[string]string{"bin/llama-server": KindExecutable, "lib/libllama.so.0.1": KindLibrary, "models/model.gguf": KindModel, "models/draft.gguf": KindDraft}
	m := &Manifest{
		SchemaVersion: SchemaVersion,
		Entrypoint:    DefaultEntrypoint(),
		Target:        Target{Name: "cpu-v3", Backend: "cpu", Host: Host{CPU: CPU{Features: []string{"AVX2", "FMA"}}}},
		Build: Build{
			PlanHash: strings.Repeat("ab", 32),
			Source:   Source{URL: "https://github.com/ggml-org/llama.cpp", Commit: strings.Repeat("1", 40)},
			Patches:  []Patch{{Name: "0001-x.patch", SHA256: strings.Repeat("c", 64)}},
			Images:   []Image{{Role: "devel", Ref: "ubuntu:24.04@sha256:" + strings.Repeat("d", 64)}},
			Builder:  Builder{Name: "llbuild", Version: "dev", Executor: "host"},
			Plan:     samplePlan(t, "cpu-v3", strings.Repeat("ab", 32)),
		},
		Models: Models{Model: Model{Path: "models/model.gguf", GGUF: modelFacts}, Draft: &Model{Path: "models/draft.gguf", GGUF: draftFacts}},
		Server: Server{
			Executable:  "bin/llama-server",
			LibraryPath: []string{"lib"},
			Args:        []string{"--model", "models/model.gguf", "--model-draft", "models/draft.gguf", "--spec-type", "draft-simple", "--ctx-size", "512", "--cache-ram", "0"},
			Env:         map[string]string{"GGML_SYCL_ENABLE_VMM": "0"},
		},
		Contract: DefaultContract(),
	}
	for _, p := range []string{"bin/llama-server", "lib/libllama.so.0.1", "models/draft.gguf", "models/model.gguf"} {
		m.Files = append(m.Files, File{Path: p, Kind: kinds[p], Size: int64(len(contents[p])), SHA256: hexOf(contents[p])})
	}
	m.Files = append(m.Files[:2], append([]File{{Path: "lib/libllama.so.0", Kind: KindLibrary, Link: "libllama.so.0.1"}}, m.Files[2:]...)...)
	// keep files sorted: lib/libllama.so.0 < lib/libllama.so.0.1
	m.Files[1], m.Files[2] = m.Files[2], m.Files[1]
	m.Files[0], m.Files[1] = m.Files[1], m.Files[0]
	sortFiles(m)
	if err := m.Validate(); err != nil {
		t.Fatalf("sample manifest does not validate: %v", err)
	}
	return m, contents
}

// samplePlan is a plan as provenance.json records it: keys in the pipeline's field order,
// not sorted, and characters JSON encoders like to escape.
func samplePlan(t testing.TB, target, hash string) PlanJSON {
	t.Helper()
	raw := `{"schemaVersion": 2, "target": "` + target + `", "configure": ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=120"],
		"env": {"SOURCE_DATE_EPOCH": "1767225600", "CC": "gcc"}, "runtime": {"healthcheck": ["CMD-SHELL", "curl -f http://localhost:8080/health || exit 1 && true <x>"]},
		"hash": "` + hash + `"}`
	p, err := NewPlanJSON([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sortFiles(m *Manifest) {
	for i := 1; i < len(m.Files); i++ {
		for j := i; j > 0 && m.Files[j-1].Path > m.Files[j].Path; j-- {
			m.Files[j-1], m.Files[j] = m.Files[j], m.Files[j-1]
		}
	}
}

// writeBundle writes m and its contents as a bundle directory.
func writeBundle(t testing.TB, m *Manifest, contents map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range m.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if f.Link != "" {
			if err := os.Symlink(f.Link, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if f.Kind == KindExecutable {
			mode = 0o755
		}
		if err := os.WriteFile(p, contents[f.Path], mode); err != nil {
			t.Fatal(err)
		}
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestEncodeSortsKeysEndsWithNewlineAndRoundTrips(t *testing.T) {
	m, _ := sample(t)
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) || bytes.HasSuffix(b, []byte("\n\n")) {
		t.Errorf("Encode() does not end in exactly one newline: %q", b[len(b)-4:])
	}
	if err := checkSorted(b); err != nil {
		t.Errorf("Encode(): %v", err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Encode()) = %v", err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("Parse(Encode(m)) differs from m:\n got %+v\nwant %+v", got, m)
	}
	again, _ := got.Encode()
	if !bytes.Equal(again, b) {
		t.Error("Encode(Parse(Encode(m))) differs from Encode(m)")
	}
}

// checkSorted checks the key order of every object in raw JSON.
func checkSorted(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj, expectKey bool
		last           string
	}
	stack := []frame{{}}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		top := &stack[len(stack)-1]
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if top := &stack[len(stack)-1]; top.obj {
				top.expectKey = true
			}
			continue
		}
		if top.obj && top.expectKey {
			k := tok.(string)
			if k < top.last {
				return errors.New("key " + k + " after " + top.last)
			}
			top.last, top.expectKey = k, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, expectKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		default:
			if top.obj {
				top.expectKey = true
			}
		}
	}
}

func TestEncodeKeysSorted(t *testing.T) {
	m, _ := sample(t)
	b, _ := m.Encode()
	if err := checkSorted(b); err != nil {
		t.Errorf("Encode(): %v", err)
	}
	if !strings.Contains(string(b), "\n  \"schemaVersion\": 3") {
		t.Errorf("Encode() lacks schemaVersion: %s", b)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	m, _ := sample(t)
	good, _ := m.Encode()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"unknown top-level field", strings.Replace(string(good), "{", `{"extra": 1,`, 1), "unknown field"},
		{"unknown nested field", strings.Replace(string(good), `"executable": `, `"exe": "x", "executable": `, 1), "unknown field"},
		{"trailing data", string(good) + "{}", "after the manifest"},
		{"not JSON", "GGUF", "invalid character"},
		{"wrong type", strings.Replace(string(good), "\n  \"schemaVersion\": 3", "\n  \"schemaVersion\": \"3\"", 1), "cannot unmarshal"},
		{"plan not an object", strings.Replace(string(good), `"plan": {`, `"plan": [], "x": {`, 1), "a plan is a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := Decode(bytes.NewReader(good)); err != nil {
		t.Errorf("Decode(good) = %v", err)
	}
}

func TestValidateReportsEveryProblemWithItsField(t *testing.T) {
	tests := []struct {
		name   string
		change func(m *Manifest)
		want   []string
	}{
		{"schema version", func(m *Manifest) { m.SchemaVersion = 4 }, []string{"schemaVersion: is 4, this llbuild reads 1 to 3"}},
		{"no plan", func(m *Manifest) { m.Build.Plan = nil }, []string{"build.plan: is missing"}},
		{"another plan", func(m *Manifest) { m.Build.Plan = samplePlan(t, "cpu-v3", strings.Repeat("cd", 32)) }, []string{"build.plan.hash", "not the one the server was built from"}},
		{"another target's plan", func(m *Manifest) { m.Build.Plan = samplePlan(t, "h200", m.Build.PlanHash) }, []string{"build.plan.target", `"h200"`}},
		{"a plan in version 1", func(m *Manifest) { m.SchemaVersion = 1 }, []string{"build.plan: a version 1 manifest has no plan"}},
		{"short commit", func(m *Manifest) { m.Build.Source.Commit = "abc" }, []string{"build.source.commit"}},
		{"absolute file path", func(m *Manifest) { m.Files[0].Path = "/etc/passwd" }, []string{"files[0].path", "absolute"}},
		{"escaping file path", func(m *Manifest) { m.Files[0].Path = "bin/../../x" }, []string{"files[0].path"}},
		{"bad digest", func(m *Manifest) { m.Files[0].SHA256 = "xyz" }, []string{"files[0].sha256"}},
		{"unknown kind", func(m *Manifest) { m.Files[0].Kind = "script" }, []string{"files[0].kind"}},
		{"link out", func(m *Manifest) { m.Files[1].Link = "../../etc/passwd" }, []string{"files[1].link"}},
		{"model not listed", func(m *Manifest) { m.Models.Model.Path = "models/other.gguf" }, []string{"models.model.path", "not listed"}},
		{"draft of another vocabulary", func(m *Manifest) { m.Models.Draft.GGUF.VocabSize = 7 }, []string{"models.draft", "vocabulary of 7 tokens"}},
		{"arg outside the bundle", func(m *Manifest) { m.Server.Args[1] = "/models/x.gguf" }, []string{"server.args", "--model", "absolute"}},
		{"arg not a bundle file", func(m *Manifest) { m.Server.Args[3] = "models/missing.gguf" }, []string{"--model-draft models/missing.gguf is not a file of the bundle"}},
		{"host flag", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--port", "80") }, []string{"--port is set by the entrypoint"}},
		{"network model", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "-hf", "x/y") }, []string{"-hf reads files from outside"}},
		{"dotdot arg", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--lookup", "../x") }, []string{`"../x" names a path outside`}},
		{"equals form", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--lora=/tmp/l.gguf") }, []string{"--lora", "absolute"}},
		{"LD_PRELOAD", func(m *Manifest) { m.Server.Env["LD_PRELOAD"] = "/x.so" }, []string{"server.env.LD_PRELOAD"}},
		{"two at once", func(m *Manifest) { m.SchemaVersion = 0; m.Target.Name = "" }, []string{"schemaVersion", "target.name"}},
		// server.ggml lists libraries of the bundle, and its CPU backend among them
		{"ggml backend not a library", func(m *Manifest) {
			m.Server.GGML = &GGML{Backends: []GGMLBackend{{Path: "models/model.gguf", Backend: "cpu"}}}
		}, []string{"server.ggml.backends[0].path"}},
		{"ggml CPU backend not listed", func(m *Manifest) {
			m.Server.GGML = &GGML{Backends: []GGMLBackend{{Path: "lib/libllama.so.0.1", Backend: "cpu"}}, CPU: "lib/libggml-cpu-haswell.so"}
		}, []string{"server.ggml.cpu", "not one of server.ggml.backends"}},
		{"ggml in version 2", func(m *Manifest) {
			m.SchemaVersion = 2
			m.Server.GGML = &GGML{Backends: []GGMLBackend{{Path: "lib/libllama.so.0.1", Backend: "cpu"}}}
		}, []string{"server.ggml: a version 2 manifest has no server.ggml"}},
		// server.env is checked as the flags llama-server reads it as (common/arg.cpp set_env).
		{"env chat template outside", func(m *Manifest) { m.Server.Env["LLAMA_ARG_CHAT_TEMPLATE_FILE"] = "/etc/passwd" },
			[]string{"server.env.LLAMA_ARG_CHAT_TEMPLATE_FILE", "--chat-template-file", `"/etc/passwd" is absolute`}},
		{"env log file", func(m *Manifest) { m.Server.Env["LLAMA_ARG_LOG_FILE"] = "/tmp/x" }, []string{"server.env.LLAMA_ARG_LOG_FILE", "--log-file writes files"}},
		{"env model not a bundle file", func(m *Manifest) { m.Server.Env["LLAMA_ARG_MODEL"] = "models/other.gguf" },
			[]string{"server.env.LLAMA_ARG_MODEL", "--model models/other.gguf is not a file of the bundle"}},
		// llama.cpp reads no LLAMA_ARG_SLOT_SAVE_PATH: refused as unknown, not passed on.
		{"env slot save path", func(m *Manifest) { m.Server.Env["LLAMA_ARG_SLOT_SAVE_PATH"] = "/tmp" }, []string{"server.env.LLAMA_ARG_SLOT_SAVE_PATH", "is not an option of llama-server"}},
		{"env port", func(m *Manifest) { m.Server.Env["LLAMA_ARG_PORT"] = "80" }, []string{"server.env.LLAMA_ARG_PORT", "--port is set by the entrypoint"}},
		{"env hf token", func(m *Manifest) { m.Server.Env["HF_TOKEN"] = "x" }, []string{"server.env.HF_TOKEN", "--hf-token reads files from outside"}},
		{"env mmproj outside", func(m *Manifest) { m.Server.Env["LLAMA_ARG_MMPROJ"] = "../mmproj.gguf" }, []string{"server.env.LLAMA_ARG_MMPROJ", "--mmproj", "escapes the bundle"}},
		{"env unknown option", func(m *Manifest) { m.Server.Env["LLAMA_ARG_NO_SUCH_THING"] = "1" }, []string{"server.env.LLAMA_ARG_NO_SUCH_THING", "is not an option of llama-server"}},
		{"env unknown variable", func(m *Manifest) { m.Server.Env["PYTHONPATH"] = "x" }, []string{"server.env.PYTHONPATH", "nor a known run-time knob", "environment of llbuild serve"}},
		{"env knob path outside", func(m *Manifest) { m.Server.Env["CUDA_CACHE_PATH"] = "/var/cache/cuda" }, []string{"server.env.CUDA_CACHE_PATH", "names a path outside the bundle"}},
		{"env backend library outside", func(m *Manifest) { m.Server.Env["GGML_BACKEND_PATH"] = "/usr/lib/libggml-cuda.so" }, []string{"server.env.GGML_BACKEND_PATH", "must be a file of the bundle"}},
		{"env loader variable", func(m *Manifest) { m.Server.Env["LD_DEBUG_OUTPUT"] = "/tmp/ld" }, []string{"server.env.LD_DEBUG_OUTPUT", "is not allowed"}},
		{"arg alias of an input flag", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--chat-template-file", "/etc/passwd") }, []string{"--chat-template-file", "absolute"}},
		// what lets a client reach beyond completions, or sends the work elsewhere
		{"rpc", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--rpc", "1.2.3.4:50052") }, []string{"--rpc sends the model and the work to other hosts"}},
		{"env rpc", func(m *Manifest) { m.Server.Env["LLAMA_ARG_RPC"] = "1.2.3.4:50052" }, []string{"server.env.LLAMA_ARG_RPC", "--rpc sends"}},
		{"tools", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--tools", "exec_shell_command") }, []string{"--tools lets the server's clients"}},
		{"tools equals form", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--tools=all") }, []string{"--tools lets the server's clients"}},
		{"env tools", func(m *Manifest) { m.Server.Env["LLAMA_ARG_TOOLS"] = "all" }, []string{"server.env.LLAMA_ARG_TOOLS", "--tools lets"}},
		{"tools runtime", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--tools-runtime", "docker:x") }, []string{"--tools-runtime lets"}},
		{"mcp servers", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--mcp-servers-json", "{}") }, []string{"--mcp-servers-json lets"}},
		{"mcp proxy", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--ui-mcp-proxy") }, []string{"--ui-mcp-proxy lets"}},
		{"mmproj url", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "-mmu", "http://x/p.gguf") }, []string{"-mmu reads files from outside the bundle or the network"}},
		{"ui config outside", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--ui-config-file", "/etc/passwd") }, []string{"--ui-config-file", "absolute"}},
		{"context file outside", func(m *Manifest) { m.Server.Args = append(m.Server.Args, "--context-file", "/etc/shadow") }, []string{"--context-file", "absolute"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := sample(t)
			tt.change(m)
			err := m.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to contain %q", err, w)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate() = %T, want *FieldError inside", err)
			}
		})
	}
}

func TestValidateAcceptsOptionsAndKnobsInEnv(t *testing.T) {
	m, _ := sample(t)
	m.Server.Env = map[string]string{
		"LLAMA_ARG_CTX_SIZE":         "4096",
		"LLAMA_ARG_NO_CONTEXT_SHIFT": "1",
		"LLAMA_ARG_MODEL":            "models/model.gguf",
		"LLAMA_ARG_PROMPT_LOGPROBS":  "1", // added by patch 0002
		"GGML_SYCL_ENABLE_VMM":       "0",
		"ONEAPI_DEVICE_SELECTOR":     "level_zero:0",
		"CUDA_VISIBLE_DEVICES":       "0,1",
		"GGML_BACKEND_PATH":          "lib/libllama.so.0.1",
		"OMP_NUM_THREADS":            "8",
		// a patched worktree's experiment switches, read with getenv (issue 42's lab)
		"LLAMA_MTP_DRAFT_DIRECT_ARGMAX_UNROLL": "7",
		"LLAMA_GEMMA4_MTP_QONLY_ATTN_INPUTS":   "1",
		// turning a refused option off reaches nothing
		"LLAMA_ARG_NO_UI_MCP_PROXY": "1",
	}
	m.Server.Args = append(m.Server.Args, "--no-webui-mcp-proxy")
	if err := m.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	// but not an option llama-server does not have, nor a path outside the bundle
	m.Server.Env = map[string]string{"LLAMA_ARG_NO_SUCH_OPTION": "1", "LLAMA_EXPERIMENT_TABLE": "/etc/passwd"}
	err := m.Validate()
	if err == nil || !strings.Contains(err.Error(), "LLAMA_ARG_NO_SUCH_OPTION") || !strings.Contains(err.Error(), "outside the bundle") {
		t.Errorf("Validate() = %v, want the unknown option and the path refused", err)
	}
}

func TestValidateDoesNotMutate(t *testing.T) {
	m, _ := sample(t)
	m.SchemaVersion = 9
	before, _ := json.Marshal(m)
	_ = m.Validate()
	after, _ := json.Marshal(m)
	if !bytes.Equal(before, after) {
		t.Error("Validate() changed the manifest")
	}
}

func TestDraftFits(t *testing.T) {
	model, _ := tinyFacts(t, gguf.DefaultTiny())
	draft, _ := tinyFacts(t, gguf.DraftTiny())
	other, _ := tinyFacts(t, gguf.OtherVocabTiny())
	mtp := draft
	mtp.Architecture, mtp.DraftFor = "gemma4-assistant", "gemma4"
	sameSizeOtherTokens := draft
	sameSizeOtherTokens.VocabSHA256 = strings.Repeat("0", 64)
	mtpOK := draft
	mtpOK.Architecture, mtpOK.DraftFor, mtpOK.EmbeddingLengthOut = "llama-assistant", "llama", model.EmbeddingLength
	mtpWidth := mtpOK
	mtpWidth.EmbeddingLengthOut = model.EmbeddingLength + 1
	tests := []struct {
		name  string
		draft gguf.Facts
		want  string // "" = fits
	}{
		{"same vocabulary plain draft", draft, ""},
		{"MTP draft for the model's architecture", mtpOK, ""},
		{"other vocabulary", other, "vocabulary of"},
		{"same size other tokens", sameSizeOtherTokens, "tokens differ"},
		{"MTP draft for another architecture", mtp, "an MTP draft for gemma4"},
		{"MTP draft for another width", mtpWidth, "hidden size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DraftFits(model, tt.draft)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("DraftFits() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLaunch(t *testing.T) {
	m, _ := sample(t)
	dir := t.TempDir()
	l, err := m.Launch(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Launch{
		Path: filepath.Join(dir, "bin/llama-server"),
		Args: m.Server.Args,
		Env:  []string{"GGML_SYCL_ENABLE_VMM=0", "LD_LIBRARY_PATH=" + filepath.Join(dir, "lib")},
		Dir:  dir,
	}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("Launch() = %+v, want %+v", l, want)
	}

	m.Server.Loader = "lib/libllama.so.0.1" // any listed library will do for the mapping
	l, err = m.Launch(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := append([]string{"--library-path", filepath.Join(dir, "lib"), filepath.Join(dir, "bin/llama-server")}, m.Server.Args...)
	if l.Path != filepath.Join(dir, "lib/libllama.so.0.1") || !reflect.DeepEqual(l.Args, wantArgs) || !reflect.DeepEqual(l.Env, []string{"GGML_SYCL_ENABLE_VMM=0"}) {
		t.Errorf("Launch() with a loader = %+v, want loader %s and args %q", l, m.Server.Loader, wantArgs)
	}

	m.Server.Args = append(m.Server.Args, "--model", "/etc/passwd")
	if _, err := m.Launch(dir); err == nil {
		t.Error("Launch() of a manifest whose args leave the bundle = nil error")
	}
}

// TestVersion1ManifestStaysReadable: a bundle made before build.plan decodes, validates and
// verifies; only its plan is missing.
func TestVersion1ManifestStaysReadable(t *testing.T) {
	m, contents := sample(t)
	m.SchemaVersion, m.Build.Plan = 1, nil
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"plan"`)) {
		t.Errorf("a version 1 manifest encodes a plan:\n%s", b)
	}
	if _, err := Parse(b); err != nil {
		t.Errorf("Parse(version 1) = %v", err)
	}
	if ps := Verify(writeBundle(t, m, contents)); len(ps) > 0 {
		t.Errorf("Verify(version 1 bundle) = %v", ps)
	}
}

// TestPlanIsHeldCanonically: the plan's bytes in a manifest depend only on the plan, not on
// how provenance.json spelled it, and they survive Encode and Decode unchanged.
func TestPlanIsHeldCanonically(t *testing.T) {
	a, err := NewPlanJSON([]byte(`{"b": 1, "a": {"y": "<&>", "x": [2, 1.50]}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewPlanJSON([]byte("{\n  \"a\": {\"x\": [2, 1.50], \"y\": \"\\u003c&>\"},\n  \"b\": 1\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"x":[2,1.50],"y":"<&>"},"b":1}`; string(a) != want || string(b) != want {
		t.Errorf("NewPlanJSON() = %s and %s, want %s", a, b, want)
	}
	for _, bad := range []string{`[]`, `"plan"`, `{} {}`, `{`} {
		if _, err := NewPlanJSON([]byte(bad)); err == nil {
			t.Errorf("NewPlanJSON(%s) = nil error, want a refusal", bad)
		}
	}
	m, _ := sample(t)
	enc, _ := m.Encode()
	got, err := Parse(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Build.Plan, m.Build.Plan) {
		t.Errorf("plan after Encode and Parse = %s, want %s", got.Build.Plan, m.Build.Plan)
	}
}

// A server out of a foreign image has no plan, plan hash, patches or commit, and its origin
// says which image; a plan beside "foreign", or an origin without a digest, is refused.
func TestValidateForeignImageOrigin(t *testing.T) {
	m, _ := sample(t)
	m.Build.PlanHash, m.Build.Plan, m.Build.Patches, m.Build.Source = "", nil, []Patch{}, Source{}
	m.Build.Image = &ImageOrigin{Ref: "ghcr.io/ggml-org/llama.cpp:server-cuda", Digest: "sha256:" + strings.Repeat("a", 64), Server: "/app/llama-server", Foreign: true}
	if err := m.Validate(); err != nil {
		t.Fatalf("a foreign image's manifest: %v", err)
	}
	plain := *m
	plain.Build.Image = nil
	if err := plain.Validate(); err == nil || !strings.Contains(err.Error(), "build.planHash") || !strings.Contains(err.Error(), "build.source.commit") {
		t.Errorf("the same without build.image: %v, want build.planHash and build.source.commit refused", err)
	}
	bad := *m
	im := *m.Build.Image
	im.Digest, im.Server = "latest", "app/llama-server"
	bad.Build.Image = &im
	bad.Build.PlanHash = strings.Repeat("b", 64)
	err := bad.Validate()
	for _, want := range []string{"build.image.digest", "build.image.server", "build.image.foreign"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
}
