package pipeline

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
	"github.com/llbuild/llbuild/internal/progress/progresstest"
)

// The recorded logs are real llama.cpp builds (ninja's 322 steps, the middle left out):
// host-build.log what cmake --build writes, engine-build.log the Dagger engine's progress
// log of the same build, with its prefixes, colour codes and llbuild's own lines in between.
var recordedBuilds = []struct {
	file string
	// mid is the last step in the file's first part, and midLine its part of the status line.
	mid, midLine string
}{
	{"host-build.log", "[12/322]", "building cpu-v3 [12/322]   4% 30s ggml-backend-dl.cpp"},
	{"engine-build.log", "[8/322]", "building cpu-v3 [8/322]   2% 30s ggml-backend-dl.cpp"},
}

// split cuts a recorded log after the line holding mid.
func split(t *testing.T, file, mid string) (first, rest []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/ninja/" + file)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(mid))
	if i < 0 {
		t.Fatalf("%s has no %s", file, mid)
	}
	i += bytes.IndexByte(b[i:], '\n') + 1
	return b[:i], b[i:]
}

// writeChunks writes b in pieces that end mid-line, as a pipe delivers output.
func writeChunks(w io.Writer, b []byte) {
	for len(b) > 0 {
		n := min(len(b), 97)
		w.Write(b[:n])
		b = b[n:]
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// On a terminal a build is one status line, redrawn in place: ninja's step, the percentage,
// the elapsed time and what the step builds; a log line written meanwhile lands above it,
// on its own line; at the end the line goes and a last log line stays.
func TestNinjaProgressOnATerminal(t *testing.T) {
	for _, rec := range recordedBuilds {
		t.Run(rec.file, func(t *testing.T) {
			first, rest := split(t, rec.file, rec.mid)
			var out bytes.Buffer
			term := progress.NewTerm(&out, 120)
			log := slog.New(slog.NewTextHandler(term, &slog.HandlerOptions{ReplaceAttr: noTime}))
			c := &fakeClock{t: time.Unix(0, 0)}
			p := NewNinjaProgress(progress.Reporter{Term: term, Log: log, Tick: make(chan time.Time), Now: c.now}, "cpu-v3")
			p.Start()
			writeChunks(p, first)
			c.t = c.t.Add(30 * time.Second)
			p.Report()
			if got, want := progresstest.Screen(out.String()), []string{rec.midLine}; !reflect.DeepEqual(got, want) {
				t.Errorf("screen = %q, want %q", got, want)
			}
			log.Info("step", "name", "export")
			want := []string{"level=INFO msg=step name=export", rec.midLine}
			if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, want) {
				t.Errorf("after a log line: screen = %q, want %q", got, want)
			}
			writeChunks(p, rest)
			c.t = c.t.Add(7 * time.Minute)
			p.Report()
			want[1] = "building cpu-v3 [322/322] 100% 7m30s llama-server"
			if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, want) {
				t.Errorf("at the end: screen = %q, want %q", got, want)
			}
			p.Stop()
			want = []string{want[0], "level=INFO msg=building step=322/322 elapsed=7m30s", ""}
			if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, want) {
				t.Errorf("stopped: screen = %q, want %q", got, want)
			}
		})
	}
}

// Where stderr is not a terminal the same build logs plain lines, each report one line.
func TestNinjaProgressWithoutATerminal(t *testing.T) {
	for _, rec := range recordedBuilds {
		t.Run(rec.file, func(t *testing.T) {
			first, rest := split(t, rec.file, rec.mid)
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}))
			c := &fakeClock{t: time.Unix(0, 0)}
			p := NewNinjaProgress(progress.Reporter{Log: log, Tick: make(chan time.Time), Now: c.now}, "cpu-v3")
			p.Start()
			p.Report() // before ninja's first step: nothing to say
			writeChunks(p, first)
			c.t = c.t.Add(30 * time.Second)
			p.Report()
			writeChunks(p, rest)
			c.t = c.t.Add(30 * time.Second)
			p.Stop()
			mid := strings.Trim(rec.mid, "[]")
			want := "level=INFO msg=building step=" + mid + " elapsed=30s\nlevel=INFO msg=building step=322/322 elapsed=1m0s\n"
			if out.String() != want {
				t.Errorf("log = %q, want %q", out.String(), want)
			}
			if strings.Contains(out.String(), "\r") {
				t.Error("the plain log has carriage returns")
			}
		})
	}
}

// Log lines written while the build reports, from other goroutines, never share a screen
// line with the status line.
func TestNinjaProgressAndConcurrentLogLines(t *testing.T) {
	first, rest := split(t, "engine-build.log", "[8/322]")
	var out bytes.Buffer
	term := progress.NewTerm(&out, 120)
	log := slog.New(slog.NewTextHandler(term, &slog.HandlerOptions{ReplaceAttr: noTime}))
	p := NewNinjaProgress(progress.Reporter{Term: term, Log: log, Tick: make(chan time.Time)}, "cpu-v3")
	p.Start()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			log.Info("concurrent", "i", i)
		}
	}()
	for _, b := range [][]byte{first, rest} {
		for len(b) > 0 {
			n := min(len(b), 41)
			p.Write(b[:n])
			p.Report()
			b = b[n:]
		}
	}
	wg.Wait()
	p.Stop()
	lines := progresstest.Screen(out.String())
	var logged int
	for _, l := range lines[:len(lines)-1] {
		switch {
		case strings.HasPrefix(l, "level=INFO msg=concurrent i=") && !strings.Contains(l, "building"):
			logged++
		case strings.HasPrefix(l, "level=INFO msg=building step=322/322 elapsed="):
		default:
			t.Errorf("screen line %q is neither a whole log line nor the last report", l)
		}
	}
	if logged != 50 || lines[len(lines)-1] != "" {
		t.Errorf("%d log lines and the line %q at the bottom, want 50 and an empty one\n%s", logged, lines[len(lines)-1], strings.Join(lines, "\n"))
	}
}

func TestStepName(t *testing.T) {
	for desc, want := range map[string]string{
		"Building CXX object ggml/src/CMakeFiles/ggml-base.dir/ggml.cpp.o": "ggml.cpp",
		"Linking CXX executable bin/llama-server":                          "llama-server",
		"Linking CXX shared library bin/libggml-base.so.0.20.1":            "libggml-base.so.0.20.1",
		"Generating build details from Git":                                "Generating build details from Git",
	} {
		if got := stepName(desc); got != want {
			t.Errorf("stepName(%q) = %q, want %q", desc, got, want)
		}
	}
}
