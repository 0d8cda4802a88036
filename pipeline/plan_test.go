package pipeline

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

var update = flag.Bool("update", false, "rewrite golden files")

func resolve(t *testing.T, target, recipe string, opts Options) (*Plan, error) {
	t.Helper()
	tg, err := targets.Load(target)
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipes.Load(recipe)
	if err != nil {
		t.Fatal(err)
	}
	var vendor *recipes.Recipe
	if r.Source.Vendor != "" {
		vendor, _ = recipes.Load(r.Source.Vendor)
	}
	series, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	return Resolve(tg, r, series, vendor, opts)
}

func TestPlanGolden(t *testing.T) {
	for _, target := range targets.Names() {
		for _, recipe := range recipes.Names() {
			t.Run(target+"-"+recipe, func(t *testing.T) {
				p, err := resolve(t, target, recipe, Options{AllowFloating: target == "b70"})
				if err != nil {
					t.Fatal(err)
				}
				again, _ := resolve(t, target, recipe, Options{AllowFloating: target == "b70"})
				if string(p.JSON()) != string(again.JSON()) {
					t.Fatal("two resolutions of the same inputs differ")
				}
				golden := filepath.Join("testdata", "plan-"+target+"-"+recipe+".golden.json")
				if *update {
					if err := os.WriteFile(golden, p.JSON(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./pipeline -update)", err)
				}
				if string(want) != string(p.JSON()) {
					t.Errorf("plan for %s/%s differs from %s; if intended, run go test ./pipeline -update and review the diff", target, recipe, golden)
				}
				// the text `llbuild plan` prints
				var text strings.Builder
				if err := p.WriteText(&text); err != nil {
					t.Fatal(err)
				}
				goldenText := strings.TrimSuffix(golden, ".json") + ".txt"
				if *update {
					if err := os.WriteFile(goldenText, []byte(text.String()), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if want, err := os.ReadFile(goldenText); err != nil || string(want) != text.String() {
					t.Errorf("plan text for %s/%s differs from %s (%v); if intended, run go test ./pipeline -update and review the diff", target, recipe, goldenText, err)
				}
			})
		}
	}
}

// TestCUDAPlanKeepsTheWorkDirectoryOutOfCcachesKey: every path-carrying option of a CUDA plan's
// CMAKE_CUDA_FLAGS is one that CCACHE_IGNOREOPTIONS leaves out of ccache's hash (ccache knows
// -ffile-prefix-map= of a C/C++ compile, not nvcc's -Xcompiler= form of it), so that a build in
// another work directory takes its CUDA objects from the cache (scripts/ccache-nvcc.sh measures
// it with nvcc). A pattern ending in * matches a prefix, as in ccache.
func TestCUDAPlanKeepsTheWorkDirectoryOutOfCcachesKey(t *testing.T) {
	for _, target := range []string{"h200", "olares-one", "rtx3090"} {
		p, err := resolve(t, target, "server", Options{})
		if err != nil {
			t.Fatal(err)
		}
		ignored := strings.Fields(p.Env["CCACHE_IGNOREOPTIONS"])
		matches := func(opt string) bool {
			for _, pat := range ignored {
				if prefix, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(opt, prefix) || pat == opt {
					return true
				}
			}
			return false
		}
		n := 0
		for _, a := range p.Configure {
			flags, ok := strings.CutPrefix(a, "-DCMAKE_CUDA_FLAGS=")
			if !ok {
				continue
			}
			for _, opt := range strings.Fields(flags) {
				if strings.Contains(opt, SourceDirToken) {
					n++
					if !matches(opt) {
						t.Errorf("%s: CUDA flag %q names the work directory and is hashed by ccache (CCACHE_IGNOREOPTIONS=%q)", target, opt, p.Env["CCACHE_IGNOREOPTIONS"])
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no CUDA flag names the source directory: the check checks nothing (configure %v)", target, p.Configure)
		}
	}
}

func TestOlaresOnePlan(t *testing.T) {
	p, err := resolve(t, "olares-one", "server", Options{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(p.Configure, " ")
	for _, want := range []string{
		"-DCMAKE_CUDA_ARCHITECTURES=120 ", "-DGGML_AVX512=OFF", "-DGGML_AVX2=ON", "-DGGML_NATIVE=OFF",
		"-DCMAKE_EXE_LINKER_FLAGS=-L@CUDA_STUBS@", "-DCMAKE_SHARED_LINKER_FLAGS=-L@CUDA_STUBS@",
		"-DLLAMA_BUILD_UI=OFF", "-DBUILD_SHARED_LIBS=ON",
	} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("configure args lack %q:\n%s", want, args)
		}
	}
	if p.CUDA.BuiltAs[0] != "120a" {
		t.Errorf("BuiltAs = %v, want [120a]", p.CUDA.BuiltAs)
	}
	for _, im := range []Image{p.Images.Devel, p.Images.Runtime} {
		if !strings.HasPrefix(im.Digest, "sha256:") {
			t.Errorf("image %s not pinned", im.Ref)
		}
	}
	if len(p.Patches) == 0 || len(p.Patches[0].SHA256) != 64 {
		t.Errorf("patches = %+v", p.Patches)
	}
	req := p.Runtime.Env["NVIDIA_REQUIRE_CUDA"]
	if req != "cuda>=13.1" || p.Runtime.Labels["io.llbuild.cuda.require"] != req {
		t.Errorf("NVIDIA_REQUIRE_CUDA = %q, want cuda>=13.1 (driver 590.44.01 runs 13.1)", req)
	}
	if !p.Reproducible || len(p.Hash) != 64 {
		t.Errorf("reproducible=%v hash=%q", p.Reproducible, p.Hash)
	}
	var m map[string]any
	if err := json.Unmarshal(p.JSON(), &m); err != nil {
		t.Fatal(err)
	}
}

func TestFloatingImages(t *testing.T) {
	_, err := resolve(t, "b70", "server", Options{})
	if err == nil || !strings.Contains(err.Error(), "tag without a digest") || !strings.Contains(err.Error(), "--allow-floating") {
		t.Fatalf("b70 without --allow-floating: err = %v", err)
	}
	p, err := resolve(t, "b70", "server", Options{AllowFloating: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Reproducible || len(p.Warnings) == 0 {
		t.Errorf("floating plan: reproducible=%v warnings=%v, want false and a warning", p.Reproducible, p.Warnings)
	}
}

func TestResolveRejects(t *testing.T) {
	tg, _ := targets.Load("cpu-v3")
	base, _ := recipes.Load("server")
	series, _ := patches.Series()
	t.Run("GGML_NATIVE=ON with GGML_BACKEND_DL", func(t *testing.T) {
		r := *base
		r.CMake = []string{"-DGGML_NATIVE=ON", "-DGGML_BACKEND_DL=ON"}
		_, err := Resolve(tg, &r, series, nil, Options{})
		if err == nil || !strings.Contains(err.Error(), "GGML_NATIVE=ON with GGML_BACKEND_DL=ON") {
			t.Errorf("Resolve() = %v", err)
		}
	})
	t.Run("driver below the image's requirement", func(t *testing.T) {
		cuda, _ := targets.Load("rtx3090")
		c := *cuda
		c.Host.Driver = targets.Driver{Version: "580.1", CUDA: "13.0"}
		_, err := Resolve(&c, base, series, nil, Options{})
		if err == nil || !strings.Contains(err.Error(), "cuda>=13.1") {
			t.Errorf("Resolve() = %v", err)
		}
	})
	t.Run("CUDA settings edited after loading", func(t *testing.T) {
		cuda, _ := targets.Load("rtx3090")
		c := *cuda
		edited := *cuda.Build.CUDA
		edited.Toolkit = "13.3.0"
		c.Build.CUDA = &edited
		_, err := Resolve(&c, base, series, nil, Options{})
		if !errors.Is(err, targets.ErrNotDecoded) {
			t.Errorf("Resolve() = %v, want targets.ErrNotDecoded", err)
		}
	})
}

func TestRecipeRejectsShortCommit(t *testing.T) {
	_, err := recipes.Parse("bad.yaml", []byte("schemaVersion: 1\nname: x\nsource: {url: https://x, commit: 1425386fd, epoch: 1}\ncmake: []\nbuildTargets: [a]\noutputs: [{glob: a, kind: executable}]\n"))
	if err == nil || !strings.Contains(err.Error(), "short commit id") || !strings.Contains(err.Error(), "bad.yaml: source.commit") {
		t.Errorf("Parse() = %v, want short-commit error naming file and field", err)
	}
	_, err = recipes.Parse("bad.yaml", []byte("schemaVersion: 1\nname: x\nsource: {url: https://x, commit: zz25386fd996511e1f3295e7366c38289a92a271, epoch: 1}\ncmake: []\nbuildTargets: [a]\noutputs: [{glob: a, kind: executable}]\n"))
	if err == nil || !strings.Contains(err.Error(), "not a 40-hex") {
		t.Errorf("Parse() = %v, want non-hex error", err)
	}
}

func TestPatchDigestMismatch(t *testing.T) {
	fsys := fstest.MapFS{
		"series":        {Data: []byte("a.patch sha256:" + strings.Repeat("0", 64) + "\n")},
		"a.patch":       {Data: []byte("diff\n")},
		"other/b.patch": {Data: []byte("x")},
	}
	_, err := patches.Load(fsys, "series")
	if err == nil || !strings.Contains(err.Error(), "a.patch has sha256") || !strings.Contains(err.Error(), "series:1") {
		t.Errorf("Load() = %v, want digest mismatch naming file and line", err)
	}
}

func TestParseImage(t *testing.T) {
	im, err := ParseImage("localhost:5000/nvidia/cuda:13.1.1-devel@sha256:" + strings.Repeat("a", 64))
	if err != nil || im.Repository != "localhost:5000/nvidia/cuda" || im.Tag != "13.1.1-devel" {
		t.Errorf("ParseImage() = %+v, %v", im, err)
	}
	if _, err := ParseImage("ubuntu@sha256:abc"); err == nil {
		t.Error("short digest accepted")
	}
}

func TestAptPins(t *testing.T) {
	tg, _ := targets.Load("cpu-v3")
	r, _ := recipes.Load("server")
	series, _ := patches.Series()

	pinned, err := Resolve(tg, r, series, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !pinned.Reproducible || pinned.Apt.Snapshot == "" || len(pinned.Apt.Unpinned()) != 0 {
		t.Errorf("pinned plan: reproducible=%v apt=%+v, want reproducible with a snapshot and every version", pinned.Reproducible, pinned.Apt)
	}
	if got := strings.Join(pinned.Apt.InstallArgs(), " "); !strings.Contains(got, "cmake=3.28.3-1build7") || !strings.Contains(got, "git=1:2.43.0-1ubuntu7.3") {
		t.Errorf("InstallArgs() = %s, want name=version for each package", got)
	}

	noDistro := *tg
	noDistro.Build.Images.DevelDistro = ""
	extra := *r
	extra.Apt = append(append([]string(nil), r.Apt...), "libcurl4-openssl-dev")
	tests := []struct {
		name   string
		target *targets.Target
		recipe *recipes.Recipe
		want   []string // in the error, and in the warning with --allow-floating
	}{
		{"a target that names no distribution pins nothing", &noDistro, r, []string{"build.images.develDistro is not set", "not reproducible", "ubuntu-24.04"}},
		{"a package the pins lack is unpinned", tg, &extra, []string{"libcurl4-openssl-dev", "not reproducible", "recipes/apt/ubuntu-24.04.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(tt.target, tt.recipe, series, nil, Options{})
			if err == nil || !strings.Contains(err.Error(), "--allow-floating") {
				t.Fatalf("Resolve() = %v, want an error suggesting --allow-floating, as for a floating image", err)
			}
			p, err := Resolve(tt.target, tt.recipe, series, nil, Options{AllowFloating: true})
			if err != nil {
				t.Fatal(err)
			}
			if p.Reproducible {
				t.Errorf("Reproducible = true for a plan with unpinned apt packages")
			}
			warn := strings.Join(p.Warnings, "\n")
			for _, w := range tt.want {
				if !strings.Contains(warn, w) {
					t.Errorf("warnings %q lack %q", warn, w)
				}
			}
			if p.Hash == pinned.Hash {
				t.Errorf("an unpinned plan has the pinned plan's hash")
			}
		})
	}
}

func TestAptOfVersion1Plans(t *testing.T) {
	var p Plan
	if err := json.Unmarshal([]byte(`{"schemaVersion":1,"apt":["cmake","git"]}`), &p); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Apt.InstallArgs(), " "); got != "cmake git" {
		t.Errorf("a version 1 plan's apt list reads as %q, want cmake git, unpinned", got)
	}
}

func TestParseSourceDateEpoch(t *testing.T) {
	for s, ok := range map[string]bool{"0": true, "1786972453": true, "8589934592": true, "8589934593": false, "-1": false, "+5": false, "05": false, "1e9": false, "": false, " 5": false} {
		got, err := ParseSourceDateEpoch(s)
		if (err == nil) != ok {
			t.Errorf("ParseSourceDateEpoch(%q) = %v, %v; want ok %v", s, got, err, ok)
		}
		if ok && got.Unix() != mustInt(s) {
			t.Errorf("ParseSourceDateEpoch(%q) = %v", s, got)
		}
	}
}

func mustInt(s string) int64 {
	var n int64
	for _, c := range s {
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestPlanNamesItsSeries: the plan says which series its patches are, in JSON and text; the
// name follows from the patches, so it leaves the hash as it is.
func TestPlanNamesItsSeries(t *testing.T) {
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	all, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := patches.Named(patches.SeriesPlain)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		want   string
		series []patches.Patch
	}{
		{"scoring", all},
		{"plain", plain},
		{"none", nil},
		{"custom", all[:2:2]},
	} {
		t.Run(tt.want, func(t *testing.T) {
			p, err := Resolve(tg, r, tt.series, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var j struct {
				Series string `json:"series"`
			}
			if err := json.Unmarshal(p.JSON(), &j); err != nil || j.Series != tt.want {
				t.Errorf("plan JSON series = %q (%v), want %q", j.Series, err, tt.want)
			}
			var text strings.Builder
			if err := p.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{"series:        " + tt.want + "\n", "label:         io.llbuild.series=" + tt.want + "\n"} {
				if !strings.Contains(text.String(), line) {
					t.Errorf("plan text lacks %q", line)
				}
			}
			renamed := *p
			renamed.Series = "other"
			if h, err := renamed.computeHash(); err != nil || h != p.Hash {
				t.Errorf("hash with another series name = %s (%v), want %s", h, err, p.Hash)
			}
		})
	}
}
