package pipeline

import (
	"bytes"
	"log/slog"
	"regexp"
	"sync"
	"time"
)

// NinjaProgress follows a build's output for ninja's "[n/N]" lines and logs the last one with
// the elapsed time every so often while the build runs, and once when it stops: a cold
// llama.cpp build is otherwise silent for many minutes. It reads the output as written, a
// host build's or the Dagger engine's progress log (whose lines carry a prefix and colour
// codes before the step).
type NinjaProgress struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	step    string
	partial []byte
	start   time.Time
	done    chan struct{}
	stopped chan struct{}
}

// NewNinjaProgress returns a follower that logs to log every every (30 s when 0).
func NewNinjaProgress(log *slog.Logger, every time.Duration) *NinjaProgress {
	if every <= 0 {
		every = 30 * time.Second
	}
	return &NinjaProgress{log: log, every: every}
}

var ninjaStep = regexp.MustCompile(`(?:^|[| ])\[(\d+)/(\d+)\] `)

// Write scans b for ninja steps; it never fails.
func (p *NinjaProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data := append(p.partial, b...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if m := ninjaStep.FindSubmatch(data[:i]); m != nil {
			p.step = string(m[1]) + "/" + string(m[2])
		}
		data = data[i+1:]
	}
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	p.partial = append(p.partial[:0], data...)
	return len(b), nil
}

// Start begins the periodic reports.
func (p *NinjaProgress) Start() {
	p.mu.Lock()
	p.start, p.done, p.stopped = time.Now(), make(chan struct{}), make(chan struct{})
	p.mu.Unlock()
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.report()
			case <-p.done:
				p.report()
				return
			}
		}
	}()
}

// Stop ends the reports with a last one.
func (p *NinjaProgress) Stop() {
	if p.done == nil {
		return
	}
	close(p.done)
	<-p.stopped
	p.done = nil
}

func (p *NinjaProgress) report() {
	p.mu.Lock()
	step := p.step
	p.mu.Unlock()
	if step != "" && p.log != nil {
		p.log.Info("building", "step", step, "elapsed", time.Since(p.start).Round(time.Second))
	}
}
