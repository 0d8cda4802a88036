package progress

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// PlainEvery is how often a task logs where there is no terminal: often enough to show it is
// alive, seldom enough for a CI log.
const PlainEvery = 30 * time.Second

// termEvery is how often a task redraws its part of a terminal's status line.
const termEvery = time.Second

// Reporter says how a task reports: on Term's status line when Term is set, otherwise as
// Log lines every Every.
type Reporter struct {
	// Term is stderr's status line; nil where stderr is not a terminal (or with --quiet,
	// when Log is quiet too).
	Term *Term
	// Log receives the plain lines and the last one; nil logs nothing.
	Log *slog.Logger
	// Every is how often a plain line is logged (PlainEvery when 0).
	Every time.Duration
	// Tick, if set, drives the reports instead of a ticker (tests: a channel never sent on,
	// with the reports made by calling Task.Report), and Now is the clock.
	Tick <-chan time.Time
	Now  func() time.Time
}

// Report is what a task says of itself at a moment.
type Report struct {
	// Line is its part of the status line on a terminal.
	Line string
	// Msg and Attrs are its log line elsewhere, and its last line on a terminal too.
	Msg   string
	Attrs []any
}

// Task is a task being reported.
type Task struct {
	r        Reporter
	state    func(time.Duration) (Report, bool)
	now      func() time.Time
	start    time.Time
	part     *Part
	mu       sync.Mutex // one report at a time
	done     chan struct{}
	finished chan struct{}
}

// Start reports the task that state describes until Stop, which makes one last report as a
// log line (on a terminal too, after taking the task out of the status line, so that what
// it came to stays on the screen). state gets the time since Start; ok false means there is
// nothing to say yet.
func (r Reporter) Start(state func(elapsed time.Duration) (rep Report, ok bool)) *Task {
	t := &Task{r: r, state: state, now: r.Now, done: make(chan struct{}), finished: make(chan struct{})}
	if t.now == nil {
		t.now = time.Now
	}
	tick := r.Tick
	var ticker *time.Ticker
	if tick == nil {
		every := r.Every
		if every <= 0 {
			every = PlainEvery
		}
		if r.Term != nil {
			every = termEvery
		}
		ticker = time.NewTicker(every)
		tick = ticker.C
	}
	if r.Term != nil {
		t.part = r.Term.Part()
	}
	t.start = t.now()
	if t.part != nil {
		t.Report()
	}
	go func() {
		defer close(t.finished)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-tick:
				t.Report()
			case <-t.done:
				return
			}
		}
	}()
	return t
}

// Report reports the task now: it redraws the task's part of the status line, or logs.
func (t *Task) Report() { t.report(false) }

// Changed says the task's state moved on: a terminal's line shows it at once; log lines keep
// their pace.
func (t *Task) Changed() {
	if t.part != nil {
		t.report(false)
	}
}

func (t *Task) report(last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rep, ok := t.state(t.now().Sub(t.start))
	switch {
	case !ok:
	case t.part != nil && !last:
		t.part.Set(rep.Line)
	case t.r.Log != nil:
		t.r.Log.Info(rep.Msg, rep.Attrs...)
	}
}

// Stop ends the reports with a last one, logged.
func (t *Task) Stop() {
	close(t.done)
	<-t.finished
	if t.part != nil {
		t.part.Remove()
	}
	t.report(true)
}

// Bytes writes n bytes in MB or GB, for people.
func Bytes(n int64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// Elapsed writes d to the second.
func Elapsed(d time.Duration) string { return d.Round(time.Second).String() }
