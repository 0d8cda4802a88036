package build

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

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
