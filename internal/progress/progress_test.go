package progress

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/llbuild/llbuild/internal/progress/progresstest"
)

// never is a ticker that never ticks: the tests make the reports with Task.Report.
var never = make(chan time.Time)

// clock is a fake clock that the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestTermKeepsWritesOffTheStatusLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(term *Term, p *Part)
		want []string
	}{{
		name: "a log line goes above the status line, which is drawn again below it",
		do: func(term *Term, p *Part) {
			p.Set("building [1/3]")
			term.Write([]byte("time=x level=INFO msg=hello\n"))
			p.Set("building [2/3]")
		},
		want: []string{"time=x level=INFO msg=hello", "building [2/3]"},
	}, {
		name: "a longer status line is replaced by a shorter one without leftovers",
		do: func(term *Term, p *Part) {
			p.Set("building [100/322] ggml-backend-meta.cpp")
			p.Set("building [101/322] ggml.c")
		},
		want: []string{"building [101/322] ggml.c"},
	}, {
		name: "the status line waits for the end of a line written in pieces",
		do: func(term *Term, p *Part) {
			p.Set("building [1/3]")
			term.Write([]byte("engine: step "))
			p.Set("building [2/3]")
			term.Write([]byte("done\n"))
		},
		want: []string{"engine: step done", "building [2/3]"},
	}, {
		name: "a removed part clears the line",
		do: func(term *Term, p *Part) {
			p.Set("building [3/3]")
			p.Remove()
			term.Write([]byte("time=x msg=built\n"))
		},
		want: []string{"time=x msg=built", ""},
	}, {
		name: "the line is cut to the terminal's width so that it never wraps",
		do: func(term *Term, p *Part) {
			p.Set(strings.Repeat("x", 100))
		},
		want: []string{strings.Repeat("x", 39)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			term := NewTerm(&out, 40)
			tc.do(term, term.Part())
			if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("screen = %q, want %q (output %q)", got, tc.want, out.String())
			}
		})
	}
}

func TestTermShowsConcurrentTasksOnOneLine(t *testing.T) {
	var out bytes.Buffer
	term := NewTerm(&out, 80)
	a, b := term.Part(), term.Part()
	a.Set("building cpu-v3 [1/322]")
	b.Set("building h200 [7/500]")
	a.Remove()
	b.Set("building h200 [8/500]")
	want := []string{"building h200 [8/500]"}
	if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, want) {
		t.Errorf("screen = %q, want %q", got, want)
	}
	a = term.Part()
	a.Set("building cpu-v3 [2/322]")
	want = []string{"building h200 [8/500] | building cpu-v3 [2/322]"}
	if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, want) {
		t.Errorf("screen = %q, want %q", got, want)
	}
}

// A task reports as its part of the status line on a terminal and as log lines elsewhere;
// both end with a log line of where it got to.
func TestReporterTerminalAndPlain(t *testing.T) {
	state := func(n *int) func(time.Duration) (Report, bool) {
		return func(d time.Duration) (Report, bool) {
			if *n == 0 {
				return Report{}, false
			}
			return Report{Line: "working " + Elapsed(d), Msg: "working", Attrs: []any{"n", *n, "elapsed", Elapsed(d)}}, true
		}
	}
	for _, tc := range []struct {
		terminal bool
		want     []string
	}{
		{terminal: true, want: []string{"level=INFO msg=working n=2 elapsed=1m0s", ""}},
		{terminal: false, want: []string{"level=INFO msg=working n=1 elapsed=30s", "level=INFO msg=working n=2 elapsed=1m0s", ""}},
	} {
		var out bytes.Buffer
		var term *Term
		var w io.Writer = &out
		if tc.terminal {
			term = NewTerm(&out, 80)
			w = term
		}
		log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: dropTime}))
		c := &clock{t: time.Unix(0, 0)}
		n := 0
		task := Reporter{Term: term, Log: log, Tick: never, Now: c.now}.Start(state(&n))
		task.Report() // nothing to say yet: no line
		n, c.t = 1, c.t.Add(30*time.Second)
		task.Report()
		if tc.terminal {
			if got, want := progresstest.Screen(out.String()), []string{"working 30s"}; !reflect.DeepEqual(got, want) {
				t.Errorf("terminal, while running: screen = %q, want %q", got, want)
			}
		}
		n, c.t = 2, c.t.Add(30*time.Second)
		task.Stop()
		if got := progresstest.Screen(out.String()); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("terminal %v: screen = %q, want %q", tc.terminal, got, tc.want)
		}
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TermOf finds a real terminal, a pseudo-terminal here, and its width; a pipe or a file is
// not one.
func TestTermOfTellsATerminal(t *testing.T) {
	_, pts := pseudoTerminal(t, 100)
	if term := TermOf(pts); term == nil || term.width != 100 {
		t.Errorf("TermOf(a pseudo-terminal 100 columns wide) = %+v, want a Term 100 wide", term)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, f := range map[string]io.Writer{"a pipe": w, "a file": file, "a buffer": &bytes.Buffer{}} {
		if TermOf(f) != nil {
			t.Errorf("TermOf(%s) is a terminal", name)
		}
	}
}

// pseudoTerminal opens a pseudo-terminal cols wide: its controller side and the terminal.
func pseudoTerminal(t *testing.T, cols uint16) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	resize(t, pts, cols)
	return ptmx, pts
}

func resize(t *testing.T, pts *os.File, cols uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
		t.Fatal(err)
	}
}

// A terminal made narrower while a task runs: the next status line is cut to the new width
// (it was cut to the width the terminal had at the start, and wrapped).
func TestTermFollowsAResizedTerminal(t *testing.T) {
	ptmx, pts := pseudoTerminal(t, 100)
	screen := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(ptmx) // until the terminal closes
		screen <- string(b)
	}()
	term := TermOf(pts)
	part := term.Part()
	long := strings.Repeat("x", 90)
	part.Set("a " + long)
	resize(t, pts, 40)
	part.Set("b " + long)
	resize(t, pts, 120)
	part.Set("c " + long)
	part.Remove()
	pts.Close()
	var got string
	select {
	case got = <-screen:
	case <-time.After(10 * time.Second):
		t.Fatal("the pseudo-terminal's output did not end")
	}
	for _, want := range []string{"\ra " + long + "\x1b[K", "\rb " + long[:37] + "\x1b[K", "\rc " + long + "\x1b[K"} {
		if !strings.Contains(got, want) {
			t.Errorf("the screen has no %q:\n%q", want, got)
		}
	}
}

// Plain drops the escape sequences of the Dagger CLI's coloured log, also when one is split
// between two writes, and keeps every other byte.
func TestPlainDropsEscapes(t *testing.T) {
	in := "\x1b[95m9   : \x1b[0m\x1b[90;2m\x1b[0mconsuming /v1/metrics\x1b[32m DONE\x1b[0m\x1b[90m [0.0s]\x1b[0m\n" +
		"\x1b(Bplain: ü 50%\n"
	want := "9   : consuming /v1/metrics DONE [0.0s]\nplain: ü 50%\n"
	for split := range len(in) + 1 {
		var out strings.Builder
		w := Plain(&out)
		for _, part := range []string{in[:split], in[split:]} {
			if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
				t.Fatalf("split %d: Write = %d, %v", split, n, err)
			}
		}
		if out.String() != want {
			t.Fatalf("split %d: %q, want %q", split, out.String(), want)
		}
	}
}
