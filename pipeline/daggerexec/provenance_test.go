package daggerexec

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
	"github.com/llbuild/llbuild/targets"
)

// standInDevel writes a one-image OCI layout and an OCI archive of it, standing for the
// stand-in devel images a user passes with --base devel=..., and returns both and the image's
// digest.
func standInDevel(t *testing.T) (layoutDir, archive, digest string) {
	t.Helper()
	img, err := mutate.Config(empty.Image, v1.Config{Labels: map[string]string{"llbuild.test": "stand-in devel"}})
	if err != nil {
		t.Fatal(err)
	}
	layoutDir = filepath.Join(t.TempDir(), "devel-layout")
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	archive, err = tarLayout(layoutDir, filepath.Join(t.TempDir(), "devel"))
	if err != nil {
		t.Fatal(err)
	}
	return layoutDir, archive, d.String()
}

// aptExec returns the arguments of the apt step's exec among the recorded queries.
func aptExec(t *testing.T, queries []string) []string {
	t.Helper()
	for _, q := range queries {
		i := strings.Index(q, `withExec(args:["bash","-c","set -e`)
		if i < 0 {
			continue
		}
		q = q[i+len("withExec(args:"):]
		var args []string
		if err := json.NewDecoder(strings.NewReader(q)).Decode(&args); err != nil {
			t.Fatalf("reading the apt exec's arguments: %v", err)
		}
		return args
	}
	t.Fatalf("no query runs the apt step")
	return nil
}

func TestAptPinsReachTheContainer(t *testing.T) {
	s := series(t)
	pinned := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	tg.Build.Images.DevelDistro = ""
	unpinned, err := pipeline.Resolve(tg, fixture.Recipe(t, strings.Repeat("a", 40)), s, nil, pipeline.Options{AllowFloating: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		plan       *pipeline.Plan
		devel      string
		wantArgs   []string
		wantScript []string
		notScript  []string
		// mode is the script's mode; sources the sources file's contents ("": none written)
		mode, sources string
	}{
		{"a pinned plan installs name=version from its snapshot", pinned, "",
			[]string{"build-essential=12.10ubuntu1", "ccache=4.9.1-1", "cmake=3.28.3-1build7", "git=1:2.43.0-1ubuntu7.3", "ninja-build=1.11.1-2"},
			[]string{
				// only the plan's sources, never the image's sources.list.d
				"-o Dir::Etc::SourceList=$conf/sources.list -o Dir::Etc::SourceParts=$conf/sources.list.d",
				"update\nrequire \"$@\"\n",
				`apt-get "${opts[@]}" install -y --no-install-recommends "$@"`,
				// apt runs only when a package is missing or at another version than pinned
				`dpkg-query -W -f='${db:Status-Status} ${Version}'`,
				`[ "$have" = "installed ${want#*=}" ]`,
				`if [ -z "$missing" ]; then`,
			}, nil, aptInstall, strings.Join(pinned.Apt.Sources, "\n") + "\n"},
		{"an unpinned plan installs names from the archive of the day", unpinned, "",
			[]string{"build-essential", "ccache", "cmake", "git", "ninja-build"},
			[]string{"apt-get update -q\n", `[ "${have%% *}" = installed ]`},
			nil, aptAnyVersion, ""},
		{"a substituted devel image gets missing packages from its own archive, by name", pinned,
			"mirror.invalid/other@sha256:" + strings.Repeat("b", 64),
			[]string{"build-essential", "ccache", "cmake", "git", "ninja-build"},
			[]string{"apt-get update -q\n", `[ "${have%% *}" = installed ]`},
			nil, aptAnyVersion, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			f := newFake(out)
			if _, err := newExecutor(t, f, Options{Series: s, Devel: tt.devel}).Build(context.Background(), tt.plan, out); err != nil {
				t.Fatal(err)
			}
			queries := f.recorded()
			args := aptExec(t, queries)
			if args[4] != tt.mode {
				t.Errorf("apt mode = %s, want %s", args[4], tt.mode)
			}
			var sources string
			for _, q := range queries {
				if i := strings.Index(q, `withNewFile(contents:`); i >= 0 && strings.Contains(q, `path:"`+aptConf+`/sources.list"`) {
					json.NewDecoder(strings.NewReader(q[i+len("withNewFile(contents:"):])).Decode(&sources)
				}
			}
			if sources != tt.sources {
				t.Errorf("sources file = %q, want %q", sources, tt.sources)
			}
			if got, want := strings.Join(args[5:], " "), strings.Join(tt.wantArgs, " "); got != want {
				t.Errorf("apt packages = %s, want %s", got, want)
			}
			for _, w := range tt.wantScript {
				if !strings.Contains(args[2], w) {
					t.Errorf("the apt script lacks %q:\n%s", w, args[2])
				}
			}
			for _, w := range tt.notScript {
				if strings.Contains(args[2], w) {
					t.Errorf("the apt script has %q:\n%s", w, args[2])
				}
			}
		})
	}
}

func TestProvenanceNamesTheDevelImageUsed(t *testing.T) {
	layoutDir, archive, digest := standInDevel(t)
	s := series(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	planned := &artifacts.ImageRef{Ref: p.Images.Devel.Ref, Digest: p.Images.Devel.Digest}
	tests := []struct {
		name        string
		base        string
		want        artifacts.Image
		aptVersions bool // the apt step requires the pinned versions
	}{
		{"the plan's image", "", artifacts.Image{Role: "devel", Ref: p.Images.Devel.Ref, Digest: p.Images.Devel.Digest}, true},
		{"an OCI archive of another image is a substitution", "oci-archive:" + archive,
			artifacts.Image{Role: "devel", Ref: "oci-archive:devel-devel.tar", Digest: digest, Substituted: true, Planned: planned}, false},
		{"an OCI layout of another image is a substitution", "oci-layout:" + layoutDir,
			artifacts.Image{Role: "devel", Ref: "oci-layout:devel-layout", Digest: digest, Substituted: true, Planned: planned}, false},
		{"a mirror of the plan's digest is the plan's image", "mirror.invalid/ubuntu:24.04",
			artifacts.Image{Role: "devel", Ref: "mirror.invalid/ubuntu:24.04@" + p.Images.Devel.Digest, Digest: p.Images.Devel.Digest, Planned: planned}, true},
		{"a mirror of another digest is a substitution", "mirror.invalid/ubuntu@" + digest,
			artifacts.Image{Role: "devel", Ref: "mirror.invalid/ubuntu@" + digest, Digest: digest, Substituted: true, Planned: planned}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			f := newFake(out)
			dir, err := newExecutor(t, f, Options{Series: s, Devel: tt.base}).Build(context.Background(), p, out)
			if err != nil {
				t.Fatal(err)
			}
			a, err := artifacts.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if a.Provenance.SchemaVersion != artifacts.ProvenanceSchemaVersion {
				t.Errorf("provenance schemaVersion = %d, want %d", a.Provenance.SchemaVersion, artifacts.ProvenanceSchemaVersion)
			}
			im := a.Provenance.Materials.Images
			if len(im) != 2 || im[1].Role != "runtime" || im[1].Substituted {
				t.Fatalf("images = %+v, want devel and the plan's runtime", im)
			}
			got, _ := json.Marshal(im[0])
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Errorf("devel image = %s, want %s", got, want)
			}
			apt := a.Provenance.Materials.Apt
			if apt == nil || apt.Snapshot != p.Apt.Snapshot || len(apt.Packages) != len(p.Apt.Packages) || apt.Packages[2].Version != p.Apt.Packages[2].Version {
				t.Fatalf("provenance apt = %+v, want the plan's pins %+v", apt, p.Apt)
			}
			if apt.Unverified != tt.want.Substituted {
				t.Errorf("apt unverified = %v, want %v (the devel image substituted: %v)", apt.Unverified, tt.want.Substituted, tt.want.Substituted)
			}
			args := aptExec(t, f.recorded())
			if exact := args[4] == aptInstall && strings.Contains(args[5], "="); exact != tt.aptVersions {
				t.Errorf("the apt step checks pinned versions: %v, want %v", exact, tt.aptVersions)
			}
		})
	}
}

func TestPlainSourceIsUnverifiedInProvenance(t *testing.T) {
	s := series(t)
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), s)
	want, err := pipeline.TreeHash(fixture.Source())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		source string
		want   artifacts.Source
	}{
		{"the plan's commit fetched by the engine", "", artifacts.Source{URL: p.Source.URL, Commit: p.Source.Commit}},
		{"a plain directory", fixture.Source(), artifacts.Source{URL: p.Source.URL, Commit: p.Source.Commit, Unverified: true, Tree: want}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			dir, err := newExecutor(t, newFake(out), Options{Series: s, Source: tt.source}).Build(context.Background(), p, out)
			if err != nil {
				t.Fatal(err)
			}
			a, err := artifacts.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Provenance.Materials.Source; got != tt.want {
				t.Errorf("provenance source = %+v, want %+v", got, tt.want)
			}
		})
	}
}
