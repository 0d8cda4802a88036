package bisect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/llbuild/llbuild/bench"
	"github.com/llbuild/llbuild/internal/gitref"
)

// LogFile is the campaign's log, one JSON event per line, in its directory.
const LogFile = "bisect.log"

// SchemaVersion is the log's format version.
const SchemaVersion = 1

// Event kinds, in the order a campaign writes them.
const (
	EventStart   = "start"   // the settings and the range
	EventEnds    = "ends"    // the good end against the bad one: is there a step?
	EventProbe   = "probe"   // one commit judged
	EventConfirm = "confirm" // the culprit against its parent
	EventInert   = "inert"   // which commits build as their parents do (the latest such event counts)
)

// Verdicts of a probe.
const (
	Good = "good"
	Bad  = "bad"
	Skip = "skip"
)

// Settings are what a campaign measures; they are fixed by its first event, and a resumed run
// must not change them.
type Settings struct {
	Good gitref.Commit `json:"good"`
	Bad  gitref.Commit `json:"bad"`
	// Target is the built-in target each probe is built for.
	Target string `json:"target"`
	// Series names the patches each probe carries: "plain" (0001 alone), "scoring" (the whole
	// built-in series) or a series file's patches, by name and sha256.
	Series        string   `json:"series"`
	SeriesPatches []string `json:"seriesPatches"`
	// Template is the bundle whose model, draft, arguments and environment each probe is
	// bundled with: its path as given, and what identifies it wherever it is.
	Template         string `json:"template"`
	TemplateIdentity string `json:"templateIdentity"`
	Mode             string `json:"mode"`
	Rounds           int    `json:"rounds"`
	// MaxRounds is how many rounds a probe may take in all before a verdict that stays not
	// significant makes it skipped.
	MaxRounds int    `json:"maxRounds"`
	Metric    string `json:"metric"`
	// Threshold, when given, is the probe/good ratio that divides good from bad; otherwise it
	// is the midpoint between 1 and the ends' median ratio, measured by the campaign.
	Threshold *float64 `json:"threshold,omitempty"`
	// MinStep is the least |bad/good - 1| (median) that counts as a step worth bisecting.
	MinStep float64 `json:"minStep"`
	// Alpha is the sign test's level: rounds decide a side when as many of them fall on it as
	// chance gives with probability alpha or less. 0 means the judge's default, bench.DefaultAlpha.
	Alpha float64 `json:"alpha,omitempty"`
	// Test is how rounds are judged against a ratio: TestSignedRank (Wilcoxon's signed-rank
	// test of the rounds' log ratios, what campaigns start with) or TestSign (the sign test;
	// empty in logs from before the choice).
	Test string `json:"test,omitempty"`
	// Generate, Rows and Canaries override the bench mode's protocol where set (> 0).
	Generate int `json:"generate,omitempty"`
	Rows     int `json:"rows,omitempty"`
	Canaries int `json:"canaries,omitempty"`
}

// Tests that judge rounds against a ratio: bench's judge's.
const (
	// TestSign counts the rounds on each side: only logs from before the signed-rank test was
	// the rule are judged by it.
	TestSign = bench.TestSign
	// TestSignedRank is Wilcoxon's signed-rank test of log(ratio/x), two-sided, exact: every
	// new campaign's, and every other speed decision's in llbuild (bench.Judge).
	TestSignedRank = bench.TestSignedRank
)

// judge is the bench library's judge at the campaign's settings; it takes an unset Alpha as its
// default level.
func (s *Settings) judge() bench.Judge {
	return bench.Judge{Alpha: s.Alpha, MinStep: s.MinStep, Test: s.test()}
}

func (s *Settings) test() string {
	if s.Test == "" {
		return TestSign
	}
	return s.Test
}

// alpha is the level the campaign is judged at.
func (s *Settings) alpha() float64 { return s.judge().Level() }

// Event is one line of the log.
type Event struct {
	SchemaVersion int       `json:"schemaVersion"`
	Kind          string    `json:"event"`
	Time          time.Time `json:"time"`
	// Machine says where the event was measured (host name and devices), so that a resumed
	// campaign shows which probes ran where.
	Machine string `json:"machine,omitempty"`

	// start
	Settings *Settings       `json:"settings,omitempty"`
	Path     []gitref.Commit `json:"path,omitempty"`

	// ends, probe, confirm
	Probe *Probe `json:"probe,omitempty"`

	// inert
	Inert *Inert `json:"inert,omitempty"`
}

// Inert names the commits of the path that change no file the campaign's builds read: each
// builds as its parent does, so it is never built or measured, and the first commit that
// changed the speed is never one of them. A change counts when it modifies, deletes or adds a
// file the builds read, or adds one in a directory holding such a file (a CMake glob would
// take it in).
type Inert struct {
	// From lists the commits whose builds' read files decided it (the builds still on the
	// machine that wrote the event).
	From []string `json:"from"`
	// Reads is how many files of the source tree those builds read, together.
	Reads int `json:"reads"`
	// Commits are the path indexes of the inert commits, ascending.
	Commits []int `json:"commits"`
}

// Probe is one commit built, bundled and measured against a reference commit, and what the
// campaign made of it.
type Probe struct {
	Commit gitref.Commit `json:"commit"`
	// Index is the commit's place on the path, 0 for the good end.
	Index int `json:"index"`
	// Against is the commit it was measured against: the good end, or for a confirmation the
	// culprit's parent.
	Against string `json:"against"`
	Build   *Build `json:"build,omitempty"`
	// Measurement is nil when the probe was skipped before it was measured (its build failed).
	Measurement *Measurement `json:"measurement,omitempty"`
	Verdict     string       `json:"verdict"`
	Reason      string       `json:"reason"`
	// Threshold is the ratio the verdict was judged against.
	Threshold float64 `json:"threshold,omitempty"`
}

// Build is a probe's artifacts.
type Build struct {
	Dir      string `json:"dir"`
	PlanHash string `json:"planHash"`
	// Reused says the artifacts of the same plan were already there.
	Reused bool `json:"reused,omitempty"`
	// Seconds is how long the build took (0 when reused).
	Seconds float64 `json:"seconds,omitempty"`
}

// Measurement is B measured against A, round by round, interleaved on one device.
type Measurement struct {
	A      string    `json:"a"`
	B      string    `json:"b"`
	AValue []float64 `json:"aValue"`
	BValue []float64 `json:"bValue"`
	// Ratios are B over A in the rounds where both runs counted.
	Ratios []float64 `json:"ratios"`
	Min    float64   `json:"min"`
	Median float64   `json:"median"`
	Max    float64   `json:"max"`
	// Invalid says which runs did not count, and why.
	Invalid []string `json:"invalid,omitempty"`
	// Records are the bench records of every run, relative to the campaign directory.
	Records []string `json:"records,omitempty"`
}

// summarize fills Min, Median and Max from Ratios.
func (m *Measurement) summarize() {
	m.Min, m.Median, m.Max = bench.Spread(m.Ratios)
}

// merge appends more rounds of the same pair.
func (m *Measurement) merge(o *Measurement) {
	m.AValue = append(m.AValue, o.AValue...)
	m.BValue = append(m.BValue, o.BValue...)
	m.Ratios = append(m.Ratios, o.Ratios...)
	m.Invalid = append(m.Invalid, o.Invalid...)
	m.Records = append(m.Records, o.Records...)
	m.summarize()
}

// Log is a campaign's events, read from and appended to its file.
type Log struct {
	Dir    string
	Events []Event
	// Torn says, when the file's last line was cut short (a run stopped mid-write: the machine
	// taken away, the disk full), which line was left out; the events before it stand, and the
	// next Append writes over it. "" for a whole log.
	Torn   string
	tornAt int64 // where the torn line starts, when Torn is set
	// unended: the file's last line, a whole event, lacks its newline (a write cut just
	// before it, an editor that drops it): Append writes one first
	unended bool
}

// ErrNoLog is returned by ReadLog for a directory without a campaign.
var ErrNoLog = errors.New("no bisect log")

// ReadLog reads DIR/bisect.log.
func ReadLog(dir string) (*Log, error) {
	l, err := ReadLogFile(filepath.Join(dir, LogFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s has no %s: %w", dir, LogFile, ErrNoLog)
	}
	return l, err
}

// ReadLogFile reads a campaign's log from a file of any name (a copy carried back from a GPU
// machine, an edited one to replay); the log's Dir is the file's directory.
func ReadLogFile(name string) (*Log, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	l := &Log{Dir: filepath.Dir(name)}
	// Append writes each event as one line ended by a newline and syncs it, so a last line
	// without its newline that is not JSON is the write a stopped run left half done: it held
	// no event yet. Anything else wrong is an error, as DecodeEvents says.
	if cut := bytes.LastIndexByte(b, '\n') + 1; cut < len(b) && len(bytes.TrimSpace(b[cut:])) > 0 && !json.Valid(b[cut:]) {
		l.Torn = fmt.Sprintf("%s:%d: the last line (%d bytes, no newline) was cut short mid-write and is left out; the events before it stand", name, bytes.Count(b, []byte{'\n'})+1, len(b)-cut)
		l.tornAt = int64(cut)
		b = b[:cut]
	}
	l.unended = len(b) > 0 && b[len(b)-1] != '\n'
	if l.Events, err = DecodeEvents(bytes.NewReader(b), name); err != nil {
		if l.Torn != "" {
			err = fmt.Errorf("%w (%s)", err, l.Torn)
		}
		return nil, err
	}
	return l, nil
}

// DecodeEvents reads a log's lines strictly: unknown fields, another schema version, or a
// first event that is not the start are errors naming the line.
func DecodeEvents(r io.Reader, name string) ([]Event, error) {
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var e Event
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%s:%d: more than one event on the line", name, n)
		}
		if e.SchemaVersion != SchemaVersion {
			return nil, fmt.Errorf("%s:%d: schemaVersion %d, this llbuild reads %d", name, n, e.SchemaVersion, SchemaVersion)
		}
		if err := e.check(len(events) == 0); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("%s is empty: %w", name, ErrNoLog)
	}
	return events, nil
}

func (e Event) check(first bool) error {
	switch {
	case first && e.Kind != EventStart:
		return fmt.Errorf("the first event is %q; a log starts with %q", e.Kind, EventStart)
	case !first && e.Kind == EventStart:
		return errors.New("a second start event; a log holds one campaign")
	}
	switch e.Kind {
	case EventStart:
		if e.Settings == nil || len(e.Path) < 2 {
			return errors.New("the start event needs settings and a path of two commits or more")
		}
	case EventInert:
		if e.Inert == nil {
			return errors.New("an inert event without its commits")
		}
	case EventEnds, EventProbe, EventConfirm:
		if e.Probe == nil {
			return fmt.Errorf("a %s event without its probe", e.Kind)
		}
		switch e.Probe.Verdict {
		case Good, Bad, Skip:
		default:
			if e.Kind == EventProbe {
				return fmt.Errorf("probe %s: verdict %q, want good, bad or skip", e.Probe.Commit.Short(), e.Probe.Verdict)
			}
		}
	default:
		return fmt.Errorf("unknown event %q", e.Kind)
	}
	return nil
}

// Append writes one event to the log and syncs it, so that a machine taken away mid-campaign
// loses at most the probe in progress.
func (l *Log) Append(e Event) error {
	e.SchemaVersion = SchemaVersion
	if err := e.check(len(l.Events) == 0); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return err
	}
	name := filepath.Join(l.Dir, LogFile)
	if l.Torn != "" {
		// the torn line held no event: the next one takes its place
		if err := os.Truncate(name, l.tornAt); err != nil {
			return fmt.Errorf("removing the torn last line of %s: %w", name, err)
		}
		l.Torn, l.tornAt = "", 0
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if len(l.Events) == 0 {
		// the start: whatever the file held was no campaign (ReadLog said so), a torn start
		// line among such
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(name, flags, 0o644)
	if err != nil {
		return err
	}
	if l.unended {
		b = append([]byte{'\n'}, b...)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	l.unended = false
	l.Events = append(l.Events, e)
	return nil
}

// Start is the log's first event.
func (l *Log) Start() *Event { return &l.Events[0] }
