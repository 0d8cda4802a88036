package image

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/llbuild/llbuild/internal/progress"
)

// Progress counts an export's bytes while it runs, for another goroutine to read: WriteOCI's
// blobs as it writes them into the layout, then, for an archive, the archive's bytes; Push's
// bytes uploaded as the registry client reports them. The zero value is ready.
type Progress struct {
	phase       atomic.Pointer[string]
	done, total atomic.Int64
	finished    atomic.Bool
}

// The phases of an export.
const (
	PhaseLayout  = "writing the layout"
	PhaseArchive = "writing the archive"
	PhasePush    = "pushing"
)

// Load returns the phase running ("" before the first), its bytes done and its total (0
// where it is not known).
func (p *Progress) Load() (phase string, done, total int64) {
	if s := p.phase.Load(); s != nil {
		phase = *s
	}
	return phase, p.done.Load(), p.total.Load()
}

func (p *Progress) begin(phase string, total int64) {
	if p == nil {
		return
	}
	p.done.Store(0)
	p.total.Store(total)
	p.phase.Store(&phase)
}

// finish marks the export done, of size bytes.
func (p *Progress) finish(size int64) {
	if p == nil {
		return
	}
	p.total.Store(size)
	p.done.Store(size)
	p.finished.Store(true)
}

// ExportState describes WriteOCI's export that p counts, for a progress.Reporter: its part
// of a terminal's status line and its log lines ("exporting image" with the phase, bytes,
// time and attrs, such as where to), and once written its size and time ("exported image").
func (p *Progress) ExportState(attrs ...any) func(time.Duration) (progress.Report, bool) {
	return p.state("exporting image", "exported image", true, attrs)
}

// PushState is ExportState for PushCounting ("pushing image", "pushed image").
func (p *Progress) PushState(attrs ...any) func(time.Duration) (progress.Report, bool) {
	return p.state("pushing image", "pushed image", false, attrs)
}

func (p *Progress) state(verb, past string, phases bool, attrs []any) func(time.Duration) (progress.Report, bool) {
	with := func(more ...any) []any { return append(attrs[:len(attrs):len(attrs)], more...) }
	return func(elapsed time.Duration) (progress.Report, bool) {
		phase, done, total := p.Load()
		if p.finished.Load() {
			return progress.Report{Msg: past, Attrs: with("size", progress.Bytes(done), "took", progress.Elapsed(elapsed))}, true
		}
		written := progress.Bytes(done)
		line := verb + ": "
		if phases && phase != "" {
			line += phase + " "
		}
		line += written
		if total > 0 {
			written += " of " + progress.Bytes(total)
			line += fmt.Sprintf("/%s %3.0f%%", progress.Bytes(total), 100*float64(done)/float64(total))
		}
		rep := progress.Report{Line: line + " " + progress.Elapsed(elapsed), Msg: verb}
		if phases {
			rep.Attrs = with("phase", phase, "written", written, "elapsed", progress.Elapsed(elapsed))
		} else {
			rep.Attrs = with("sent", written, "elapsed", progress.Elapsed(elapsed))
		}
		return rep, true
	}
}

func (p *Progress) add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

// blobsSize is the bytes of img's blobs: manifest, config and layers.
func blobsSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// countedImage is an image whose layers count their bytes as they are read, that is as the
// layout writes them.
type countedImage struct {
	v1.Image
	p *Progress
}

func (c countedImage) Layers() ([]v1.Layer, error) {
	ls, err := c.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = countedLayer{l, c.p}
	}
	return out, nil
}

type countedLayer struct {
	v1.Layer
	p *Progress
}

func (c countedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := c.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return countingReader{rc, c.p}, nil
}

type countingReader struct {
	io.ReadCloser
	p *Progress
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.p.add(n)
	return n, err
}

type countingWriter struct {
	w io.Writer
	p *Progress
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.p.add(n)
	return n, err
}
