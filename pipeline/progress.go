package pipeline

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llbuild/llbuild/internal/progress"
)

// NinjaProgress follows a build's output for ninja's "[n/N] description" lines and reports
// the last one with the elapsed time while the build runs, and once when it stops: a cold
// llama.cpp build is otherwise silent for many minutes. On a terminal it is the build's part
// of the status line; elsewhere a log line every 30 s. It reads the output as written, a host
// build's or the Dagger engine's progress log (whose lines carry a prefix and colour codes
// before the step).
type NinjaProgress struct {
	rep   progress.Reporter
	label string

	mu          sync.Mutex
	done, total int
	name        string
	partial     []byte
	task        *progress.Task
}

// NewNinjaProgress returns a follower of the build of label (a target) that reports as r
// says.
func NewNinjaProgress(r progress.Reporter, label string) *NinjaProgress {
	return &NinjaProgress{rep: r, label: label}
}

var (
	ninjaStep = regexp.MustCompile(`(?:^|[| ])\[(\d+)/(\d+)\] (.*)`)
	ansiCode  = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
)

// Write scans b for ninja steps; it never fails.
func (p *NinjaProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	data := append(p.partial, b...)
	stepped := false
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if m := ninjaStep.FindSubmatch(data[:i]); m != nil {
			p.done, _ = strconv.Atoi(string(m[1]))
			p.total, _ = strconv.Atoi(string(m[2]))
			p.name = stepName(string(ansiCode.ReplaceAll(m[3], nil)))
			stepped = true
		}
		data = data[i+1:]
	}
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	p.partial = append(p.partial[:0], data...)
	task := p.task
	p.mu.Unlock()
	if stepped && task != nil {
		task.Changed() // a terminal's line follows every step; log lines keep their pace
	}
	return len(b), nil
}

// stepName shortens a ninja step's description to what it works on: "Building CXX object
// ggml/src/CMakeFiles/ggml-base.dir/ggml.cpp.o" is ggml.cpp, "Linking CXX executable
// bin/llama-server" is llama-server; a description without a path stays whole.
func stepName(desc string) string {
	desc = strings.TrimSpace(desc)
	f := strings.Fields(desc)
	if len(f) == 0 {
		return ""
	}
	last := f[len(f)-1]
	if !strings.ContainsAny(last, "/.") {
		return desc
	}
	return strings.TrimSuffix(path.Base(last), ".o")
}

// Start begins the reports.
func (p *NinjaProgress) Start() {
	t := p.rep.Start(p.state)
	p.mu.Lock()
	p.task = t
	p.mu.Unlock()
}

// Report reports the build's progress now, as the ticker does.
func (p *NinjaProgress) Report() {
	p.mu.Lock()
	t := p.task
	p.mu.Unlock()
	t.Report()
}

// Stop ends the reports with a last one.
func (p *NinjaProgress) Stop() {
	p.mu.Lock()
	t := p.task
	p.task = nil
	p.mu.Unlock()
	if t != nil {
		t.Stop()
	}
}

func (p *NinjaProgress) state(elapsed time.Duration) (progress.Report, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total == 0 {
		return progress.Report{}, false
	}
	step := fmt.Sprintf("%d/%d", p.done, p.total)
	line := "building "
	if p.label != "" {
		line += p.label + " "
	}
	line += fmt.Sprintf("[%s] %3.0f%% %s", step, 100*float64(p.done)/float64(p.total), progress.Elapsed(elapsed))
	if p.name != "" {
		line += " " + p.name
	}
	return progress.Report{Line: line, Msg: "building", Attrs: []any{"step", step, "elapsed", elapsed.Round(time.Second)}}, true
}
