package progress

import (
	"io"
	"sync"
)

// Plain returns a writer that passes what is written to w without terminal escape
// sequences (colours, cursor moves: ESC [ … final byte; a character set, ESC ( B; any other
// ESC and the byte after it), for
// output that goes to a file or a CI log rather than a terminal. A sequence split across
// writes is recognised across them.
func Plain(w io.Writer) io.Writer { return &plain{w: w} }

type plain struct {
	mu    sync.Mutex
	w     io.Writer
	state int // 0 text, 1 after ESC, 2 inside ESC [, 3 after ESC ( and its kin
	buf   []byte
}

func (p *plain) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = p.buf[:0]
	for _, c := range b {
		switch p.state {
		case 0:
			if c == 0x1b {
				p.state = 1
				continue
			}
			p.buf = append(p.buf, c)
		case 1:
			switch c {
			case '[':
				p.state = 2
			case '(', ')', '*', '+':
				p.state = 3
			default:
				p.state = 0
			}
		case 3:
			p.state = 0
		case 2:
			if c >= 0x40 && c <= 0x7e { // the final byte
				p.state = 0
			}
		}
	}
	if len(p.buf) > 0 {
		if _, err := p.w.Write(p.buf); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
