package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/gguf"
)

// SchemaVersion is the version of manifest.json this package writes. Version 2 added
// build.plan, version 3 server.ggml.
const SchemaVersion = 3

// MinSchemaVersion is the oldest version of manifest.json this package reads: a version 1
// manifest records no build.plan, only the source, patches and base images.
const MinSchemaVersion = 1

// FileName is the manifest's name at the root of a bundle.
const FileName = "manifest.json"

// MaxSize bounds a manifest.json: decoding reads no more.
const MaxSize = 16 << 20

// Kinds of files a bundle holds.
const (
	KindExecutable = "executable"
	KindLibrary    = "library"
	KindModel      = "model"
	KindDraft      = "draft"
	// KindMMProj is a multimodal projector (llama-server --mmproj): the vision or audio
	// encoder that turns an image into the model's embeddings.
	KindMMProj = "mmproj"
	// KindPatch is a patch the server was built with (patches/NAME), as its artifacts kept it.
	KindPatch = "patch"
)

// Directories of a bundle.
const (
	BinDir     = "bin"
	LibDir     = "lib"
	ModelsDir  = "models"
	PatchesDir = "patches"
)

// Manifest is manifest.json: everything a bundle holds and how it runs. It is a lock file:
// digests of every file, no host facts of the machine that made it, no wall time.
type Manifest struct {
	// SchemaVersion is SchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Entrypoint is the command that serves the bundle, run from its root.
	Entrypoint []string `json:"entrypoint"`
	// Target is the host the bundle's server was built for.
	Target Target `json:"target"`
	// Build is the provenance of the server binary and libraries.
	Build Build `json:"build"`
	// Models are the model and the optional draft, with their GGUF facts.
	Models Models `json:"models"`
	// Server says how llama-server is started.
	Server Server `json:"server"`
	// Contract is the API the entrypoint serves.
	Contract Contract `json:"contract"`
	// Files lists every file of the bundle but manifest.json, in path order.
	Files []File `json:"files"`
}

// Target names the target and carries its host description (the same fields as the
// targets package's Host), so that preflight can check a bundle against a machine.
type Target struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`
	Host    Host   `json:"host"`
}

// Host mirrors targets.Host field for field in JSON.
type Host struct {
	CPU    CPU    `json:"cpu"`
	GPUs   []GPU  `json:"gpus,omitempty"`
	Driver Driver `json:"driver,omitzero"`
}

// CPU mirrors targets.CPU.
type CPU struct {
	Model    string   `json:"model,omitempty"`
	Features []string `json:"features"`
}

// GPU mirrors targets.GPU.
type GPU struct {
	Vendor            string `json:"vendor"`
	Name              string `json:"name,omitempty"`
	PCIID             string `json:"pciID,omitempty"`
	ComputeCapability string `json:"computeCapability,omitempty"`
	Brand             string `json:"brand,omitempty"`
	SYCLDevice        string `json:"syclDevice,omitempty"`
}

// Driver mirrors targets.Driver.
type Driver struct {
	Version string `json:"version,omitempty"`
	CUDA    string `json:"cuda,omitempty"`
}

// Build is the provenance of the server files, taken from the artifacts' provenance.json.
type Build struct {
	// PlanHash is the hash of the plan the artifacts were built from.
	PlanHash string  `json:"planHash"`
	Source   Source  `json:"source"`
	Vendor   *Source `json:"vendor,omitempty"`
	Patches  []Patch `json:"patches"`
	// Series names the patches (scoring, plain, none or custom) and Contract what the server
	// keeps beyond upstream: scoring (echo and prompt-token logprobs) or upstream. Empty in
	// manifests written before they were recorded.
	Series   string  `json:"series,omitempty"`
	Contract string  `json:"contract,omitempty"`
	Images   []Image `json:"images"`
	Builder  Builder `json:"builder"`
	// Plan is the whole plan the server was built from (provenance.json's): CMake arguments,
	// environment, CUDA architectures, runtime settings. Empty in a version 1 manifest, and for
	// a server out of a foreign image.
	Plan PlanJSON `json:"plan,omitempty"`
	// Image, when set, says the server and its libraries came out of a runtime image (bundle
	// --image), not out of an artifact directory.
	Image *ImageOrigin `json:"image,omitempty"`
}

// ImageOrigin is the runtime image a bundle's server came out of.
type ImageOrigin struct {
	// Ref is the image as it was given: a registry reference, oci-archive:FILE, oci-layout:DIR
	// or docker-archive:FILE. Digest is its manifest's digest (sha256:...).
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Server is llama-server's path in the image.
	Server string `json:"server"`
	// Foreign says the image carries no llbuild plan (anyone's image: an official
	// server-cuda tag, a hand-written Dockerfile's): nothing records how its server was built,
	// so the build has no plan hash, no plan and no patches, and its source is what the image's
	// labels say, if anything.
	Foreign bool `json:"foreign,omitempty"`
	// Labels are the image's org.opencontainers.image.* labels (version, revision, source).
	Labels map[string]string `json:"labels,omitempty"`
}

// PlanJSON is a plan as JSON, held in canonical form (compact, every object's keys sorted) so
// that a manifest decodes to the value it was encoded from. This package reads only its hash
// and target: the shim and the bench need no plan, and the pipeline's Plan type is not theirs
// to import; `llbuild plan diff` decodes it.
type PlanJSON []byte

// NewPlanJSON canonicalizes raw, a plan as provenance.json records it. It must be an object.
func NewPlanJSON(raw []byte) (PlanJSON, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("a plan is a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the plan object")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return PlanJSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// MarshalJSON writes the plan as it is held.
func (p PlanJSON) MarshalJSON() ([]byte, error) {
	if len(p) == 0 {
		return []byte("null"), nil
	}
	return p, nil
}

// UnmarshalJSON reads a plan into canonical form; null leaves it empty.
func (p *PlanJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*p = nil
		return nil
	}
	c, err := NewPlanJSON(b)
	if err != nil {
		return err
	}
	*p = c
	return nil
}

// The provenance types are the artifact directory's: a bundle copies its server's provenance
// (source, patches, base images, builder) from artifacts.json's provenance.json unchanged.
type (
	// Source is a git source at a full commit (llama.cpp).
	Source = artifacts.Source
	// Patch is one applied patch and its digest.
	Patch = artifacts.Patch
	// Image is a base image by role (devel, runtime).
	Image = artifacts.Image
	// Builder names the program that built the server and how.
	Builder = artifacts.Builder
)

// Models are the bundle's model, optional draft and optional multimodal projector.
type Models struct {
	Model  Model      `json:"model"`
	Draft  *Model     `json:"draft,omitempty"`
	MMProj *Projector `json:"mmproj,omitempty"`
}

// Projector is the bundle's multimodal projector (--mmproj) and what its GGUF header says.
type Projector struct {
	// Path is the file's path in the bundle (models/NAME.gguf).
	Path string `json:"path"`
	// Type is clip.projector_type (mlp, gemma3, ...); Vision and Audio say which encoders it
	// holds (clip.has_vision_encoder, clip.has_audio_encoder).
	Type   string `json:"type,omitempty"`
	Vision bool   `json:"vision,omitempty"`
	Audio  bool   `json:"audio,omitempty"`
	// EmbeddingLength is the size of the embeddings it projects to (clip.vision.projection_dim
	// or clip.audio.projection_dim): the model's embedding length.
	EmbeddingLength uint64 `json:"embeddingLength,omitempty"`
}

// Model is a GGUF file of the bundle and the facts read from its header.
type Model struct {
	// Path is the file's path in the bundle (models/NAME.gguf).
	Path string     `json:"path"`
	GGUF gguf.Facts `json:"gguf"`
}

// Server says how llama-server starts. Paths are relative to the bundle's root, which is
// llama-server's working directory; Launch turns them into a command.
type Server struct {
	// Executable is llama-server (bin/llama-server).
	Executable string `json:"executable"`
	// Loader, when set, is a dynamic loader shipped in the bundle (lib/ld-linux-x86-64.so.2)
	// that runs Executable, so that the bundle's own C library is used instead of the
	// host's. The server's libraries then come from LibraryPath through the loader's
	// --library-path.
	Loader string `json:"loader,omitempty"`
	// LibraryPath lists the bundle directories the server's shared libraries are found in:
	// LD_LIBRARY_PATH, or the loader's --library-path.
	LibraryPath []string `json:"libraryPath"`
	// Args are llama-server's arguments, without --host and --port (the entrypoint picks
	// them). File arguments are paths relative to the bundle's root.
	Args []string `json:"args"`
	// Env is added to llama-server's environment (GGML_SYCL_ENABLE_VMM=0 ...).
	Env map[string]string `json:"env"`
	// GGML, when set, lists the ggml backends the server dlopens at start (a GGML_BACKEND_DL
	// build's): nothing names them in DT_NEEDED, so only this says they belong to the server.
	// Absent before version 3, and for a server that links its backends.
	GGML *GGML `json:"ggml,omitempty"`
}

// GGML is what ggml's backend loader finds in a bundle. The backends lie in the library
// directory beside the loader: run through the bundle's loader, the loader is the executable
// /proc/self/exe names, whose directory ggml searches.
type GGML struct {
	// Backends are the backend files, in the order ggml's loader met them in the image.
	Backends []GGMLBackend `json:"backends"`
	// CPU is the Path of the CPU backend ggml would load on the target's CPU (the variant
	// that scores highest there); "" when none would.
	CPU string `json:"cpu,omitempty"`
	// CompiledDir is the GGML_BACKEND_DIR compiled into the server's libggml.so, as the image
	// had it: ggml searches it on any host, before the bundle's own directory.
	CompiledDir string `json:"compiledDir,omitempty"`
}

// GGMLBackend is one backend file of a bundle.
type GGMLBackend struct {
	// Path is the file in the bundle.
	Path string `json:"path"`
	// Backend is what it drives (cpu, cuda, vulkan); Variant the CPU variant its name says.
	Backend string `json:"backend"`
	Variant string `json:"variant,omitempty"`
	// From is where the image held it, and Search how ggml's loader found it there
	// (GGML_BACKEND_DIR, the server's directory, the working directory, GGML_BACKEND_PATH).
	From   string `json:"from,omitempty"`
	Search string `json:"search,omitempty"`
}

// Contract describes the API the entrypoint serves in front of llama-server.
type Contract struct {
	// Version is the contract's version.
	Version int `json:"version"`
	// Endpoints are "METHOD /path" in the order the shim documents them.
	Endpoints []string `json:"endpoints"`
	// MaxLogprobs is the largest legacy logprobs and chat top_logprobs accepted.
	MaxLogprobs int `json:"maxLogprobs"`
	// Echo says whether /v1/completions honours echo with prompt logprobs.
	Echo bool `json:"echo"`
	// Streaming says whether stream: true is served.
	Streaming bool `json:"streaming"`
	// PromptLogprobs says how echo's prompt-token logprobs are computed: PromptLogprobsNative
	// when the server was built with the patch that returns them from one prefill and its
	// arguments turn it on (--prompt-logprobs; the shim still checks /props at start),
	// PromptLogprobsTeacherForcing otherwise.
	PromptLogprobs string `json:"promptLogprobs"`
	// ScoresTrafficIndependent says prompt-token logprobs are bit-identical whatever else the
	// server runs: native prompt logprobs with --prompt-logprobs-alone (patch 0007) and
	// per-slot KV (--no-kv-unified).
	ScoresTrafficIndependent bool `json:"scoresTrafficIndependent,omitempty"`
}

// Ways the shim computes prompt-token logprobs.
const (
	PromptLogprobsNative         = "native"
	PromptLogprobsTeacherForcing = "teacher-forcing"
)

// DefaultContract is the contract the shim (package shim) serves.
func DefaultContract() Contract {
	return Contract{
		Version: 1,
		Endpoints: []string{
			"GET /health",
			"GET /v1/models",
			"POST /v1/completions",
			"POST /v1/chat/completions",
			"POST /tokenize",
			"POST /detokenize",
			"GET /tokenizer_info",
		},
		MaxLogprobs:    20,
		Echo:           true,
		Streaming:      true,
		PromptLogprobs: PromptLogprobsTeacherForcing,
	}
}

// DefaultEntrypoint is the command recorded as a bundle's entrypoint.
func DefaultEntrypoint() []string { return []string{"llbuild", "serve", "."} }

// File is one file of the bundle. A symbolic link (lib/libllama.so.0 -> libllama.so.0.7.0)
// has Link set and no size or digest; it points at a sibling file of the bundle.
type File struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
}

// Decode reads a manifest strictly: unknown fields, trailing data and input over MaxSize
// are errors. It does not validate; Load and Parse do.
func Decode(r io.Reader) (*Manifest, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the manifest object")
	}
	return &m, nil
}

// Parse decodes and validates a manifest.
func Parse(b []byte) (*Manifest, error) {
	m, err := Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Encode renders m as manifest.json: indented JSON with every object's keys sorted and a
// trailing newline, so that the same manifest always gives the same bytes.
func (m *Manifest) Encode() ([]byte, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	// Structs marshal in field order; a generic value marshals objects with sorted keys.
	// UseNumber keeps numbers as written.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// File returns the entry for path.
func (m *Manifest) File(p string) (File, bool) {
	i := sort.Search(len(m.Files), func(i int) bool { return m.Files[i].Path >= p })
	if i < len(m.Files) && m.Files[i].Path == p {
		return m.Files[i], true
	}
	for _, f := range m.Files { // unsorted (invalid) manifests
		if f.Path == p {
			return f, true
		}
	}
	return File{}, false
}

// FieldError is a validation error at a field path of manifest.json.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks m without touching any file and reports every problem together
// (errors.Join of *FieldError). It never changes m.
func (m *Manifest) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if m.SchemaVersion < MinSchemaVersion || m.SchemaVersion > SchemaVersion {
		bad("schemaVersion", "is %d, this llbuild reads %d to %d", m.SchemaVersion, MinSchemaVersion, SchemaVersion)
	}
	if len(m.Entrypoint) == 0 {
		bad("entrypoint", "is empty")
	}
	if m.Target.Name == "" {
		bad("target.name", "is empty")
	}
	if m.Target.Backend == "" {
		bad("target.backend", "is empty")
	}
	b := m.Build
	foreign := b.Image != nil && b.Image.Foreign
	if im := b.Image; im != nil {
		if im.Ref == "" {
			bad("build.image.ref", "is empty")
		}
		if d, ok := strings.CutPrefix(im.Digest, "sha256:"); !ok || !isHexLen(d, 64) {
			bad("build.image.digest", "%q is not a sha256 digest", im.Digest)
		}
		if !path.IsAbs(im.Server) {
			bad("build.image.server", "%q is not a path in the image", im.Server)
		}
	}
	switch {
	case foreign && (b.PlanHash != "" || len(b.Plan) > 0 || len(b.Patches) > 0):
		bad("build.image.foreign", "a foreign image's server has no plan, plan hash or patches")
	case !foreign && (len(b.PlanHash) < 12 || !isHex(b.PlanHash)):
		bad("build.planHash", "%q is not a hex plan hash", b.PlanHash)
	}
	if !isHexLen(b.Source.Commit, 40) && !(foreign && b.Source.Commit == "") {
		bad("build.source.commit", "%q is not a full 40-hex git commit", b.Source.Commit)
	}
	if b.Vendor != nil && !isHexLen(b.Vendor.Commit, 40) {
		bad("build.vendor.commit", "%q is not a full 40-hex git commit", b.Vendor.Commit)
	}
	for i, p := range b.Patches {
		if !isHexLen(p.SHA256, 64) {
			bad(fmt.Sprintf("build.patches[%d].sha256", i), "%q is not a sha256", p.SHA256)
		}
	}
	switch {
	case m.SchemaVersion == 1 && len(b.Plan) > 0:
		bad("build.plan", "a version 1 manifest has no plan: set schemaVersion to %d", SchemaVersion)
	case m.SchemaVersion >= 2 && len(b.Plan) == 0 && !foreign:
		bad("build.plan", "is missing: a version %d manifest records the plan its server was built from", m.SchemaVersion)
	case len(b.Plan) > 0:
		var probe struct {
			Hash   string `json:"hash"`
			Target string `json:"target"`
		}
		if err := json.Unmarshal(b.Plan, &probe); err != nil {
			bad("build.plan", "%v", err)
			break
		}
		if probe.Hash != b.PlanHash {
			bad("build.plan.hash", "is %q, build.planHash is %q: the plan is not the one the server was built from", probe.Hash, b.PlanHash)
		}
		if probe.Target != m.Target.Name {
			bad("build.plan.target", "is %q, target.name is %q", probe.Target, m.Target.Name)
		}
	}

	kinds := map[string]string{}
	for i, f := range m.Files {
		field := fmt.Sprintf("files[%d]", i)
		if err := CheckPath(f.Path); err != nil {
			bad(field+".path", "%v", err)
			continue
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			bad(field+".path", "%s is out of order or listed twice (files are sorted by path)", f.Path)
		}
		kinds[f.Path] = f.Kind
		switch f.Kind {
		case KindExecutable, KindLibrary, KindModel, KindDraft, KindMMProj, KindPatch:
		default:
			bad(field+".kind", "%q is not one of executable, library, model, draft, mmproj, patch", f.Kind)
		}
		if f.Link != "" {
			if f.Link != path.Base(f.Link) || f.Link == "." || f.Link == ".." {
				bad(field+".link", "%q is not the name of a sibling file", f.Link)
			}
			if f.Size != 0 || f.SHA256 != "" {
				bad(field, "a link has no size or sha256")
			}
			continue
		}
		if f.Size < 0 {
			bad(field+".size", "is negative")
		}
		if !isHexLen(f.SHA256, 64) {
			bad(field+".sha256", "%q is not a sha256", f.SHA256)
		}
	}
	for i, f := range m.Files {
		if f.Link == "" || CheckPath(f.Path) != nil {
			continue
		}
		target := path.Join(path.Dir(f.Path), f.Link)
		if _, ok := kinds[target]; !ok {
			bad(fmt.Sprintf("files[%d].link", i), "%s points at %s, which is not listed", f.Path, target)
		}
	}
	needFile := func(field, p string, kind string) {
		if p == "" {
			bad(field, "is empty")
			return
		}
		if err := CheckPath(p); err != nil {
			bad(field, "%v", err)
			return
		}
		k, ok := kinds[p]
		switch {
		case !ok:
			bad(field, "%s is not listed in files", p)
		case k != kind:
			bad(field, "%s is listed as %s, want %s", p, k, kind)
		}
	}
	needFile("models.model.path", m.Models.Model.Path, KindModel)
	if d := m.Models.Draft; d != nil {
		needFile("models.draft.path", d.Path, KindDraft)
		if err := DraftFits(m.Models.Model.GGUF, d.GGUF); err != nil {
			bad("models.draft", "%v", err)
		}
	}
	if pj := m.Models.MMProj; pj != nil {
		needFile("models.mmproj.path", pj.Path, KindMMProj)
		if n := m.Models.Model.GGUF.EmbeddingLength; pj.EmbeddingLength != 0 && n != 0 && pj.EmbeddingLength != n {
			bad("models.mmproj.embeddingLength", "is %d, the model's embedding length is %d: the projector was made for another model", pj.EmbeddingLength, n)
		}
	}
	s := m.Server
	needFile("server.executable", s.Executable, KindExecutable)
	if s.Loader != "" {
		needFile("server.loader", s.Loader, KindLibrary)
	}
	for i, d := range s.LibraryPath {
		if err := CheckPath(d); err != nil {
			bad(fmt.Sprintf("server.libraryPath[%d]", i), "%v", err)
		}
	}
	if g := s.GGML; g != nil {
		if m.SchemaVersion < 3 {
			bad("server.ggml", "a version %d manifest has no server.ggml: set schemaVersion to %d", m.SchemaVersion, SchemaVersion)
		}
		paths := map[string]bool{}
		for i, b := range g.Backends {
			field := fmt.Sprintf("server.ggml.backends[%d]", i)
			needFile(field+".path", b.Path, KindLibrary)
			if b.Backend == "" {
				bad(field+".backend", "is empty")
			}
			if paths[b.Path] {
				bad(field+".path", "%s is listed twice", b.Path)
			}
			paths[b.Path] = true
		}
		if g.CPU != "" && !paths[g.CPU] {
			bad("server.ggml.cpu", "%s is not one of server.ggml.backends", g.CPU)
		}
	}
	for _, e := range checkArgs(s.Args, kinds) {
		bad("server.args", "%s", e)
	}
	envErrs := checkEnv(s.Env, kinds)
	for _, field := range slices.Sorted(maps.Keys(envErrs)) {
		for _, e := range envErrs[field] {
			bad(field, "%s", e)
		}
	}
	c := m.Contract
	if c.Version < 1 {
		bad("contract.version", "is %d, want 1 or more", c.Version)
	}
	if len(c.Endpoints) == 0 {
		bad("contract.endpoints", "is empty")
	}
	if c.PromptLogprobs != PromptLogprobsNative && c.PromptLogprobs != PromptLogprobsTeacherForcing {
		bad("contract.promptLogprobs", "is %q, want %q or %q", c.PromptLogprobs, PromptLogprobsNative, PromptLogprobsTeacherForcing)
	}
	return errors.Join(errs...)
}

// CheckPath accepts a clean, relative, slash-separated path inside a bundle that is not
// manifest.json.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is absolute", p)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("%q contains a backslash or NUL", p)
	case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		return fmt.Errorf("%q escapes the bundle", p)
	case path.Clean(p) != p || p == ".":
		return fmt.Errorf("%q is not a clean path", p)
	case p == FileName:
		return fmt.Errorf("%q is the manifest itself", p)
	}
	return nil
}

// DraftFits reports why a draft cannot draft for a model: a different vocabulary (size,
// tokens or tokenizer), or an MTP draft made for another architecture or hidden size.
func DraftFits(model, draft gguf.Facts) error {
	var errs []error
	if model.VocabSize != draft.VocabSize {
		errs = append(errs, fmt.Errorf("vocabulary of %d tokens, the model has %d", draft.VocabSize, model.VocabSize))
	} else if model.VocabSHA256 != "" && draft.VocabSHA256 != "" && model.VocabSHA256 != draft.VocabSHA256 {
		errs = append(errs, fmt.Errorf("vocabulary tokens differ from the model's (token list sha256 %.12s, model %.12s)", draft.VocabSHA256, model.VocabSHA256))
	}
	if model.TokenizerModel != draft.TokenizerModel {
		errs = append(errs, fmt.Errorf("tokenizer %q, the model's is %q", draft.TokenizerModel, model.TokenizerModel))
	}
	if draft.DraftFor != "" {
		if draft.DraftFor != model.Architecture {
			errs = append(errs, fmt.Errorf("an MTP draft for %s (architecture %s), the model is %s", draft.DraftFor, draft.Architecture, model.Architecture))
		}
		if draft.EmbeddingLengthOut != 0 && model.EmbeddingLength != 0 && draft.EmbeddingLengthOut != model.EmbeddingLength {
			errs = append(errs, fmt.Errorf("an MTP draft for a hidden size of %d, the model's is %d", draft.EmbeddingLengthOut, model.EmbeddingLength))
		}
	}
	return errors.Join(errs...)
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

func isHexLen(s string, n int) bool { return len(s) == n && isHex(s) }
