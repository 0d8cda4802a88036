package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
	"github.com/llbuild/llbuild/pipeline"
	"github.com/llbuild/llbuild/publish"
	"github.com/llbuild/llbuild/publish/publishtest"
	"github.com/llbuild/llbuild/targets"
)

// nvidia-container-cli's refusal of an image whose NVIDIA_REQUIRE_CUDA the driver does not
// meet (build-facts.md).
const cuda133Refusal = "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.3, please update your driver to a newer version, or use an earlier cuda container"

// publishFixture writes target files whose runtime base is a small generated image, and the
// artifacts of their plans under out, so publish assembles and pushes without building.
type publishFixture struct {
	dir, out, base string
	files          []string
	plans          []*pipeline.Plan
}

func newPublishFixture(t *testing.T) *publishFixture {
	t.Helper()
	base := imagetest.BaseImage(t)
	fx := &publishFixture{dir: t.TempDir(), out: t.TempDir(), base: "oci-layout:" + imagetest.WriteLayout(t, base)}
	for _, tg := range []*targets.Target{
		publishtest.Target(t, "olares-one", base, nil),
		// The image upstream moved to: CUDA 13.3, for a driver of branch R610.
		publishtest.Target(t, "olares-one", base, func(tg *targets.Target) {
			tg.Name = "olares-one-cuda133"
			tg.Build.CUDA.Toolkit = "13.3.0"
			tg.Host.Driver.Version, tg.Host.Driver.CUDA = "610.43.02", "13.3"
		}),
		publishtest.Target(t, "cpu-v3", base, nil),
	} {
		f := publishtest.TargetFile(t, fx.dir, tg)
		p, err := resolvePlan("", f, "server", false)
		if err != nil {
			t.Fatal(err)
		}
		publishtest.ServerArtifacts(t, fx.out, p)
		fx.files = append(fx.files, f)
		fx.plans = append(fx.plans, p)
	}
	return fx
}

func (fx *publishFixture) args(registry string, extra ...string) []string {
	a := []string{"publish", "--registry", registry, "--out", fx.out, "--base", "runtime=" + fx.base}
	for _, f := range fx.files {
		a = append(a, "--target-file", f)
	}
	return append(a, extra...)
}

func TestPublishPushesTaggedImagesThatPreflightJudges(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Memory(t, nil)
	fx := newPublishFixture(t)
	repo := reg.Host + "/llbuild/llama-server"
	digests := filepath.Join(t.TempDir(), "digests.tsv")

	code, stdout, stderr := runCLI(t, fx.args(repo, "--digest-file", digests)...)
	if code != exitOK {
		t.Fatalf("publish: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(fx.plans) {
		t.Fatalf("stdout = %q, want %d digests", stdout, len(fx.plans))
	}
	var wantFile strings.Builder
	for i, p := range fx.plans {
		if !strings.HasPrefix(lines[i], "sha256:") || len(lines[i]) != 71 {
			t.Errorf("stdout line %d = %q, want a digest", i, lines[i])
		}
		tags := []string{p.Target + "-" + p.Source.Commit[:9] + "-" + p.ShortHash(), p.Target}
		if p.CUDA != nil {
			tags = append(tags, p.Target+"-cuda"+p.CUDA.Toolkit[:4]+"-sm120")
		} else {
			tags = append(tags, p.Target+"-cpu")
		}
		for _, tag := range tags {
			d, err := remote.Head(mustTag(t, repo+":"+tag))
			if err != nil || d.Digest.String() != lines[i] {
				t.Errorf("%s:%s = %v (%v), want %s", repo, tag, d, err, lines[i])
			}
		}
		wantFile.WriteString(p.Target + "\t" + repo + "@" + lines[i] + "\n")
	}
	if b, err := os.ReadFile(digests); err != nil || string(b) != wantFile.String() {
		t.Errorf("digest file = %q (%v), want %q", b, err, wantFile.String())
	}

	// preflight reads the pushed images back and judges them against the Olares One host
	// (driver 590.44.01, CUDA 13.1, compute capability 12.0).
	verdicts := []struct {
		image, target string
		code          int
		want          string
	}{
		{"olares-one", "olares-one", 0, "driver 590.44.01 (CUDA 13.1) meets cuda>=13.1"},
		{"olares-one", "olares-one", 0, "sm_120a cubin runs on compute capability 12.0"},
		{"olares-one-cuda133", "olares-one", 1, cuda133Refusal},
		{"olares-one-cuda133", "olares-one-cuda133-host", 0, "meets cuda>=13.3"},
		{"cpu-v3", "cpu-v3", 0, "ok"},
	}
	hostFile := publishtest.TargetFile(t, t.TempDir(), func() *targets.Target {
		tg := publishtest.Target(t, "olares-one", imagetest.BaseImage(t), nil)
		tg.Name, tg.Host.Driver.Version, tg.Host.Driver.CUDA, tg.Build.CUDA.Toolkit = "olares-one-cuda133-host", "610.43.02", "13.3", "13.3.0"
		return tg
	}())
	for _, v := range verdicts {
		hostArgs := []string{"--target", v.target}
		if v.target == "olares-one-cuda133-host" {
			hostArgs = []string{"--target-file", hostFile}
		}
		code, out, errOut := runCLI(t, append([]string{"preflight", "--image", repo + ":" + v.image}, hostArgs...)...)
		if code != v.code || !strings.Contains(out, v.want) {
			t.Errorf("preflight --image %s %v: exit %d, want %d with %q\n%s%s", v.image, hostArgs, code, v.code, v.want, out, errOut)
		}
	}

	// Again: the registry already holds every plan-hash tag.
	reg.Counter.Reset()
	code, again, stderr := runCLI(t, fx.args(repo)...)
	if code != exitOK || again != stdout {
		t.Errorf("second publish: exit %d stdout %q, want exit 0 and %q\n%s", code, again, stdout, stderr)
	}
	if w := reg.Counter.WriteRequests(); len(w) != 0 {
		t.Errorf("the second publish wrote %v, want nothing", w)
	}
	if !strings.Contains(stderr, "already published") {
		t.Errorf("stderr does not say the targets were already published:\n%s", stderr)
	}
	// --json: one object per target, the same digests, each marked existing
	code, js, stderr := runCLI(t, append(fx.args(repo), "--json")...)
	var rows []struct {
		Target, Digest, Ref string
		Existing            bool
		Tags                []string
	}
	if err := json.Unmarshal([]byte(js), &rows); code != exitOK || err != nil {
		t.Fatalf("publish --json: exit %d, %v\n%s%s", code, err, js, stderr)
	}
	printed := strings.Fields(stdout)
	if len(rows) != len(printed) {
		t.Fatalf("publish --json: %d rows, want %d", len(rows), len(printed))
	}
	for i, r := range rows {
		if r.Digest != printed[i] || !r.Existing || r.Ref != repo+"@"+r.Digest || len(r.Tags) == 0 {
			t.Errorf("publish --json row %d = %+v, want digest %s, existing, ref and tags", i, r, printed[i])
		}
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func TestPublishRefusesBadUsageBeforeBuilding(t *testing.T) {
	reg := publishtest.Memory(t, nil)
	fx := newPublishFixture(t)
	repo := reg.Host + "/llbuild/llama-server"
	kept := filepath.Join(t.TempDir(), "digests.tsv")
	os.WriteFile(kept, []byte("keep"), 0o644)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no registry", []string{"publish", "-t", "cpu-v3"}, nil, "no registry given"},
		{"no target", []string{"publish", "--registry", repo}, nil, "no target given"},
		{"a template giving an invalid tag", fx.args(repo, "--tag-template", "{{.Target}}-{{.ShortHash}}", "--tag-template", "{{.Target}}/{{.Flavor}}"), nil, `holds '/'`},
		{"an identity template without the plan hash", fx.args(repo, "--tag-template", "{{.Target}}"), nil, "does not use the plan hash"},
		{"a template that does not parse", fx.args(repo, "--tag-template", "{{.Target"), nil, "tag template 1"},
		{"credentials in the registry", []string{"publish", "-t", "cpu-v3", "--registry", "bot:hunter2@" + repo}, nil, "REDACTED@"},
		{"a user without a password", fx.args(repo), map[string]string{publish.EnvUser: "bot"}, publish.EnvPassword + " is not"},
		{"a target twice", []string{"publish", "-t", "cpu-v3,cpu-v3", "--registry", repo}, nil, "given twice"},
		{"an unknown executor", fx.args(repo, "--executor", "podman"), nil, "--executor must be dagger or host"},
		{"host without a source", fx.args(repo, "--executor", "host"), nil, "needs --source"},
		// the digest file is checked before anything is built or pushed
		{"a digest file that exists", fx.args(repo, "--digest-file", kept), nil, "exists; give --force to replace it"},
		{"a digest file under a missing directory", fx.args(repo, "--digest-file", filepath.Join(t.TempDir(), "nosuch", "d.tsv")), nil, "does not exist; make it first"},
		{"a digest file that is a directory", fx.args(repo, "--digest-file", t.TempDir(), "--force"), nil, "is a directory"},
		{"a gate directory that is a file", fx.args(repo, "--not-slower-than", "ghcr.io/x/y:1", "--gate-dir", kept), nil, "is a file; give a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, stderr := runCLI(t, tt.args...)
			if code != exitUsage || out != "" || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr with %q", code, out, stderr, tt.want)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("stderr quotes the password: %s", stderr)
			}
		})
	}
	if n := len(reg.Counter.Requests); n != 0 {
		t.Errorf("usage errors sent %d requests to the registry, want none", n)
	}
	if b, _ := os.ReadFile(kept); string(b) != "keep" {
		t.Errorf("the existing digest file now holds %q", b)
	}
}

func TestPublishNamesTheTagARegistryRefused(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Memory(t, publishtest.Refuse(http.MethodPut, "/manifests/cpu-v3-cpu", http.StatusForbidden, "DENIED", "tag is immutable"))
	fx := newPublishFixture(t)
	repo := reg.Host + "/llbuild/llama-server"
	code, out, stderr := runCLI(t, fx.args(repo)...)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	for _, want := range []string{"target cpu-v3", repo + ":cpu-v3-cpu", "DENIED", "tag is immutable"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The other targets are still published, their digests printed in input order.
	if n := len(strings.Fields(out)); n != 2 {
		t.Errorf("stdout = %q, want the two other targets' digests", out)
	}
}

func TestPublishWithEnvCredentialsAgainstDistribution(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Distribution(t, publishtest.DistributionOptions{User: "ci", Password: "pw-for-distribution"})
	fx := newPublishFixture(t)
	repo := reg.Host + "/llbuild/llama-server"

	t.Setenv(publish.EnvUser, "ci")
	t.Setenv(publish.EnvPassword, "wrong-pw-42")
	code, out, stderr := runCLI(t, fx.args(repo)...)
	if code != exitFailed || out != "" || !strings.Contains(stderr, "UNAUTHORIZED") {
		t.Errorf("wrong password: exit %d stdout %q, want exit 1 and UNAUTHORIZED\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "wrong-pw-42") {
		t.Errorf("stderr quotes the password:\n%s", stderr)
	}

	t.Setenv(publish.EnvPassword, "pw-for-distribution")
	code, out, stderr = runCLI(t, fx.args(repo)...)
	if code != exitOK || len(strings.Fields(out)) != len(fx.plans) {
		t.Fatalf("right password: exit %d stdout %q\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "pw-for-distribution") {
		t.Errorf("stderr quotes the password:\n%s", stderr)
	}
	reg.Counter.Reset()
	code, again, _ := runCLI(t, fx.args(repo)...)
	if code != exitOK || again != out || reg.Counter.Writes() != 0 {
		t.Errorf("second publish: exit %d stdout %q writes %v; want the same digests and no writes", code, again, reg.Counter.WriteRequests())
	}
}

// Without artifacts for a plan, publish builds it with the executor; a failed build pushes
// nothing and names the failure. (The built-in patch series does not apply to the fakellama
// fixture, so the host build stops at the first patch.)
func TestPublishBuildsMissingArtifactsAndPushesNothingWhenTheBuildFails(t *testing.T) {
	for _, tool := range []string{"git", "cmake", "ninja", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Memory(t, nil)
	fx := newPublishFixture(t)
	fx.out = t.TempDir() // no artifacts: everything needs building
	code, out, stderr := runCLI(t, fx.args(reg.Host+"/llbuild/llama-server", "--executor", "host",
		"--source", filepath.Join("pipeline", "testdata", "fakellama"), "--work-dir", t.TempDir())...)
	if code != exitFailed || out != "" || !strings.Contains(stderr, "does not apply") {
		t.Errorf("exit %d stdout %q, want exit 1, no digests and the patch named\n%s", code, out, stderr)
	}
	if w := reg.Counter.WriteRequests(); len(w) != 0 {
		t.Errorf("a failed build still wrote %v", w)
	}
}

// b70's oneAPI image is given by tag: publishing it needs --allow-floating, and then says
// that the plan-hash tag does not pin the base.
func TestPublishFloatingTargetNeedsAllowFloating(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Memory(t, nil)
	base := imagetest.BaseImage(t)
	file := publishtest.TargetFile(t, t.TempDir(), publishtest.Target(t, "b70", base, nil))
	out := t.TempDir()
	repo := reg.Host + "/llbuild/llama-server"
	args := []string{"publish", "--target-file", file, "--registry", repo, "--out", out, "--base", "runtime=oci-layout:" + imagetest.WriteLayout(t, base)}

	code, stdout, stderr := runCLI(t, args...)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "--allow-floating") {
		t.Errorf("without --allow-floating: exit %d stdout %q, want exit 2 naming --allow-floating\n%s", code, stdout, stderr)
	}
	p, err := resolvePlan("", file, "server", true)
	if err != nil {
		t.Fatal(err)
	}
	publishtest.ServerArtifacts(t, out, p)
	code, stdout, stderr = runCLI(t, append(args, "--allow-floating")...)
	if code != exitOK || !strings.Contains(stderr, "not reproducible") {
		t.Fatalf("with --allow-floating: exit %d, want 0 and a warning\n%s", code, stderr)
	}
	d, err := remote.Head(mustTag(t, repo+":b70-sycl-bmg-g31"))
	if err != nil || d.Digest.String() != strings.TrimSpace(stdout) {
		t.Errorf("b70-sycl-bmg-g31 = %v (%v), want %s", d, err, stdout)
	}
}

// A registry that quotes the credentials it received in its error body (publishtest's
// BasicAuth does, as a careless one might): neither the password nor its Basic header reach
// stderr.
func TestPublishRedactsCredentialsARegistryEchoes(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Memory(t, publishtest.BasicAuth("bot", "the-right-one"))
	fx := newPublishFixture(t)
	t.Setenv(publish.EnvUser, "bot")
	t.Setenv(publish.EnvPassword, "echoed-Secret-9")
	code, out, stderr := runCLI(t, fx.args(reg.Host+"/llbuild/llama-server")...)
	if code != exitFailed || out != "" {
		t.Fatalf("exit %d stdout %q, want exit 1 and nothing on stdout\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "got bot:"+publish.Redacted) {
		t.Errorf("stderr does not show the registry's echo, redacted; the test may no longer exercise redaction:\n%s", stderr)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("bot:echoed-Secret-9"))
	if strings.Contains(stderr, "echoed-Secret-9") || strings.Contains(stderr, basic) {
		t.Errorf("stderr leaks the credentials:\n%s", stderr)
	}
}

// Publishing on a terminal (runTerm with a status line over a buffer standing in for it):
// each push is drawn in place while it runs and ends with a log line of its size and time;
// every log line is a line of its own.
func TestPublishOnATerminalDrawsEachPushInPlace(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := publishtest.Memory(t, nil)
	fx := newPublishFixture(t)
	var stdout, stderr bytes.Buffer
	args := append([]string{"llbuild"}, fx.args(reg.Host+"/llbuild/llama-server")...)
	if code := runTerm(context.Background(), args, strings.NewReader(""), &stdout, &stderr, progress.NewTerm(&stderr, 200)); code != exitOK {
		t.Fatalf("publish: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "\rpushing image: ") {
		t.Errorf("no push drawn in place: %q", stderr.String())
	}
	lines := progresstest.Screen(stderr.String())
	pushed := 0
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "time=") || strings.Contains(l, "pushing image: ") {
			t.Errorf("screen line %q is not a log line of its own", l)
		}
		if strings.Contains(l, `msg="pushed image" target=`) && strings.Contains(l, " size=") && strings.Contains(l, " took=") {
			pushed++
		}
	}
	if pushed != len(fx.plans) || lines[len(lines)-1] != "" {
		t.Errorf("%d pushed-image log lines and %q left at the bottom, want %d and nothing\n%s", pushed, lines[len(lines)-1], len(fx.plans), strings.Join(lines, "\n"))
	}
}
