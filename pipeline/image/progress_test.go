package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/llbuild/llbuild/internal/imagetest"
	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
)

// gatedImage holds its last layer's bytes back after the first half until release is
// closed, so that a test sees an export halfway.
type gatedImage struct {
	v1.Image
	half             int64
	reached, release chan struct{}
}

func (g gatedImage) Layers() ([]v1.Layer, error) {
	ls, err := g.Image.Layers()
	if err != nil {
		return nil, err
	}
	ls[len(ls)-1] = gatedLayer{ls[len(ls)-1], g}
	return ls, nil
}

type gatedLayer struct {
	v1.Layer
	g gatedImage
}

func (l gatedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return &gatedReader{rc: rc, g: l.g}, nil
}

type gatedReader struct {
	rc   io.ReadCloser
	g    gatedImage
	read int64
}

func (r *gatedReader) Read(b []byte) (int, error) {
	if r.read == r.g.half {
		close(r.g.reached)
		<-r.g.release
	}
	if left := r.g.half - r.read; left > 0 && int64(len(b)) > left {
		b = b[:left]
	}
	n, err := r.rc.Read(b)
	r.read += int64(n)
	return n, err
}

func (r *gatedReader) Close() error { return r.rc.Close() }

func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Exporting an image to an OCI archive counts the bytes written as they are: halfway
// through its largest layer the status line on a terminal says so, and the export ends with
// a log line of the archive's size.
func TestWriteOCICountsTheBytesWritten(t *testing.T) {
	blob := make([]byte, 3_000_000)
	rand.Read(blob)
	img, err := mutate.AppendLayers(imagetest.BaseImage(t), static.NewLayer(blob, types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	size, err := blobsSize(img)
	if err != nil {
		t.Fatal(err)
	}
	g := gatedImage{Image: img, half: int64(len(blob) / 2), reached: make(chan struct{}), release: make(chan struct{})}

	var out bytes.Buffer
	term := progress.NewTerm(&out, 120)
	logger := slog.New(slog.NewTextHandler(term, &slog.HandlerOptions{ReplaceAttr: noTime}))
	now := time.Unix(0, 0)
	rep := progress.Reporter{Term: term, Log: logger, Tick: make(chan time.Time), Now: func() time.Time { return now }}
	archive := filepath.Join(t.TempDir(), "image.tar")
	var pr Progress
	task := rep.Start(pr.ExportState("to", "image.tar"))
	errc := make(chan error, 1)
	go func() { errc <- WriteOCI(archive, g, "llama-server:cpu-v3", Counting(&pr)) }()
	<-g.reached
	phase, done, total := pr.Load()
	// the other layers are the base's, written whole; the gated one up to its half
	if phase != PhaseLayout || total != size || done < g.half || done > size-g.half {
		t.Errorf("halfway: Load() = %q, %d, %d; want %q, between %d and %d, %d", phase, done, total, PhaseLayout, g.half, size-g.half, size)
	}
	now = now.Add(30 * time.Second)
	task.Report()
	line := progresstest.Screen(out.String())
	if len(line) != 1 || !strings.HasPrefix(line[0], "exporting image: writing the layout ") || !strings.HasSuffix(line[0], " 30s") {
		t.Errorf("halfway: screen = %q, want the export's line", line)
	}
	close(g.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	if phase, done, total := pr.Load(); phase != PhaseArchive || done != fi.Size() || total != fi.Size() {
		t.Errorf("at the end: Load() = %q, %d, %d; want %q and the archive's size %d twice", phase, done, total, PhaseArchive, fi.Size())
	}
	now = now.Add(30 * time.Second)
	task.Stop()
	want := []string{"level=INFO msg=\"exported image\" to=image.tar size=\"" + progress.Bytes(fi.Size()) + "\" took=1m0s", ""}
	if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, want) {
		t.Errorf("stopped: screen = %q, want %q", got, want)
	}
}

// Where stderr is not a terminal the export logs plain lines with its bytes.
func TestWriteOCILogsProgressWithoutATerminal(t *testing.T) {
	img := imagetest.BaseImage(t)
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}))
	now := time.Unix(0, 0)
	var pr Progress
	task := progress.Reporter{Log: logger, Tick: make(chan time.Time), Now: func() time.Time { return now }}.Start(pr.ExportState("to", "layout/"))
	task.Report() // not begun: no bytes yet
	dir := t.TempDir() + "/"
	if err := WriteOCI(dir, img, "", Counting(&pr)); err != nil {
		t.Fatal(err)
	}
	size, _ := blobsSize(img)
	now = now.Add(31 * time.Second)
	task.Stop()
	want := "level=INFO msg=\"exporting image\" to=layout/ phase=\"\" written=\"0.0 MB\" elapsed=0s\n" +
		"level=INFO msg=\"exported image\" to=layout/ size=\"" + progress.Bytes(size) + "\" took=31s\n"
	if out.String() != want {
		t.Errorf("log = %q, want %q", out.String(), want)
	}
}

// A push counts the bytes uploaded to a real registry.
func TestPushCountingCountsTheUpload(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img := imagetest.BaseImage(t)
	var pr Progress
	if err := PushCounting(context.Background(), img, []string{host + "/llbuild/base:1", host + "/llbuild/base:2"}, &pr); err != nil {
		t.Fatal(err)
	}
	size, _ := blobsSize(img)
	if phase, done, total := pr.Load(); phase != PhasePush || done == 0 || done != total || done > size {
		t.Errorf("Load() = %q, %d, %d; want %q and all of the upload done, at most the image's %d bytes", phase, done, total, PhasePush, size)
	}
	if rep, _ := pr.PushState()(time.Second); rep.Msg != "pushed image" {
		t.Errorf("the last report says %q, want pushed image", rep.Msg)
	}
}
