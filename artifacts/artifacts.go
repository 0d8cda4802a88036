package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/walkroot"
)

// SchemaVersion is the version of artifacts.json this llbuild writes. Version 2 names the
// patch series (Series); Open still reads version 1.
const SchemaVersion = 2

// minSchemaVersion is the oldest artifacts.json Open reads.
const minSchemaVersion = 1

// ProvenanceSchemaVersion is the version of provenance.json this llbuild writes. Version 3
// names the patch series (Series). Version 2
// names the images a build used (marking a substitution of the plan's), marks a source built
// from a plain directory as unverified with the tree's hash, and records the apt pins; Open
// still reads version 1, whose images are always the plan's.
const ProvenanceSchemaVersion = 3

// minProvenanceSchemaVersion is the oldest provenance.json Open reads.
const minProvenanceSchemaVersion = 1

// File names inside an artifact directory.
const (
	ManifestFile   = "artifacts.json"
	ProvenanceFile = "provenance.json"
)

// Kinds of files an artifact directory holds.
const (
	KindExecutable = "executable"
	KindLibrary    = "library"
	KindWheel      = "wheel"
	// KindPatch is a patch the build applied, kept as it was applied (patches/NAME): a build's
	// negative result keeps its bytes, not only their digest.
	KindPatch = "patch"
)

// Manifest is artifacts.json: what the directory holds, with digests.
type Manifest struct {
	SchemaVersion int    `json:"schemaVersion"`
	Target        string `json:"target"`
	PlanHash      string `json:"planHash"`
	// Series names the patch series the build applied (scoring, plain, none, custom: the
	// plan's series); empty in a version 1 file.
	Series string `json:"series,omitempty"`
	Files  []File `json:"files"`
}

// File is one output file. A symbolic link (libllama.so -> libllama.so.0) has Link set and no
// size or digest; its target is another file of the directory.
type File struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
}

// Provenance is provenance.json: the materials of the build, the resolved plan and the builder.
// It holds no host facts and no wall time.
type Provenance struct {
	SchemaVersion int    `json:"schemaVersion"`
	Target        string `json:"target"`
	PlanHash      string `json:"planHash"`
	// Series is artifacts.json's Series; empty before version 3.
	Series    string          `json:"series,omitempty"`
	Materials Materials       `json:"materials"`
	Plan      json.RawMessage `json:"plan"`
	Builder   Builder         `json:"builder"`
}

// Materials are the inputs of a build, as the build used them.
type Materials struct {
	Source  Source  `json:"source"`
	Vendor  *Source `json:"vendor,omitempty"`
	Patches []Patch `json:"patches"`
	Images  []Image `json:"images"`
	// Apt is what the devel step installed with apt, when the build ran in a devel image.
	Apt *Apt `json:"apt,omitempty"`
	// CUDA is the CUDA toolkit that compiled, as found where the build ran (not the plan's
	// wish), for CUDA builds.
	CUDA *CUDAToolkit `json:"cuda,omitempty"`
}

// CUDAToolkit is the CUDA compiler a build used and the driver stub it linked against.
type CUDAToolkit struct {
	// Release is nvcc's version ("12.4.131"); Compiler its --version release line.
	Release  string `json:"release"`
	Compiler string `json:"compiler"`
	// Stubs is the directory of the driver stub libcuda.so the link used.
	Stubs string `json:"stubs"`
	// DriverLibrary says a real libcuda.so.1 was where the build ran (always so on a host
	// with a GPU driver; in a devel image it means the link could have used it, not the stub).
	DriverLibrary bool `json:"driverLibrary,omitempty"`
}

// Source is a git source at a full commit.
type Source struct {
	URL    string `json:"url"`
	Commit string `json:"commit"`
	// Unverified says the build used a plain directory, not a git checkout of Commit: URL and
	// Commit are what the plan named, which nothing checked, and Tree is what was built.
	Unverified bool `json:"unverified,omitempty"`
	// Tree is the content hash of an unverified source's tree (pipeline.TreeHash),
	// "sha256:<hex>".
	Tree string `json:"tree,omitempty"`
}

// Apt is the devel step's apt packages: the archive snapshot and each package's version.
type Apt struct {
	Distro   string       `json:"distro,omitempty"`
	Snapshot string       `json:"snapshot,omitempty"`
	Packages []AptPackage `json:"packages"`
	// Unverified says the build ran in a substituted devel image, which was only required
	// to have the packages: those it had were used at whatever version it has, and only
	// missing ones were installed at the versions listed.
	Unverified bool `json:"unverified,omitempty"`
}

// AptPackage is one apt package; Version is empty when the plan did not pin it.
type AptPackage struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Patch is one applied patch.
type Patch struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Image is a base image, by role (devel, runtime): the one the build used. In provenance of
// schema version 1 it is always the plan's.
type Image struct {
	Role   string `json:"role"`
	Ref    string `json:"ref"`
	Digest string `json:"digest,omitempty"`
	// Substituted says the build used another image than the plan's (--base): Planned names
	// the plan's. An image of the plan's digest from elsewhere (a mirror, an archive of it) is
	// not a substitution; Planned then still says what the plan named.
	Substituted bool      `json:"substituted,omitempty"`
	Planned     *ImageRef `json:"planned,omitempty"`
}

// ImageRef names an image.
type ImageRef struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest,omitempty"`
}

// Builder names the program that built the artifacts and how it ran them.
type Builder struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Executor string `json:"executor"`
}

// Input is what Write needs: where each output file is now and what it is.
type Input struct {
	Target   string
	PlanHash string
	// Series names the patch series the build applied (the plan's Series).
	Series     string
	Files      []InputFile
	Provenance Provenance
}

// InputFile is a file to copy into the artifact directory.
type InputFile struct {
	// Path is the file's path inside the artifact directory (slash-separated, relative).
	Path string
	// From is where the file is now.
	From string
	Kind string
}

// Dir is the directory of the artifacts of target built from the plan with hash planHash.
func Dir(out, target, planHash string) string {
	return filepath.Join(out, target, short(planHash))
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Write assembles the artifacts in a temporary directory next to their destination, syncs
// them to disk and renames the directory into place. If anything fails, nothing is left at
// the destination that was not there before: a previous good directory stays.
func Write(out string, in Input) (dir string, err error) {
	if in.Target == "" || strings.ContainsAny(in.Target, `/\`) || in.Target == "." || in.Target == ".." {
		return "", fmt.Errorf("artifacts: bad target name %q", in.Target)
	}
	if len(in.PlanHash) < 12 {
		return "", fmt.Errorf("artifacts: plan hash %q is too short", in.PlanHash)
	}
	if len(in.Files) == 0 {
		return "", errors.New("artifacts: no files to write")
	}
	dest := Dir(out, in.Target, in.PlanHash)
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+short(in.PlanHash)+"-")
	if err != nil {
		return "", fmt.Errorf("creating a temporary artifact directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	// MkdirTemp makes the directory private; artifacts are for others to read.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}

	m := Manifest{SchemaVersion: SchemaVersion, Target: in.Target, PlanHash: in.PlanHash, Series: in.Series}
	seen := map[string]bool{}
	files := append([]InputFile(nil), in.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if err := checkRel(f.Path); err != nil {
			return "", err
		}
		if seen[f.Path] {
			return "", fmt.Errorf("artifacts: %s is listed twice", f.Path)
		}
		seen[f.Path] = true
		mf, err := copyIn(tmp, f)
		if err != nil {
			return "", err
		}
		m.Files = append(m.Files, mf)
	}
	for _, f := range m.Files {
		if f.Link != "" && !seen[path.Join(path.Dir(f.Path), f.Link)] {
			return "", fmt.Errorf("artifacts: %s links to %s, which is not among the outputs", f.Path, f.Link)
		}
	}
	prov := in.Provenance
	prov.SchemaVersion = ProvenanceSchemaVersion
	prov.Target, prov.PlanHash, prov.Series = in.Target, in.PlanHash, in.Series
	if prov.Materials.Patches == nil {
		prov.Materials.Patches = []Patch{}
	}
	for name, v := range map[string]any{ManifestFile: m, ProvenanceFile: prov} {
		if err := writeJSON(filepath.Join(tmp, name), v); err != nil {
			return "", err
		}
	}
	if err := syncDir(tmp); err != nil {
		return "", err
	}
	if err := atomicfile.ReplaceDir(tmp, dest); err != nil {
		return "", err
	}
	return dest, syncDir(parent)
}

func checkRel(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || p == ManifestFile || p == ProvenanceFile {
		return fmt.Errorf("artifacts: %q is not a clean relative path for an output", p)
	}
	return nil
}

func copyIn(root string, f InputFile) (File, error) {
	mf := File{Path: f.Path, Kind: f.Kind}
	switch f.Kind {
	case KindExecutable, KindLibrary, KindWheel, KindPatch:
	default:
		return mf, fmt.Errorf("artifacts: %s: kind %q is not one of executable, library, wheel, patch", f.Path, f.Kind)
	}
	dst := filepath.Join(root, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return mf, err
	}
	fi, err := os.Lstat(f.From)
	if err != nil {
		return mf, fmt.Errorf("reading output %s: %w", f.Path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		link, err := os.Readlink(f.From)
		if err != nil {
			return mf, err
		}
		if path.IsAbs(link) || strings.Contains(link, "/") {
			return mf, fmt.Errorf("artifacts: %s is a link to %q; only links to a sibling file are kept", f.Path, link)
		}
		mf.Link = link
		return mf, os.Symlink(link, dst)
	}
	if !fi.Mode().IsRegular() {
		return mf, fmt.Errorf("artifacts: %s is not a regular file", f.Path)
	}
	mode := os.FileMode(0o644)
	if f.Kind != KindWheel && f.Kind != KindPatch {
		mode = 0o755
	}
	src, err := os.Open(f.From)
	if err != nil {
		return mf, fmt.Errorf("reading output %s: %w", f.Path, err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return mf, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), src)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return mf, fmt.Errorf("copying %s: %w", f.Path, err)
	}
	mf.Size, mf.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return mf, nil
}

func writeJSON(name string, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteNew(name, b, 0o644)
}

// Marshal renders v the way artifact files are written: indented JSON, sorted map keys, a
// trailing newline.
func Marshal(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// syncDir fsyncs every directory under root (files were synced as they were written) so
// the renames that follow cannot expose entries that are not on disk.
func syncDir(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		return err
	})
}

// Artifacts is a verified artifact directory.
type Artifacts struct {
	Dir        string
	Manifest   Manifest
	Provenance Provenance
}

// Open reads an artifact directory and verifies it: every listed file is present with the
// recorded size and sha256, every link points at a listed file, and nothing else is there.
// All problems are reported together.
func Open(dir string) (*Artifacts, error) {
	a := &Artifacts{Dir: dir}
	if err := readStrict(filepath.Join(dir, ManifestFile), &a.Manifest); err != nil {
		return nil, err
	}
	if err := readStrict(filepath.Join(dir, ProvenanceFile), &a.Provenance); err != nil {
		return nil, err
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{dir}, args...)...))
	}
	if v := a.Manifest.SchemaVersion; v < minSchemaVersion || v > SchemaVersion {
		bad("%s: schemaVersion is %d, this llbuild reads %d to %d", ManifestFile, v, minSchemaVersion, SchemaVersion)
	}
	if v := a.Provenance.SchemaVersion; v < minProvenanceSchemaVersion || v > ProvenanceSchemaVersion {
		bad("%s: schemaVersion is %d, this llbuild reads %d to %d", ProvenanceFile, v, minProvenanceSchemaVersion, ProvenanceSchemaVersion)
	}
	if a.Provenance.PlanHash != a.Manifest.PlanHash || a.Provenance.Target != a.Manifest.Target || a.Provenance.Series != a.Manifest.Series {
		bad("%s and %s name different builds", ManifestFile, ProvenanceFile)
	}
	listed := map[string]bool{ManifestFile: true, ProvenanceFile: true}
	for _, f := range a.Manifest.Files {
		if err := checkRel(f.Path); err != nil {
			bad("%v", err)
			continue
		}
		listed[f.Path] = true
	}
	for _, f := range a.Manifest.Files {
		if checkRel(f.Path) != nil {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if f.Link != "" {
			got, err := os.Readlink(p)
			switch {
			case err != nil:
				bad("%s: %v", f.Path, err)
			case got != f.Link:
				bad("%s links to %q, %s says %q", f.Path, got, ManifestFile, f.Link)
			case !listed[path.Join(path.Dir(f.Path), f.Link)]:
				bad("%s links to %s, which is not listed", f.Path, f.Link)
			}
			continue
		}
		size, sum, err := digest(p)
		if err != nil {
			bad("%v", err)
			continue
		}
		if size != f.Size || sum != f.SHA256 {
			bad("%s has size %d sha256 %s, %s says size %d sha256 %s", f.Path, size, sum, ManifestFile, f.Size, f.SHA256)
		}
	}
	_ = filepath.WalkDir(walkroot.Dir(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !listed[filepath.ToSlash(rel)] {
			bad("%s is not listed in %s", filepath.ToSlash(rel), ManifestFile)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// Path returns where f is on disk.
func (a *Artifacts) Path(f File) string { return filepath.Join(a.Dir, filepath.FromSlash(f.Path)) }

// Files returns the files of the given kind, in path order.
func (a *Artifacts) Files(kind string) []File {
	var out []File
	for _, f := range a.Manifest.Files {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func readStrict(name string, v any) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func digest(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("reading %s: %w", p, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
