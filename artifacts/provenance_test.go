package artifacts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// provenanceV1 is provenance.json as llbuild wrote it before version 2: the same materials
// without substitution, unverified sources or apt.
const provenanceV1 = `{
  "schemaVersion": 1,
  "target": "cpu-v3",
  "planHash": "` + hash + `",
  "materials": {
    "source": {"url": "https://example.com/llama.cpp", "commit": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
    "patches": [],
    "images": [{"role": "devel", "ref": "ubuntu:24.04", "digest": "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}]
  },
  "plan": {"schemaVersion": 1, "apt": ["cmake"]},
  "builder": {"name": "llbuild", "version": "old", "executor": "dagger"}
}
`

func TestOpenReadsProvenanceVersions(t *testing.T) {
	tests := []struct {
		name    string
		content string // "" keeps what Write wrote
		wantErr string
	}{
		{"this version", "", ""},
		{"version 1, from before substitution was recorded", provenanceV1, ""},
		{"a newer version", strings.Replace(provenanceV1, `"schemaVersion": 1`, `"schemaVersion": 4`, 1), "schemaVersion is 4, this llbuild reads 1 to 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := Write(t.TempDir(), input(t, "server"))
			if err != nil {
				t.Fatal(err)
			}
			if tt.content != "" {
				if err := os.WriteFile(filepath.Join(dir, ProvenanceFile), []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			a, err := Open(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Open() = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			if a.Provenance.Materials.Source.Commit != strings.Repeat("a", 40) || len(a.Provenance.Materials.Images) != 1 {
				t.Errorf("provenance = %+v", a.Provenance.Materials)
			}
		})
	}
}

func TestWriteRecordsSubstitutionAndUnverifiedSource(t *testing.T) {
	in := input(t, "server")
	m := &in.Provenance.Materials
	m.Source.Unverified, m.Source.Tree = true, "sha256:"+strings.Repeat("d", 64)
	m.Images[0] = Image{Role: "devel", Ref: "oci-archive:devel.tar", Digest: "sha256:" + strings.Repeat("e", 64), Substituted: true,
		Planned: &ImageRef{Ref: "ubuntu:24.04@sha256:" + strings.Repeat("c", 64), Digest: "sha256:" + strings.Repeat("c", 64)}}
	m.Apt = &Apt{Distro: "ubuntu-24.04", Snapshot: "20260723T000000Z", Packages: []AptPackage{{Name: "cmake", Version: "3.28.3-1build7"}}, Unverified: true}
	dir, err := Write(t.TempDir(), in)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := a.Provenance
	if got.SchemaVersion != ProvenanceSchemaVersion {
		t.Errorf("schemaVersion = %d, want %d", got.SchemaVersion, ProvenanceSchemaVersion)
	}
	if got.Materials.Source != m.Source || !got.Materials.Images[0].Substituted || *got.Materials.Images[0].Planned != *m.Images[0].Planned || !got.Materials.Apt.Unverified {
		t.Errorf("materials = %+v, want %+v", got.Materials, *m)
	}
	if a.Manifest.SchemaVersion != SchemaVersion {
		t.Errorf("artifacts.json schemaVersion = %d, want %d", a.Manifest.SchemaVersion, SchemaVersion)
	}
}

// TestWriteRecordsTheSeries: artifacts.json and provenance.json both name the series the build
// applied, and Open refuses a pair that names two; files from before the series was recorded
// (artifacts.json version 1, provenance.json version 2) still open, with no series.
func TestWriteRecordsTheSeries(t *testing.T) {
	in := input(t, "server")
	in.Series = "scoring"
	dir, err := Write(t.TempDir(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ManifestFile, ProvenanceFile} {
		var got struct {
			Series string `json:"series"`
		}
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Series != "scoring" {
			t.Errorf("%s: series = %q (%v), want scoring", f, got.Series, err)
		}
	}
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Manifest.Series != "scoring" || a.Provenance.Series != "scoring" {
		t.Errorf("Open() series = %q and %q, want scoring in both", a.Manifest.Series, a.Provenance.Series)
	}

	rewrite := func(f string, edit func(map[string]any)) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(ProvenanceFile, func(m map[string]any) { m["series"] = "plain" })
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "name different builds") {
		t.Errorf("Open() of files naming two series = %v, want an error saying they name different builds", err)
	}
	rewrite(ManifestFile, func(m map[string]any) { delete(m, "series"); m["schemaVersion"] = 1 })
	rewrite(ProvenanceFile, func(m map[string]any) { delete(m, "series"); m["schemaVersion"] = 2 })
	if a, err := Open(dir); err != nil {
		t.Errorf("Open() of files from before the series = %v, want them read", err)
	} else if a.Manifest.Series != "" || a.Provenance.Series != "" {
		t.Errorf("Open() of files from before the series: series %q and %q, want none", a.Manifest.Series, a.Provenance.Series)
	}
}
