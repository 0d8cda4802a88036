package publish

import (
	"strings"
	"testing"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// builtinPlan resolves a built-in target with the built-in server recipe, as publish does.
func builtinPlan(t testing.TB, name string, edit func(*targets.Target)) *pipeline.Plan {
	t.Helper()
	tg, err := targets.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(tg)
	}
	return resolve(t, tg)
}

func resolve(t testing.TB, tg *targets.Target) *pipeline.Plan {
	t.Helper()
	r, err := recipes.Load("server")
	if err != nil {
		t.Fatal(err)
	}
	series, err := patches.Series()
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Resolve(tg, r, series, nil, pipeline.Options{AllowFloating: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultTagsNameWhatIsInside(t *testing.T) {
	tmpl, err := ParseTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string
		flavor string
	}{
		{"olares-one", "olares-one-cuda13.1-sm120"},
		{"rtx3090", "rtx3090-cuda"},
		{"h200", "h200-cuda13.0-sm90"},
		{"cpu-v3", "cpu-v3-cpu"},
		{"b70", "b70-sycl-bmg-g31"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			p := builtinPlan(t, tt.target, nil)
			tags, err := tmpl.Render(DataOf(p, "dev"))
			if err != nil {
				t.Fatalf("Render() error = %v", err)
			}
			wantID := tt.target + "-" + p.Source.Commit[:ShortCommitLen] + "-" + p.ShortHash()
			if len(tags) != 3 || tags[0] != wantID || !strings.HasPrefix(tags[1], tt.flavor) || tags[2] != tt.target {
				t.Errorf("Render() = %q, want [%s %s... %s]", tags, wantID, tt.flavor, tt.target)
			}
			for _, tag := range tags {
				if err := ValidTag(tag); err != nil {
					t.Errorf("ValidTag(%q) = %v", tag, err)
				}
			}
		})
	}
}

func TestValidTagFollowsTheOCIGrammar(t *testing.T) {
	tests := []struct {
		tag  string
		ok   bool
		want string
	}{
		{"olares-one-1425386fd-0123456789ab", true, ""},
		{"_x", true, ""},
		{"A.b_c-d", true, ""},
		{strings.Repeat("a", 128), true, ""},
		{"", false, "empty"},
		{strings.Repeat("a", 129), false, "129 characters"},
		{".hidden", false, `starts with "."`},
		{"-dash", false, `starts with "-"`},
		{"cuda13.1+sm120", false, `holds '+'`},
		{"with space", false, `holds ' '`},
		{"olares/one", false, `holds '/'`},
		{"é", false, `holds 'é'`},
	}
	for _, tt := range tests {
		err := ValidTag(tt.tag)
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ValidTag(%q) = %v, want ok=%v containing %q", tt.tag, err, tt.ok, tt.want)
		}
	}
}

func TestTemplatesRefuseBadTagsBeforeAnythingHappens(t *testing.T) {
	olares := builtinPlan(t, "olares-one", nil)
	cpu := builtinPlan(t, "cpu-v3", nil)
	tests := []struct {
		name      string
		templates []string
		plans     []*pipeline.Plan
		want      string
	}{
		{"a character tags cannot hold", []string{"{{.Target}}-{{.ShortHash}}", "{{.Target}}+{{.Flavor}}"}, []*pipeline.Plan{olares}, `holds '+'`},
		{"an empty tag", []string{"{{.ShortHash}}", "{{.SYCLDevice}}"}, []*pipeline.Plan{olares}, "empty"},
		{"a tag too long", []string{"{{.Target}}-{{.PlanHash}}-{{.PlanHash}}-{{.Commit}}"}, []*pipeline.Plan{olares}, "more than the 128"},
		{"a field that does not exist", []string{"{{.Target}}-{{.ShortHash}}-{{.Driver}}"}, []*pipeline.Plan{olares}, "can't evaluate field Driver"},
		{"a template that does not parse", []string{"{{.Target"}, []*pipeline.Plan{olares}, "tag template 1"},
		{"an identity tag without the plan hash", []string{"{{.Target}}-{{.ShortCommit}}"}, []*pipeline.Plan{olares}, "does not use the plan hash"},
		{"two templates giving one tag", []string{"{{.Target}}-{{.ShortHash}}", "{{.Target}}", "{{.Target}}"}, []*pipeline.Plan{olares}, "tag templates 2 and 3 both give"},
		{"two targets sharing a tag", []string{"{{.Target}}-{{.ShortHash}}", "latest"}, []*pipeline.Plan{olares, cpu}, "would both be tagged \"latest\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTemplates(tt.templates)
			if err == nil {
				_, err = tmpl.RenderAll(tt.plans, "dev")
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("templates %q: error = %v, want one containing %q", tt.templates, err, tt.want)
			}
		})
	}
}

func TestTemplatesSeeEveryDocumentedField(t *testing.T) {
	p := builtinPlan(t, "olares-one", nil)
	tmpl, err := ParseTemplates([]string{"{{.ShortHash}}", "{{.Recipe}}.{{.Backend}}.{{.CUDA}}.{{.CUDAToolkit}}.{{.SM}}.{{.Version}}", "c{{slice .Commit 0 7}}"})
	if err != nil {
		t.Fatal(err)
	}
	tags, err := tmpl.Render(DataOf(p, "v1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{p.ShortHash(), "server.cuda.13.1.13.1.1.120.v1.2.3", "c" + p.Source.Commit[:7]}
	if strings.Join(tags, " ") != strings.Join(want, " ") {
		t.Errorf("Render() = %q, want %q", tags, want)
	}
}

// FuzzTemplates: whatever a user writes as a template, rendering never panics and every tag
// it lets through is a valid OCI tag.
func FuzzTemplates(f *testing.F) {
	for _, s := range append(DefaultTemplates, "{{.Target}}+x", "{{range .Commit}}", "{{.Flavor}}{{.PlanHash}}{{.PlanHash}}", "{{printf \"%200s\" .ShortHash}}") {
		f.Add(s)
	}
	p := builtinPlan(f, "olares-one", nil)
	d := DataOf(p, "dev")
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := ParseTemplates([]string{src})
		if err != nil {
			return
		}
		tags, err := tmpl.Render(d)
		if err != nil {
			return
		}
		for _, tag := range tags {
			if len(tag) == 0 || len(tag) > 128 || strings.Trim(tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != "" || tag[0] == '.' || tag[0] == '-' {
				t.Errorf("template %q gave invalid tag %q", src, tag)
			}
		}
	})
}
