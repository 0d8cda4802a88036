package publish

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"gopkg.in/yaml.v3"

	"github.com/llbuild/llbuild/publish/publishtest"
	"github.com/llbuild/llbuild/targets"
)

const workflowPath = "../.github/workflows/publish.yml"

// lint runs actionlint (as a library) on a workflow's bytes, with shellcheck on the run:
// scripts when shellcheck is installed.
func lint(t *testing.T, name string, content []byte) ([]*actionlint.Error, string) {
	t.Helper()
	var out bytes.Buffer
	opts := &actionlint.LinterOptions{Oneline: true, ConfigFile: "", WorkingDir: t.TempDir()}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	}
	l, err := actionlint.NewLinter(&out, opts)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(name, content, nil)
	if err != nil {
		t.Fatal(err)
	}
	return errs, out.String()
}

func readWorkflow(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(workflowPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPublishWorkflowPassesActionlint(t *testing.T) {
	// Without shellcheck the run: scripts would go unchecked.
	publishtest.NeedCommand(t, "shellcheck", "shellcheck")
	errs, out := lint(t, filepath.Base(workflowPath), readWorkflow(t))
	if len(errs) != 0 {
		t.Errorf("actionlint found %d problems in %s:\n%s", len(errs), workflowPath, out)
	}
}

// The linter is live: the same workflow with mistakes gets errors, so a clean result above
// means something.
func TestActionlintCatchesMistakesInTheWorkflow(t *testing.T) {
	orig := string(readWorkflow(t))
	tests := []struct {
		name, old, new, want string
	}{
		{"an unknown permission value", "packages: write", "packages: writ", "permission"},
		{"an unknown matrix key", "name: provenance-${{ matrix.target }}", "name: provenance-${{ matrix.targets }}", `property "targets" is not defined`},
		{"an invalid cron", `"17 4 * * 1"`, `"17 4 * * 8"`, "cron"},
		{"a malformed action pin", "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02", "actions/upload-artifact", "ref"},
	}
	if _, err := exec.LookPath("shellcheck"); err == nil {
		tests = append(tests, struct{ name, old, new, want string }{"an unquoted variable (shellcheck)", `mkdir -p "$HOME/.local/bin"`, `mkdir -p $HOME/.local/bin`, "shellcheck"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(orig, tt.old) {
				t.Fatalf("the workflow no longer contains %q: update this test", tt.old)
			}
			errs, out := lint(t, "broken.yml", []byte(strings.Replace(orig, tt.old, tt.new, 1)))
			if len(errs) == 0 || !strings.Contains(strings.ToLower(out), tt.want) {
				t.Errorf("actionlint on the workflow with %s: %d errors, want one mentioning %q:\n%s", tt.name, len(errs), tt.want, out)
			}
		})
	}
}

// What the workflow must do, beyond being valid: when it runs, who it runs as, what it
// publishes and with which pinned actions.
func TestPublishWorkflowShape(t *testing.T) {
	var wf struct {
		On struct {
			Push     struct{ Tags []string }
			Schedule []struct{ Cron string }
		}
		Permissions map[string]string
		Jobs        map[string]struct {
			Permissions map[string]string
			Strategy    struct {
				Matrix struct{ Target []string }
			}
			Steps []struct {
				Uses string
				Run  string
				With map[string]string
				Env  map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(readWorkflow(t), &wf); err != nil {
		t.Fatal(err)
	}
	if strings.Join(wf.On.Push.Tags, ",") != "v*" || len(wf.On.Schedule) == 0 {
		t.Errorf("triggers: tags %q, schedule %v; want v* tag pushes and a schedule", wf.On.Push.Tags, wf.On.Schedule)
	}
	if len(wf.Permissions) != 1 || wf.Permissions["contents"] != "read" {
		t.Errorf("workflow permissions = %v, want contents: read only", wf.Permissions)
	}
	job, ok := wf.Jobs["publish"]
	if !ok {
		t.Fatal("no publish job")
	}
	if job.Permissions["packages"] != "write" || job.Permissions["contents"] != "read" || len(job.Permissions) != 2 {
		t.Errorf("job permissions = %v, want packages: write, contents: read", job.Permissions)
	}
	for _, n := range job.Strategy.Matrix.Target {
		tg, err := targets.Load(n)
		if err != nil {
			t.Errorf("matrix target %s: %v", n, err)
			continue
		}
		if !pinned(tg.Build.Images.Devel) || !pinned(tg.Build.Images.Runtime) {
			t.Errorf("matrix target %s has unpinned base images: it would need --allow-floating", n)
		}
	}
	if got := strings.Join(job.Strategy.Matrix.Target, ","); got != "olares-one,rtx3090,h200,cpu-v3" {
		t.Errorf("matrix = %s, want olares-one,rtx3090,h200,cpu-v3", got)
	}
	sha := regexp.MustCompile(`^[a-z0-9-]+/[a-z0-9-]+@[0-9a-f]{40}$`)
	var publish, upload bool
	for _, s := range job.Steps {
		if s.Uses != "" && !sha.MatchString(s.Uses) {
			t.Errorf("action %s is not pinned by commit", s.Uses)
		}
		if strings.Contains(s.Run, " publish ") {
			publish = strings.Contains(s.Run, "--executor dagger") && strings.Contains(s.Run, "--digest-file") &&
				s.Env[EnvUser] != "" && strings.Contains(s.Env[EnvPassword], "secrets.GITHUB_TOKEN")
		}
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			upload = strings.Contains(s.With["path"], "provenance.json")
		}
	}
	if !publish {
		t.Error("no step runs llbuild publish with the dagger executor, a digest file and the workflow token in " + EnvUser + "/" + EnvPassword)
	}
	if !upload {
		t.Error("no step uploads provenance.json")
	}
}

func pinned(ref string) bool { return strings.Contains(ref, "@sha256:") }
