package daggerexec

// What a user reads when the engine cannot fetch an input, and which steps report times
// (issue 31).

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/testwriter"
	"github.com/llbuild/llbuild/pipeline/internal/fixture"
)

func TestFetchErrorsSayWhatToDo(t *testing.T) {
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), series(t))
	source := errors.New(`Get "` + p.Source.URL + `/info/refs?service=git-upload-pack": dial tcp: lookup github.com: no such host`)
	image := errors.New(`failed to resolve image "docker.io/library/` + p.Images.Devel.Repository + `@` + p.Images.Devel.Digest + `": dial tcp: lookup registry-1.docker.io: no such host`)
	for _, tt := range []struct {
		name string
		opts Options
		err  error
		want []string
	}{
		{"the source from upstream", Options{}, source, []string{"fetching the source " + p.Source.URL + " at " + p.Source.Commit, "--source DIR", "no such host"}},
		{"the devel image from its registry", Options{}, image, []string{"pulling the devel image " + p.Images.Devel.Ref, "--base devel=oci-archive:FILE", "skopeo copy docker://" + p.Images.Devel.Ref}},
		{"a local source is not blamed", Options{Source: "/src"}, source, []string{"engine: Get"}},
		{"a given devel image is not blamed", Options{Devel: "oci-archive:x.tar"}, image, []string{"engine: failed to resolve"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := (&state{plan: p, opts: tt.opts}).engineError(tt.err).Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("engineError = %q, want it to say %q", got, w)
				}
			}
		})
	}
}

// The steps that only define the container report no times at the default level: the engine
// runs them at the export, whose time is the build's.
func TestLazyStepsAreNotTimedAtInfo(t *testing.T) {
	var logs bytes.Buffer
	out := t.TempDir()
	ex := newExecutor(t, newFake(out), Options{Series: series(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p := fixture.Plan(t, "cpu-v3", fixture.Recipe(t, strings.Repeat("a", 40)), series(t))
	if _, err := ex.Build(context.Background(), p, out); err != nil {
		t.Fatal(err)
	}
	for _, lazy := range []string{"name=configure", "name=build ", "name=patches", `name="devel image"`} {
		if strings.Contains(logs.String(), lazy) {
			t.Errorf("the log at info times the lazy step %s:\n%s", lazy, logs.String())
		}
	}
	if !strings.Contains(logs.String(), `msg="step done" target=cpu-v3 plan=`+p.ShortHash()+` name=export`) {
		t.Errorf("the log does not time the export:\n%s", logs.String())
	}
}

// A build through the engine logs ninja's progress, read from the engine's log, with the
// elapsed time (issue 31).
func TestEngineBuildLogsNinjaProgress(t *testing.T) {
	series := fixture.Patches(t, "0001-server-greeting.patch")
	opts, _ := engineOptions(t, series)
	opts.Source = sourceCopy(t, nil) // past the engine's cache: ninja runs
	var logs testwriter.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	opts.ProgressEvery = 10 * time.Millisecond
	p := fixture.PlanFor(t, standInTarget(t, enginetest.RuntimeImage(t)), fixture.Recipe(t, ""), series)
	if _, err := newEngineExecutor(t, opts).Build(context.Background(), p, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg=building target=`+p.Target+` plan=`+p.ShortHash()+` step=(\d+)/(\d+) elapsed=`).FindAllStringSubmatch(logs.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no progress lines:\n%s", logs.String())
	}
	if last := m[len(m)-1]; last[1] != last[2] {
		t.Errorf("the last progress line says step %s of %s, want the last", last[1], last[2])
	}
}
