package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/llbuild/llbuild/manifest"
)

// Identity is everything that names a measured configuration: what was built (plan, commit,
// patches), what ran (model and draft by digest, llama-server's arguments and environment)
// and how it was measured. Two runs with the same Identity but for Time measured the same
// thing; any byte of the manifest that changes (an argument, an environment knob, a patch, a
// model byte) changes ManifestSHA256 and the label.
type Identity struct {
	// Label says it all in one line, for tables and directory names.
	Label string `json:"label"`
	// Name is the run's human name (--label), first in Label; Note is free text (--note) kept
	// with the record, never in the label.
	Name string `json:"name,omitempty"`
	Note string `json:"note,omitempty"`
	// ManifestSHA256 is the sha256 of the bundle's manifest.json, which holds the digest of
	// every file and the server's arguments and environment.
	ManifestSHA256 string `json:"manifestSha256"`
	Model          File   `json:"model"`
	Draft          *File  `json:"draft,omitempty"`
	// Settings are llama-server's options from its arguments and LLAMA_ARG_* environment.
	Settings manifest.Settings `json:"settings"`
	Env      map[string]string `json:"env,omitempty"`
	// Command is the command line llama-server ran with (loader, arguments; the bench adds
	// --host and --port), relative to the bundle.
	Command     []string `json:"command"`
	Target      string   `json:"target"`
	PlanHash    string   `json:"planHash"`
	LlamaCommit string   `json:"llamaCommit"`
	// SourceTree is the content hash of the tree the server was built from when that was a plain
	// directory, not a checkout of LlamaCommit (which nothing then checked): the label names it
	// instead of the commit.
	SourceTree string `json:"sourceTree,omitempty"`
	// Unverified says nothing checked that the server was built from LlamaCommit: its source was
	// a plain directory (SourceTree). Every page and export that names the commit says so.
	Unverified bool `json:"unverified,omitempty"`
	// Image is the digest of the runtime image the server came out of (bundle --image); for a
	// foreign image, which has no plan, the label names it instead of the plan.
	Image   string   `json:"image,omitempty"`
	Patches []string `json:"patches"`
	// GPU is the device the run was given (--gpus), "" for the default.
	GPU string `json:"gpu,omitempty"`
	// Mode and Protocol say how it was measured.
	Mode     string `json:"mode"`
	Protocol string `json:"protocol"`
	// Time is when the run started, UTC.
	Time time.Time `json:"time"`
}

// File names a model file by its bundle path and sha256.
type File struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

func newIdentity(b *Bundle, p Protocol, gpu string, at time.Time) Identity {
	m := b.Manifest
	id := Identity{
		ManifestSHA256: b.ManifestSHA256,
		Settings:       m.Settings(),
		Env:            m.Server.Env,
		Command:        append([]string{m.Server.Executable}, m.Server.Args...),
		Target:         m.Target.Name,
		PlanHash:       m.Build.PlanHash,
		LlamaCommit:    m.Build.Source.Commit,
		SourceTree:     m.Build.Source.Tree,
		Unverified:     m.Build.Source.Tree != "",
		Image:          imageDigest(m),
		GPU:            gpu,
		Mode:           p.Mode,
		Protocol:       p.key(),
		Time:           at.UTC().Truncate(time.Second),
	}
	digests := map[string]string{}
	for _, f := range m.Files {
		digests[f.Path] = f.SHA256
	}
	id.Model = File{Name: m.Models.Model.Path, SHA256: digests[m.Models.Model.Path]}
	if d := m.Models.Draft; d != nil {
		id.Draft = &File{Name: d.Path, SHA256: digests[d.Path]}
	}
	for _, p := range m.Build.Patches {
		id.Patches = append(id.Patches, p.Name+"@"+shortDigest(p.SHA256))
	}
	id.Label = id.label()
	return id
}

func imageDigest(m *manifest.Manifest) string {
	if m.Build.Image == nil {
		return ""
	}
	return m.Build.Image.Digest
}

// label is the lab's one-line name of a run:
// MODEL-SHA8[-DRAFT-SHA8-SPEC-nMAX]-bBATCHuUBATCH-thTHREADS[-ENV]-planPLAN8-COMMIT7 (imgIMAGE8[-COMMIT7] for a
// foreign image)-mMANIFEST8[-gpuN]-MODE-YYYYMMDDTHHMMSSZ.
func (id Identity) label() string {
	s := id.Settings
	get := func(flag string) string {
		if v, ok := s.Lookup(flag); ok && v != "" {
			return v
		}
		return "def"
	}
	parts := []string{modelName(id.Model.Name), shortDigest(id.Model.SHA256)[:8]}
	if id.Draft != nil {
		parts = append(parts, modelName(id.Draft.Name), shortDigest(id.Draft.SHA256)[:8], get("--spec-type"),
			"n"+get("--spec-draft-n-max"))
		if v, ok := s.Lookup("--spec-draft-n-min"); ok {
			parts = append(parts, "nmin"+v)
		}
		if v, ok := s.Lookup("--spec-draft-p-min"); ok {
			parts = append(parts, "pmin"+v)
		}
		if v, ok := s.Lookup("--spec-draft-p-split"); ok {
			parts = append(parts, "psplit"+v)
		}
		if v, ok := s.Lookup("--spec-draft-threads"); ok {
			parts = append(parts, "dth"+v)
		}
	}
	parts = append(parts, "b"+get("--batch-size")+"u"+get("--ubatch-size"), "th"+get("--threads"))
	if v, ok := s.Lookup("--poll"); ok {
		parts = append(parts, "poll"+v)
	}
	if id.Name != "" {
		parts = append([]string{id.Name}, parts...)
	}
	for _, k := range slices.Sorted(maps.Keys(id.Env)) {
		parts = append(parts, strings.ToLower(k)+id.Env[k])
	}
	commit := id.LlamaCommit
	if len(commit) > 9 {
		commit = commit[:9]
	}
	if id.SourceTree != "" {
		commit = "tree" + shortDigest(id.SourceTree)[:8]
	}
	server := []string{"plan" + shortDigest(id.PlanHash)[:8], commit}
	if id.PlanHash == "" && id.Image != "" {
		server = []string{"img" + shortDigest(id.Image)[:8]} // a foreign image: no plan, maybe no commit
		if commit != "" {
			server = append(server, commit)
		}
	}
	parts = append(parts, server...)
	parts = append(parts, "m"+shortDigest(id.ManifestSHA256)[:8])
	if id.GPU != "" {
		parts = append(parts, "gpu"+id.GPU)
	}
	parts = append(parts, id.Mode, id.Time.Format("20060102T150405Z"))
	for i, p := range parts {
		parts[i] = safe(p)
	}
	return strings.Join(parts, "-")
}

// safe keeps a label part to letters, digits, '.', '_' and '=' so a label is a file name.
func safe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '=':
			b.WriteRune(r)
		case r == '-' || r == '/' || r == ',':
			b.WriteRune('_')
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// maxDirName bounds a run directory's name: filesystems refuse names over 255 bytes, and the
// campaign adds ".N" to a taken one. The whole label stays in the record.
const maxDirName = 200

// dirName is a run's directory name for its label: the label itself when short enough, else a
// readable prefix and the label's own hash, so that two long labels never share a directory.
func dirName(label string) string {
	if len(label) <= maxDirName {
		return label
	}
	h := sha256.Sum256([]byte(label))
	return label[:maxDirName-17] + "-" + hex.EncodeToString(h[:8])
}

func modelName(p string) string {
	return strings.TrimSuffix(path.Base(p), ".gguf")
}

// shortDigest is a digest's hex without its "sha256:" prefix, padded so slicing never fails.
func shortDigest(d string) string {
	_, hex, ok := strings.Cut(d, ":")
	if !ok {
		hex = d
	}
	for len(hex) < 12 {
		hex += "0"
	}
	return hex
}

func shortHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:6])
}
