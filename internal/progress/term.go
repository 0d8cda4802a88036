package progress

import (
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Term is a terminal with one status line at its bottom. Everything else written to the
// terminal goes through Write, which takes the status line away first and draws it again
// below, so a log line never lands inside the status line. The status line is the parts of
// the tasks running, in the order they started.
type Term struct {
	mu    sync.Mutex
	w     io.Writer
	width int
	// widthNow, when set, reads the terminal's width at each draw, so that a resized
	// terminal's line is cut to its new width; 0 keeps width.
	widthNow func() int
	parts    []*Part
	// shown: the status line is on the screen; midLine: the last write through Write ended
	// without a newline, so the status line waits for the rest of that line.
	shown, midLine bool
}

// NewTerm returns the status line of a terminal w that is width columns wide (80 when 0).
func NewTerm(w io.Writer, width int) *Term {
	if width <= 0 {
		width = 80
	}
	return &Term{w: w, width: width}
}

// TermOf returns w's status line when w is a terminal, else nil.
func TermOf(w io.Writer) *Term {
	if !IsTerminal(w) {
		return nil
	}
	fd := int(w.(*os.File).Fd())
	widthNow := func() int {
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			return int(ws.Col)
		}
		return 0
	}
	t := NewTerm(w, widthNow())
	t.widthNow = widthNow
	return t
}

// IsTerminal says whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Write writes b to the terminal above the status line.
func (t *Term) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clear()
	n, err := t.w.Write(b)
	if n > 0 {
		t.midLine = b[n-1] != '\n'
	}
	t.draw()
	return n, err
}

// Part is one task's text in the status line.
type Part struct {
	t    *Term
	text string
}

// Part adds an empty part to the status line.
func (t *Term) Part() *Part {
	p := &Part{t: t}
	t.mu.Lock()
	t.parts = append(t.parts, p)
	t.mu.Unlock()
	return p
}

// Set replaces the part's text and redraws the status line.
func (p *Part) Set(text string) {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	p.text = text
	p.t.draw()
}

// Remove takes the part out of the status line; without parts the line is cleared.
func (p *Part) Remove() {
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, q := range t.parts {
		if q == p {
			t.parts = append(t.parts[:i], t.parts[i+1:]...)
			break
		}
	}
	t.clear()
	t.draw()
}

// clear takes the status line off the screen.
func (t *Term) clear() {
	if t.shown {
		io.WriteString(t.w, "\r\x1b[K")
		t.shown = false
	}
}

// draw puts the status line on the screen, cut to the terminal's width: a line that wrapped
// could not be redrawn in place.
func (t *Term) draw() {
	if t.midLine {
		return
	}
	var texts []string
	for _, p := range t.parts {
		if p.text != "" {
			texts = append(texts, p.text)
		}
	}
	if len(texts) == 0 {
		t.clear()
		return
	}
	if t.widthNow != nil {
		if w := t.widthNow(); w > 0 {
			t.width = w
		}
	}
	line := strings.Join(texts, " | ")
	if utf8.RuneCountInString(line) > t.width-1 {
		line = string([]rune(line)[:t.width-1])
	}
	io.WriteString(t.w, "\r"+line+"\x1b[K")
	t.shown = true
}
