package daggerexec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// fakeEngine stands for a Dagger engine behind the SDK's connection: it records every
// GraphQL query the SDK sends and answers each with data shaped like the query. IDs are
// derived from the query text, so they are the same in every run. An export writes the
// files the build would have produced (files) into the export path, as the engine's
// session would; failOn makes the query containing that text fail with an exec error.
type fakeEngine struct {
	mu      sync.Mutex
	queries []string
	files   map[string]string // path under the build dir -> contents ("->x" makes a link to x)
	// failExport, when set, are the extensions of an exec error the export fails with: the
	// engine runs the container's execs when its outputs are exported.
	failExport map[string]any
	// paths replaces host paths in recorded queries (a temporary directory -> "$OUT").
	paths map[string]string
	// stdout answers a container's stdout (the CUDA probe); "" answers what
	// pipeline.CUDAProbeScript prints in the nvidia/cuda:X.Y devel image the query names.
	stdout string
}

// fakeCUDAProbe is what pipeline.CUDAProbeScript prints in NVIDIA's CUDA 13.0 devel image.
const fakeCUDAProbe = "nvcc=/usr/local/cuda/bin/nvcc\nversion=Cuda compilation tools, release 13.0, V13.0.88\nstubs=/usr/local/cuda/lib64/stubs\n"

var cudaImageTag = regexp.MustCompile(`nvidia/cuda:([0-9]+\.[0-9]+)`)

// probeAnswer is the CUDA probe's output for the image the query starts from.
func (f *fakeEngine) probeAnswer(q string) string {
	if f.stdout != "" {
		return f.stdout
	}
	m := cudaImageTag.FindStringSubmatch(q)
	if m == nil {
		return fakeCUDAProbe
	}
	return strings.Replace(fakeCUDAProbe, "release 13.0, V13.0.88", "release "+m[1]+", V"+m[1]+".88", 1)
}

func (f *fakeEngine) Host() string { return "fake.invalid" }
func (f *fakeEngine) Close() error { return nil }

func (f *fakeEngine) Do(req *http.Request) (*http.Response, error) {
	var body struct {
		Query string `json:"query"`
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	q := strings.TrimPrefix(body.Query, "query Query ")
	norm := normalize(q)
	for from, to := range f.paths {
		norm = strings.ReplaceAll(norm, from, to)
	}
	f.mu.Lock()
	f.queries = append(f.queries, norm)
	f.mu.Unlock()

	resp := map[string]any{}
	if f.failExport != nil && strings.Contains(q, "{export(") {
		resp["errors"] = []map[string]any{{"message": "process did not complete successfully: exit code: 1", "extensions": f.failExport}}
		resp["data"] = nil
	} else {
		field, err := parseField(q[1 : len(q)-1])
		if err != nil {
			return nil, fmt.Errorf("fake engine: %v in %s", err, q)
		}
		data, err := f.answer(field, norm)
		if err != nil {
			return nil, err
		}
		resp["data"] = data
	}
	out, _ := json.Marshal(resp)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(out))}, nil
}

// answer builds the response for a chain of fields; the leaf decides the value.
func (f *fakeEngine) answer(fl *field, norm string) (map[string]any, error) {
	if fl.sub == nil {
		var v any
		switch fl.name {
		case "id", "sync":
			sum := sha256.Sum256([]byte(norm))
			v = "id-" + hex.EncodeToString(sum[:6])
		case "stdout":
			v = f.probeAnswer(norm)
		case "export":
			path := fl.stringArg("path")
			if err := f.writeExport(path); err != nil {
				return nil, err
			}
			v = path
		default:
			v = ""
		}
		return map[string]any{fl.name: v}, nil
	}
	inner, err := f.answer(fl.sub, norm)
	if err != nil {
		return nil, err
	}
	return map[string]any{fl.name: inner}, nil
}

func (f *fakeEngine) writeExport(dir string) error {
	for p, body := range f.files {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(dst, []byte(body), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// recorded returns the queries, sorted: the SDK resolves object arguments concurrently, so
// only the set of queries is stable, not their order.
func (f *fakeEngine) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := append([]string(nil), f.queries...)
	sort.Strings(q)
	return q
}

// field is one level of a query chain: name(args){sub}.
type field struct {
	name string
	args []string // "key:value", as sent
	sub  *field
}

func (fl *field) stringArg(key string) string {
	for _, a := range fl.args {
		if k, v, ok := strings.Cut(a, ":"); ok && k == key {
			var s string
			if json.Unmarshal([]byte(v), &s) == nil {
				return s
			}
		}
	}
	return ""
}

// parseField reads "name(args){...}" as the SDK's query builder writes it.
func parseField(s string) (*field, error) {
	i := 0
	for i < len(s) && s[i] != '(' && s[i] != '{' {
		i++
	}
	fl := &field{name: strings.TrimSpace(s[:i])}
	if fl.name == "" {
		return nil, fmt.Errorf("empty field name")
	}
	if i < len(s) && s[i] == '(' {
		end, err := matching(s, i)
		if err != nil {
			return nil, err
		}
		fl.args = splitTop(s[i+1 : end])
		i = end + 1
	}
	if i < len(s) {
		if s[i] != '{' || s[len(s)-1] != '}' {
			return nil, fmt.Errorf("unexpected %q", s[i:])
		}
		sub, err := parseField(s[i+1 : len(s)-1])
		if err != nil {
			return nil, err
		}
		fl.sub = sub
	}
	return fl, nil
}

// matching returns the index of the bracket closing the one at open, skipping strings.
func matching(s string, open int) (int, error) {
	depth, inStr := 0, false
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced brackets")
}

// splitTop splits an argument list at top-level ", ".
func splitTop(s string) []string {
	var out []string
	depth, inStr, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// normalize rewrites a query with every argument list sorted by name: the query builder
// writes arguments in map order.
func normalize(q string) string {
	fl, err := parseField(strings.TrimSuffix(strings.TrimPrefix(q, "{"), "}"))
	if err != nil {
		return q
	}
	return "{" + render(fl) + "}"
}

func render(fl *field) string {
	var b strings.Builder
	b.WriteString(fl.name)
	if len(fl.args) > 0 {
		args := append([]string(nil), fl.args...)
		sort.Strings(args)
		b.WriteString("(" + strings.Join(args, ", ") + ")")
	}
	if fl.sub != nil {
		b.WriteString("{" + render(fl.sub) + "}")
	}
	return b.String()
}
