package build

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/pipeline"
)

func TestRunChecksTheRuntimeBaseBeforeStartingAnExecutor(t *testing.T) {
	plan := &pipeline.Plan{Target: "t", Images: pipeline.ImagePair{Runtime: pipeline.Image{Ref: "ubuntu:24.04"}}}
	var out bytes.Buffer
	started := false
	err := Run(context.Background(), []*pipeline.Plan{plan}, func() (pipeline.Executor, error) {
		started = true
		return nil, errors.New("no executor here")
	}, Options{ImageOut: "img.tar"}, &out)
	if err == nil || !strings.Contains(err.Error(), "target t: runtime base image, checked before building") || started || out.Len() > 0 {
		t.Errorf("Run() = %v, started %v, wrote %q; want the base refused before an executor starts, nothing written", err, started, out.String())
	}
}

func TestRunReturnsWhyTheExecutorDidNotStart(t *testing.T) {
	var out bytes.Buffer
	want := errors.New("no engine")
	err := Run(context.Background(), []*pipeline.Plan{{Target: "t"}}, func() (pipeline.Executor, error) { return nil, want }, Options{JSON: true}, &out)
	if !errors.Is(err, want) || out.Len() > 0 {
		t.Errorf("Run() = %v, wrote %q; want %v and nothing written", err, out.String(), want)
	}
}

func TestImaging(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want bool
	}{{Options{}, false}, {Options{ImageOut: "x.tar"}, true}, {Options{Push: []string{"r/x:1"}}, true}} {
		if got := tc.o.Imaging(); got != tc.want {
			t.Errorf("%+v.Imaging() = %v, want %v", tc.o, got, tc.want)
		}
	}
}

func TestCheckRefusesAnImageOfSeveralTargetsAndNoJobs(t *testing.T) {
	for _, tc := range []struct {
		o       Options
		targets int
		want    string
	}{
		{Options{Jobs: 1}, 3, ""},
		{Options{Jobs: 2, Push: []string{"r/x:1"}}, 1, ""},
		{Options{Jobs: 1, ImageOut: "x.tar"}, 2, "--image-out and --push take one target, got 2"},
		{Options{Jobs: 0}, 1, "--jobs must be at least 1"},
	} {
		err := tc.o.Check(tc.targets)
		if tc.want == "" && err != nil || tc.want != "" && (!inputerr.Is(err) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v.Check(%d) = %v, want %q", tc.o, tc.targets, err, tc.want)
		}
	}
}
