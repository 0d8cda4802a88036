package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/targets"
)

// ServerKnobs are the llama-server settings a bundle records (../shared/notes/build-facts.md:
// a run's identity). A nil pointer leaves the argument out, so llama-server's default applies.
type ServerKnobs struct {
	CtxSize, BatchSize, UBatchSize, Threads, ThreadsDraft, Poll, GPULayers, GPULayersDraft, Parallel *int
	DraftNMax, DraftNMin                                                                             *int
	// DraftPMin is kept as text so that the manifest records exactly what was given.
	DraftPMin string
	// CacheRAM and CtxCheckpoints are always recorded: a valid run reuses no prompt cache.
	CacheRAM, CtxCheckpoints int
	// ScoresAlone asks for traffic-independent scores (--prompt-logprobs-alone, --no-kv-unified)
	// where the server has the patch for it.
	ScoresAlone bool
}

// BundleInput is everything a bundle is made from.
type BundleInput struct {
	Target *targets.Target
	// Artifacts is the artifact directory the server comes from; Server, in its place, the
	// server's files already laid out (bundle --image).
	Artifacts string
	Server    *ServerInput
	Model     string
	Draft     string
	// MMProj is a multimodal projector GGUF (--mmproj), served beside the model.
	MMProj string
	Knobs  ServerKnobs
	// ExtraArgs are appended to llama-server's arguments as given (--server-arg).
	ExtraArgs []string
	// Env is added to the target's runtime environment (--env).
	Env map[string]string
}

// BundleOutput says where and how a bundle is written.
type BundleOutput struct {
	// Dir is the bundle directory; empty when only Archive is wanted.
	Dir string
	// Archive, if set, is a .tar.zst or .tar.gz file to pack the bundle into.
	Archive string
	// Force replaces an existing Dir or Archive.
	Force bool
	// Link tries a hard link, then a reflink, before copying each file.
	Link bool
	// Epoch is the mtime of every archive entry.
	Epoch time.Time
	// Progress, if set, reports how far copying and hashing got (a large model takes
	// minutes): on its Term's status line, or as a log line every Every.
	Progress *progress.Reporter
	Log      *slog.Logger
}

// ServerInput is a server taken from elsewhere than an artifact directory: its files, named
// for the bundle (bin/llama-server, lib/...), the loader among them, and its provenance.
type ServerInput struct {
	Files  []BundleFile
	Loader string
	Build  Build
	// GGML lists the backends among Files that the server's ggml dlopens (server.ggml).
	GGML *GGML
	// Env is the environment the server had where it came from that the bundle keeps
	// (GGML_BACKEND_PATH, as a bundle path), under the target's and --env.
	Env map[string]string
	// What names the server's source in messages ("image REF").
	What string
}

// BundleFile is one file to place in the bundle.
type BundleFile struct {
	From string // source path
	File
	// Want is the sha256 the source should have (from artifacts.json), if known.
	Want string
}

// BundlePlan is a checked bundle: its manifest without the digests, and where every file
// comes from.
type BundlePlan struct {
	Manifest *Manifest
	Files    []BundleFile
}

// PlanBundle checks the inputs and decides the bundle's layout and manifest, writing
// nothing. Every failure names the file and the reason; all are reported together.
func PlanBundle(in BundleInput) (*BundlePlan, error) {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	t := in.Target
	m := &Manifest{
		SchemaVersion: SchemaVersion,
		Entrypoint:    DefaultEntrypoint(),
		Target:        targetOf(t),
		Contract:      DefaultContract(),
	}
	p := &BundlePlan{Manifest: m}

	// The server: artifacts built for this target, or files given as they are.
	switch {
	case in.Server != nil && in.Artifacts != "":
		fail("give the server as artifacts or as files, not both")
	case in.Server != nil:
		p.Files = append(p.Files, in.Server.Files...)
		m.Server.Loader = in.Server.Loader
		m.Server.GGML = in.Server.GGML
		m.Build = in.Server.Build
		if m.Build.Image != nil && !m.Build.Image.Foreign && m.Build.Plan != nil {
			var probe struct{ Target string }
			if err := json.Unmarshal(m.Build.Plan, &probe); err == nil && probe.Target != t.Name {
				fail("%s holds a server built for target %s, not %s", in.Server.What, probe.Target, t.Name)
			}
		}
	case in.Artifacts == "":
		fail("no server artifacts given: use --artifacts DIR (the output of llbuild build)")
	default:
		a, err := artifacts.Open(in.Artifacts)
		switch {
		case err != nil:
			errs = append(errs, notThere(fmt.Errorf("artifacts %s: %w", in.Artifacts, err)))
		case a.Manifest.Target != t.Name:
			fail("artifacts %s were built for target %s, not %s", in.Artifacts, a.Manifest.Target, t.Name)
		default:
			files, loader, err := serverFiles(a)
			if err != nil {
				fail("artifacts %s: %w", in.Artifacts, err)
			}
			p.Files = append(p.Files, files...)
			m.Server.Loader = loader
			if m.Build, err = buildOf(a.Provenance); err != nil {
				fail("artifacts %s: %w", in.Artifacts, err)
			}
		}
	}
	alone := false
	for _, pt := range m.Build.Patches {
		switch pt.Name {
		case patches.PromptLogprobs:
			m.Contract.PromptLogprobs = PromptLogprobsNative
		case patches.PromptLogprobsAlone:
			alone = true
		}
	}
	m.Contract.ScoresTrafficIndependent = alone && in.Knobs.ScoresAlone && m.Contract.PromptLogprobs == PromptLogprobsNative
	m.Server.Executable = BinDir + "/llama-server"
	m.Server.LibraryPath = []string{LibDir}

	// The models.
	var model, draft gguf.Facts
	modelPath := ModelsDir + "/" + filepath.Base(in.Model)
	if in.Model == "" {
		fail("no model given: use --model FILE.gguf")
	} else if facts, err := gguf.ReadFacts(in.Model); err != nil {
		errs = append(errs, notThere(fmt.Errorf("model %s: %w", in.Model, err)))
	} else {
		model = facts
		m.Models.Model = Model{Path: modelPath, GGUF: facts}
		p.Files = append(p.Files, BundleFile{From: in.Model, File: File{Path: modelPath, Kind: KindModel}})
	}
	if in.Draft != "" {
		draftPath := ModelsDir + "/" + filepath.Base(in.Draft)
		facts, err := gguf.ReadFacts(in.Draft)
		switch {
		case err != nil:
			errs = append(errs, notThere(fmt.Errorf("draft %s: %w", in.Draft, err)))
		case draftPath == modelPath:
			fail("draft %s: has the same file name as the model; rename one", in.Draft)
		default:
			draft = facts
			m.Models.Draft = &Model{Path: draftPath, GGUF: facts}
			p.Files = append(p.Files, BundleFile{From: in.Draft, File: File{Path: draftPath, Kind: KindDraft}})
			if model.Architecture != "" {
				if err := DraftFits(model, draft); err != nil {
					fail("draft %s does not fit model %s: %w", in.Draft, in.Model, err)
				}
			}
		}
	}
	if in.MMProj != "" {
		pjPath := ModelsDir + "/" + filepath.Base(in.MMProj)
		pj, err := ReadProjector(in.MMProj)
		switch {
		case err != nil:
			errs = append(errs, notThere(fmt.Errorf("mmproj %s: %w", in.MMProj, err)))
		case pjPath == modelPath || m.Models.Draft != nil && pjPath == m.Models.Draft.Path:
			fail("mmproj %s: has the same file name as the model or the draft; rename it", in.MMProj)
		default:
			pj.Path = pjPath
			m.Models.MMProj = pj
			p.Files = append(p.Files, BundleFile{From: in.MMProj, File: File{Path: pjPath, Kind: KindMMProj}})
			if n := model.EmbeddingLength; pj.EmbeddingLength != 0 && n != 0 && pj.EmbeddingLength != n {
				fail("mmproj %s projects to %d-wide embeddings, model %s has %d: it was made for another model", in.MMProj, pj.EmbeddingLength, in.Model, n)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	m.Server.Args = serverArgs(m.Models, in.Knobs, m.Contract.PromptLogprobs == PromptLogprobsNative, m.Contract.ScoresTrafficIndependent, in.ExtraArgs)
	m.Server.Env = map[string]string{}
	if in.Server != nil {
		maps.Copy(m.Server.Env, in.Server.Env)
	}
	for k, v := range t.Runtime.Env {
		m.Server.Env[k] = v
	}
	for k, v := range in.Env {
		m.Server.Env[k] = v
	}
	if m.Contract.ScoresTrafficIndependent {
		if err := trafficIndependent(m.Settings()); err != nil {
			return nil, &inputerr.Error{Err: err}
		}
	}
	sort.Slice(p.Files, func(i, j int) bool { return p.Files[i].Path < p.Files[j].Path })
	for i, f := range p.Files {
		if i > 0 && p.Files[i-1].Path == f.Path {
			return nil, fmt.Errorf("%s and %s would both be %s in the bundle", p.Files[i-1].From, f.From, f.Path)
		}
	}
	// Check the manifest as it will be, with placeholder digests.
	check := *m
	for _, f := range p.Files {
		mf := f.File
		if mf.Link == "" {
			mf.SHA256 = strings.Repeat("0", 64)
		}
		check.Files = append(check.Files, mf)
	}
	if err := check.Validate(); err != nil {
		return nil, fmt.Errorf("the bundle's manifest would be invalid: %w", err)
	}
	return p, nil
}

// ReadProjector reads a multimodal projector's GGUF header: general.architecture must be clip
// (what llama.cpp's converters write for --mmproj files).
func ReadProjector(file string) (*Projector, error) {
	f, err := gguf.Open(file)
	if err != nil {
		return nil, err
	}
	str := func(k string) string {
		v, _ := f.Get(k)
		s, _ := v.AsString()
		return s
	}
	flag := func(k string) bool {
		v, _ := f.Get(k)
		b, _ := v.AsBool()
		return b
	}
	if a := str("general.architecture"); a != "clip" {
		return nil, fmt.Errorf("not a multimodal projector: general.architecture is %q, a projector's is clip (llama.cpp's convert_hf_to_gguf.py --mmproj writes one)", a)
	}
	pj := &Projector{Type: str("clip.projector_type"), Vision: flag("clip.has_vision_encoder"), Audio: flag("clip.has_audio_encoder")}
	if pj.Type == "" {
		pj.Type = str("clip.vision.projector_type")
	}
	for _, k := range []string{"clip.vision.projection_dim", "clip.audio.projection_dim"} {
		if v, ok := f.Get(k); ok {
			if n, ok := v.AsUint(); ok && pj.EmbeddingLength == 0 {
				pj.EmbeddingLength = n
			}
		}
	}
	return pj, nil
}

// notThere makes the error of an input the caller named but that does not exist an
// inputerr.Error.
func notThere(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &inputerr.Error{Err: err}
	}
	return err
}

// serverFiles lays the artifacts out as bin/ (executables) and lib/ (libraries). A dynamic
// loader among the libraries (a build that ships its own C library) becomes the bundle's
// loader: running llama-server through the host's loader with a foreign libc would fail.
func serverFiles(a *artifacts.Artifacts) ([]BundleFile, string, error) {
	var files []BundleFile
	var loader string
	var server bool
	seen := map[string]string{}
	for _, f := range a.Manifest.Files {
		base := path.Base(f.Path)
		var dst string
		switch f.Kind {
		case artifacts.KindExecutable:
			dst = BinDir + "/" + base
			server = server || base == "llama-server"
		case artifacts.KindPatch:
			dst = PatchesDir + "/" + base
		case artifacts.KindLibrary:
			dst = LibDir + "/" + base
			if isLoader(base) && f.Link == "" {
				if loader != "" {
					return nil, "", fmt.Errorf("two dynamic loaders, %s and %s", loader, dst)
				}
				loader = dst
			}
		default:
			return nil, "", fmt.Errorf("%s is a %s; a bundle takes the server recipe's executables and libraries", f.Path, f.Kind)
		}
		if prev, ok := seen[dst]; ok {
			return nil, "", fmt.Errorf("%s and %s would both be %s", prev, f.Path, dst)
		}
		seen[dst] = f.Path
		files = append(files, BundleFile{
			From: a.Path(f),
			File: File{Path: dst, Kind: f.Kind, Link: f.Link},
			Want: f.SHA256,
		})
	}
	if !server {
		return nil, "", errors.New("no llama-server executable among the artifacts")
	}
	return files, loader, nil
}

func isLoader(base string) bool {
	return strings.HasPrefix(base, "ld-linux") && strings.Contains(base, ".so") || strings.HasPrefix(base, "ld-musl-")
}

// setsParallel says whether extra arguments give llama-server's slot count.
func setsParallel(extra []string) bool {
	for _, a := range extra {
		if a == "-np" || a == "--parallel" || strings.HasPrefix(a, "--parallel=") {
			return true
		}
	}
	return false
}

// defaultSlots is llama-server's slot count when --parallel is not given.
const defaultSlots = 4

// serverArgs renders llama-server's arguments in a fixed order. promptLogprobs turns on the
// patched server's prompt_logprobs (patch 0002), which the shim then uses for echo.
func serverArgs(models Models, k ServerKnobs, promptLogprobs, scoresAlone bool, extra []string) []string {
	args := []string{"--model", models.Model.Path}
	num := func(flag string, v *int) {
		if v != nil {
			args = append(args, flag, strconv.Itoa(*v))
		}
	}
	if d := models.Draft; d != nil {
		// An MTP draft (an "<arch>-assistant" model) runs as draft-mtp; any other draft
		// with the same vocabulary runs as a classic draft model.
		specType := "draft-simple"
		if d.GGUF.DraftFor != "" {
			specType = "draft-mtp"
		}
		args = append(args, "--model-draft", d.Path, "--spec-type", specType)
		num("--spec-draft-n-max", k.DraftNMax)
		num("--spec-draft-n-min", k.DraftNMin)
		if k.DraftPMin != "" {
			args = append(args, "--spec-draft-p-min", k.DraftPMin)
		}
		num("--spec-draft-threads", k.ThreadsDraft)
		num("--n-gpu-layers-draft", k.GPULayersDraft)
	}
	if pj := models.MMProj; pj != nil {
		args = append(args, "--mmproj", pj.Path)
	}
	num("--ctx-size", k.CtxSize)
	num("--batch-size", k.BatchSize)
	num("--ubatch-size", k.UBatchSize)
	num("--threads", k.Threads)
	num("--poll", k.Poll)
	num("--n-gpu-layers", k.GPULayers)
	num("--parallel", k.Parallel)
	if scoresAlone && k.Parallel == nil && !setsParallel(extra) {
		// Without --parallel llama-server picks 4 slots and a unified KV cache, overriding
		// --no-kv-unified: scores would depend on the traffic. The same 4 slots, named.
		args = append(args, "--parallel", strconv.Itoa(defaultSlots))
	}
	args = append(args, "--cache-ram", strconv.Itoa(k.CacheRAM), "--ctx-checkpoints", strconv.Itoa(k.CtxCheckpoints))
	if promptLogprobs {
		args = append(args, "--prompt-logprobs")
	}
	if scoresAlone {
		// a scoring request alone in its batches, over KV cells of its own slot only
		args = append(args, "--prompt-logprobs-alone", "--no-kv-unified")
	}
	return append(args, extra...)
}

// trafficIndependent refuses settings (from --server-arg or --env) that undo what the manifest's
// scoresTrafficIndependent promises: a unified KV cache, automatic slots (which unify it), or
// scoring sharing batches.
func trafficIndependent(s Settings) error {
	const how = "drop it, or bundle with --scores-traffic-independent=false (the manifest then does not promise it)"
	if v, _ := s.Lookup("--kv-unified"); v == "true" {
		return fmt.Errorf("a unified KV cache (--kv-unified or LLAMA_ARG_KV_UNIFIED) makes prompt-token scores depend on the other requests, which the bundle promises they do not: %s", how)
	}
	if v, _ := s.Lookup("--parallel"); v == "-1" || v == "" {
		return fmt.Errorf("--parallel %q lets llama-server choose its slots and unify the KV cache, so scores would depend on the traffic: give a number of slots, or %s", v, how)
	}
	if v, ok := s.Lookup("--prompt-logprobs-alone"); ok && v == "false" {
		return fmt.Errorf("scoring that shares batches with other requests gives scores that depend on them: %s", how)
	}
	return nil
}

func targetOf(t *targets.Target) Target {
	mt := Target{Name: t.Name, Backend: string(t.Build.Backend)}
	h := t.Host
	mt.Host.CPU.Model = h.CPU.Model
	mt.Host.CPU.Features = []string{}
	for _, f := range h.CPU.Features {
		mt.Host.CPU.Features = append(mt.Host.CPU.Features, string(f))
	}
	for _, g := range h.GPUs {
		mt.Host.GPUs = append(mt.Host.GPUs, GPU{
			Vendor: string(g.Vendor), Name: g.Name, PCIID: g.PCIID,
			ComputeCapability: g.ComputeCapability, Brand: g.Brand, SYCLDevice: g.SYCLDevice,
		})
	}
	mt.Host.Driver = Driver{Version: h.Driver.Version, CUDA: h.Driver.CUDA}
	return mt
}

func buildOf(p artifacts.Provenance) (Build, error) {
	plan, err := NewPlanJSON(p.Plan)
	if err != nil {
		return Build{}, fmt.Errorf("the plan in %s: %w", artifacts.ProvenanceFile, err)
	}
	b := Build{
		Plan:     plan,
		PlanHash: p.PlanHash,
		// the whole source: a plain directory's build says so (unverified) and names its tree,
		// so that nothing downstream claims a commit the code is not
		Source:  p.Materials.Source,
		Patches: []Patch{},
		Images:  []Image{},
		Builder: Builder{Name: p.Builder.Name, Version: p.Builder.Version, Executor: p.Builder.Executor},
	}
	if v := p.Materials.Vendor; v != nil {
		b.Vendor = &Source{URL: v.URL, Commit: v.Commit}
	}
	var applied [][2]string
	for _, pt := range p.Materials.Patches {
		b.Patches = append(b.Patches, Patch{Name: pt.Name, SHA256: pt.SHA256})
		applied = append(applied, [2]string{pt.Name, pt.SHA256})
	}
	b.Series, b.Contract = patches.NameOf(applied), patches.Contract(applied)
	for _, im := range p.Materials.Images {
		b.Images = append(b.Images, Image{Role: im.Role, Ref: im.Ref, Digest: im.Digest})
	}
	return b, nil
}

// WriteBundle assembles the planned bundle in a temporary directory beside its destination
// and renames it into place; if anything fails, nothing is left behind. It returns the
// finished manifest.
func WriteBundle(ctx context.Context, p *BundlePlan, out BundleOutput) (*Manifest, error) {
	if out.Dir == "" && out.Archive == "" {
		return nil, inputerr.Errorf("no output: give -o DIR, --archive FILE or both")
	}
	if out.Log == nil {
		out.Log = slog.New(slog.DiscardHandler)
	}
	var dest, archive string
	var err error
	if out.Dir != "" {
		if dest, err = checkDest(out.Dir, out.Force, p, true); err != nil {
			return nil, err
		}
	}
	if out.Archive != "" {
		if abs, err := filepath.Abs(out.Archive); err == nil && dest != "" && strings.HasPrefix(abs, dest+string(filepath.Separator)) {
			return nil, inputerr.Errorf("archive %s is inside the bundle directory %s; write it elsewhere", out.Archive, out.Dir)
		} else if err == nil && abs == dest {
			return nil, inputerr.Errorf("-o and --archive both name %s: give the archive another name (the directory would replace it)", out.Archive)
		}
		if archive, err = checkDest(out.Archive, out.Force, p, false); err != nil {
			return nil, err
		}
		if _, err := ArchiveCompression(archive); err != nil {
			return nil, &inputerr.Error{Err: err}
		}
	}
	parent := filepath.Dir(dest)
	if dest == "" {
		parent = filepath.Dir(archive)
	}
	tmp, err := os.MkdirTemp(parent, ".llbuild-bundle-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory in %s: %w", parent, err)
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left to remove
	// MkdirTemp makes 0700; a bundle is meant to be read by others.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}

	m := *p.Manifest
	files, err := placeFiles(ctx, tmp, p.Files, out)
	if err != nil {
		return nil, err
	}
	m.Files = files
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("bundle manifest: %w", err)
	}
	b, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteNew(filepath.Join(tmp, FileName), b, 0o644); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncTree(tmp); err != nil {
		return nil, err
	}
	if archive != "" {
		if err := writeArchive(ctx, tmp, &m, archive, out.Epoch); err != nil {
			return nil, err
		}
	}
	if dest != "" {
		if err := atomicfile.ReplaceDir(tmp, dest); err != nil {
			if archive != "" {
				os.Remove(archive)
			}
			return nil, err
		}
		atomicfile.SyncDir(parent)
	}
	return &m, nil
}

// checkDest refuses an existing destination unless force, refuses to replace anything but
// a directory (or a file, for an archive), and refuses when an input lies inside it.
func checkDest(p string, force bool, plan *BundlePlan, dir bool) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(abs)
	if fi, err := os.Stat(parent); err != nil {
		return "", inputerr.Errorf("output %s: parent directory: %v (make it first)", p, err)
	} else if !fi.IsDir() {
		return "", inputerr.Errorf("output %s: %s is not a directory", p, parent)
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return abs, nil
	}
	if err != nil {
		return "", fmt.Errorf("output %s: %w", p, err)
	}
	if dir && !fi.IsDir() || !dir && !fi.Mode().IsRegular() {
		what := "regular file"
		switch {
		case fi.IsDir():
			what = "directory"
		case fi.Mode()&fs.ModeSymlink != 0:
			what = "symbolic link"
		case !fi.Mode().IsRegular():
			what = "special file (" + fi.Mode().Type().String() + ")"
		}
		return "", inputerr.Errorf("output %s exists and is a %s; --force replaces only a %s: write elsewhere", p, what, map[bool]string{true: "directory", false: "regular file"}[dir])
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	for _, f := range plan.Files {
		if Within(f.From, real) {
			return "", inputerr.Errorf("output %s holds an input, %s; --force would delete it: write elsewhere", p, f.From)
		}
	}
	if !force {
		return "", inputerr.Errorf("output %s exists; use --force to replace it", p)
	}
	return abs, nil
}

// placeFiles copies (or links) every file into root, hashing each in the same pass, in
// parallel; results are in input order.
func placeFiles(ctx context.Context, root string, files []BundleFile, out BundleOutput) ([]File, error) {
	result := make([]File, len(files))
	var total int64
	for _, f := range files {
		if f.Link == "" {
			if fi, err := os.Stat(f.From); err == nil {
				total += fi.Size()
			}
		}
	}
	var done atomic.Int64
	if out.Progress != nil && total > 0 {
		defer out.Progress.Start(func(elapsed time.Duration) (progress.Report, bool) {
			return bundleProgress(done.Load(), total, elapsed), true
		}).Stop()
	}
	dirs := map[string]bool{BinDir: true, LibDir: true, ModelsDir: true}
	for _, f := range files {
		if d := path.Dir(f.Path); d != "." {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(min(runtime.GOMAXPROCS(0), 4))
	for i, f := range files {
		g.Go(func() error {
			mf, how, err := placeFile(gctx, root, f, out.Link, &done)
			if err != nil {
				return fmt.Errorf("%s (from %s): %w", f.Path, f.From, err)
			}
			out.Log.Debug("placed", "path", f.Path, "how", how, "size", mf.Size)
			result[i] = mf
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return result, nil
}

func fileMode(f File, loader bool) os.FileMode {
	if f.Kind == KindExecutable || loader {
		return 0o755
	}
	return 0o644
}

// placeFile puts one file into the bundle and returns its manifest entry and how it got
// there (link, reflink, copy).
func placeFile(ctx context.Context, root string, f BundleFile, link bool, done *atomic.Int64) (File, string, error) {
	mf := f.File
	dst := filepath.Join(root, filepath.FromSlash(f.Path))
	if f.Link != "" {
		return mf, "symlink", os.Symlink(f.Link, dst)
	}
	src, err := os.Open(f.From)
	if err != nil {
		return mf, "", err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return mf, "", err
	}
	if !fi.Mode().IsRegular() {
		return mf, "", errors.New("not a regular file")
	}
	mode := fileMode(mf, isLoader(path.Base(f.Path)) && f.Kind == KindLibrary)
	how := "copy"
	var w io.Writer
	var out *os.File
	if link && os.Link(f.From, dst) == nil {
		how = "hard link"
	} else {
		if out, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode); err != nil {
			return mf, "", err
		}
		defer out.Close()
		if link && unix.IoctlFileClone(int(out.Fd()), int(src.Fd())) == nil {
			how = "reflink"
		} else {
			w = out
		}
	}
	n, sum, err := CopyAndHashFile(ctx, w, src, done)
	if err != nil {
		return mf, "", err
	}
	if out != nil {
		if err := out.Sync(); err != nil {
			return mf, "", err
		}
		if err := out.Close(); err != nil {
			return mf, "", err
		}
	}
	if f.Want != "" && sum != f.Want {
		return mf, "", fmt.Errorf("sha256 %s, artifacts.json says %s: the artifacts changed while bundling", sum, f.Want)
	}
	mf.Size, mf.SHA256 = n, sum
	return mf, how, nil
}

// bundleProgress says how many of total bytes are copied and hashed after elapsed.
func bundleProgress(done, total int64, elapsed time.Duration) progress.Report {
	frac := float64(done) / float64(total)
	rate := float64(done) / 1e6 / max(elapsed.Seconds(), 1e-9)
	const width = 30
	filled := min(max(int(width*frac), 0), width)
	return progress.Report{
		Line: fmt.Sprintf("bundling [%s%s] %5.1f%% %.0f/%.0f MB %.0f MB/s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
			100*frac, float64(done)/1e6, float64(total)/1e6, rate),
		Msg: "bundling: copying and hashing",
		Attrs: []any{"done", fmt.Sprintf("%.0f of %.0f MB (%.0f%%)", float64(done)/1e6, float64(total)/1e6, 100*frac),
			"elapsed", progress.Elapsed(elapsed), "MB/s", fmt.Sprintf("%.0f", rate)},
	}
}
