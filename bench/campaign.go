package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llbuild/llbuild/internal/atomicfile"
)

// RecordsFile is the campaign's records, in its directory.
const RecordsFile = "records.json"

// Decisions a campaign makes of a run.
const (
	DecisionPromoted = "promoted"
	// DecisionSuperseded is a promoted run a later promotion beat (Entry.SupersededBy).
	DecisionSuperseded = "superseded"
	// DecisionScreenWin is a screen that beats the standing record beyond the campaign's spread,
	// or the first screen of a model: send it to a full run.
	DecisionScreenWin = "screen win: run --mode full"
	// DecisionScreenOnly was every screen's decision before screens were judged; old campaigns
	// hold it.
	DecisionScreenOnly = "screen only"
	DecisionBelow      = "rejected: below record"
	// DecisionNoise beats the standing record by no more than the campaign's run-to-run spread
	// for the model: not a win the campaign can tell from noise.
	DecisionNoise  = "rejected: within the spread"
	DecisionCanary = "rejected: canary mismatch"
	// DecisionNearTie is a canary mismatch where the reference's top two tokens were within
	// NearTieNats: numerical noise between batched verification and one-token decoding, not
	// a broken speculation path. The run is still not valid.
	DecisionNearTie    = "rejected: canary near-tie"
	DecisionInvalid    = "invalid"
	DecisionIncomplete = "incomplete"
	// DecisionCrashed is a server that crashed the same way at each start before it was ready:
	// not started a third time (a large model's load costs minutes).
	DecisionCrashed = "crashed"
)

// Records is records.json: every run of a campaign, in the order they finished, each with
// its decision. Losing runs stay as negative results.
type Records struct {
	SchemaVersion int     `json:"schemaVersion"`
	Runs          []Entry `json:"runs"`

	dir string // the campaign directory, where each run's record.json is
}

// Entry is a run as the campaign keeps it.
type Entry struct {
	Label    string    `json:"label"`
	Dir      string    `json:"dir"` // relative to the campaign directory
	Bundle   string    `json:"bundle"`
	Finished time.Time `json:"finished"`
	Mode     string    `json:"mode"`
	// Model and Protocol say which runs are comparable: a record stands for one model
	// (sha256) measured with one protocol.
	Model    string   `json:"model"`
	Protocol string   `json:"protocol"`
	Canary   string   `json:"canary"`
	Row0TPS  float64  `json:"row0TokPerSec"`
	Repeated *float64 `json:"repeatedMeanTokPerSec,omitempty"`
	Valid    bool     `json:"valid"`
	Decision string   `json:"decision"`
	// Reason says why, in words: what the record was, what made the run invalid.
	Reason string `json:"reason,omitempty"`
	// Note is the run's --note.
	Note string `json:"note,omitempty"`
	// SupersededBy is the run that beat this one's record, once it is superseded.
	SupersededBy string `json:"supersededBy,omitempty"`
	// Manifest is the sha256 of the bundle's manifest: the build (its files' digests), the
	// arguments and the environment. Benching the same again is said (Previous).
	Manifest string `json:"manifest,omitempty"`
}

// Previous are the campaign's runs of a bundle with this manifest that were not kept: rejected,
// invalid, crashed or below the record. Benching them again repeats a known negative result.
func (rs *Records) Previous(manifestSHA256 string) []Entry {
	var out []Entry
	for _, e := range rs.Runs {
		if e.Manifest == manifestSHA256 && e.Manifest != "" && negative(e.Decision) {
			out = append(out, e)
		}
	}
	return out
}

// negative says a decision is a negative result.
func negative(d string) bool {
	return strings.HasPrefix(d, "rejected") || strings.HasPrefix(d, DecisionInvalid) || d == DecisionCrashed
}

// Standing returns the campaign's record for a model and protocol: the promoted run with
// the highest row 0, or nil.
func (rs *Records) Standing(model, protocol string) *Entry {
	var best *Entry
	for i := range rs.Runs {
		e := &rs.Runs[i]
		if e.Decision == DecisionPromoted && e.Model == model && e.Protocol == protocol && (best == nil || e.Row0TPS > best.Row0TPS) {
			best = e
		}
	}
	return best
}

// Decide says what the campaign makes of r: a complete, valid full run that beats the
// standing record's row 0 (for the same model and protocol) is promoted; everything else is
// kept with why it was not.
func (rs *Records) Decide(r *Record) (decision, reason string) {
	switch {
	case r.Crash != nil:
		return DecisionCrashed, r.Crash.Line
	case !r.Complete:
		return DecisionIncomplete, r.Error
	case r.Canary.Mismatch != nil:
		m := r.Canary.worst()
		reason = fmt.Sprintf("check %d (%q) differs at token %d: got %d, want %d", m.Check, m.Prompt, m.Position, m.Got, m.Want)
		if why := m.explain(); why != "" {
			reason += "; " + why
		}
		reason += "; " + r.Canary.summary()
		if m.NearTie() {
			return DecisionNearTie, reason
		}
		return DecisionCanary, reason
	case !r.Valid:
		return DecisionInvalid + ": " + r.Invalid[0], joinReasons(r.Invalid)
	}
	full := r.Protocol.Mode == ModeFull
	s := rs.Standing(r.Identity.Model.SHA256, r.Identity.Protocol)
	if s == nil {
		if !full {
			return DecisionScreenWin, "no record for this model and protocol yet"
		}
		return DecisionPromoted, "first record for this model and protocol"
	}
	spread, repeated := rs.spreadWith(r)
	noise := "no run-to-run spread measured for this model and protocol yet (bench one bundle twice to measure it)"
	if repeated > 0 {
		noise = fmt.Sprintf("the campaign's run-to-run spread for this model, %.1f%% (the widest of %d bundles measured more than once)", 100*spread, repeated)
	}
	ratio := r.Summary.Row0TPS / s.Row0TPS
	delta := fmt.Sprintf("%.3f× %s (row 0 %.2f → %.2f tok/s)", ratio, s.Label, s.Row0TPS, r.Summary.Row0TPS)
	switch {
	case ratio > 1+spread && full:
		reason := "beats the record: " + delta + ", beyond " + noise
		if d := rs.differsFrom(s, r); d != "" {
			reason += "; differs: " + d
		}
		return DecisionPromoted, reason
	case ratio > 1+spread:
		return DecisionScreenWin, "beats the record: " + delta + ", beyond " + noise
	case ratio > 1:
		return DecisionNoise, delta + " is within " + noise
	}
	return DecisionBelow, fmt.Sprintf("%.2f tok/s does not beat %s (%.2f tok/s): %s", r.Summary.Row0TPS, s.Label, s.Row0TPS, delta)
}

// spreadWith is the campaign's run-to-run spread of row 0 for r's model and protocol, r
// included: among valid runs of one manifest (the same bundle measured again), the widest
// (max - min) / min; and how many manifests were measured more than once. The rule of
// promotion: a full run is promoted when its row 0 beats the standing record's by more than it.
func (rs *Records) spreadWith(r *Record) (float64, int) {
	groups := map[string][]float64{}
	for _, e := range rs.Runs {
		if e.Valid && e.Manifest != "" && e.Row0TPS > 0 && e.Model == r.Identity.Model.SHA256 && e.Protocol == r.Identity.Protocol {
			groups[e.Manifest] = append(groups[e.Manifest], e.Row0TPS)
		}
	}
	if m := r.Identity.ManifestSHA256; m != "" && r.Summary.Row0TPS > 0 {
		groups[m] = append(groups[m], r.Summary.Row0TPS)
	}
	spread, n := 0.0, 0
	for _, xs := range groups {
		if len(xs) < 2 {
			continue
		}
		n++
		lo, hi := slices.Min(xs), slices.Max(xs)
		spread = max(spread, (hi-lo)/lo)
	}
	return spread, n
}

// differsFrom says what differs between the standing record's run and r, read from its
// record.json ("" when it cannot be read).
func (rs *Records) differsFrom(s *Entry, r *Record) string {
	if rs.dir == "" || s.Dir == "" {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(rs.dir, s.Dir, "record.json"))
	if err != nil {
		return ""
	}
	var prev Record
	if json.Unmarshal(data, &prev) != nil {
		return ""
	}
	return strings.Join(Differences(prev.Identity, r.Identity), "; ")
}

func joinReasons(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out
}

// commit decides r against the campaign in dir, writes its record.json, moves its directory
// into place and adds it to records.json, under a lock so that parallel runs (and other
// bench processes) do not lose each other's entries. Nothing is half-written: record.json and
// records.json are replaced whole, the run directory appears complete.
func commit(dir string, r *Record) error {
	unlock, err := lockCampaign(dir)
	if err != nil {
		return err
	}
	defer unlock()
	rs, err := ReadRecords(dir)
	if err != nil {
		return err
	}
	if r.tmp == "" { // the run could not make its directory: the record still goes in one
		if r.tmp, err = os.MkdirTemp(filepath.Join(dir, "runs"), ".tmp-"); err != nil {
			return fmt.Errorf("making the run's directory: %w", err)
		}
	}
	standing := rs.Standing(r.Identity.Model.SHA256, r.Identity.Protocol)
	decision, reason := rs.Decide(r)
	r.Decision = decision
	final := r.Dir
	for i := 2; ; i++ {
		if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
			break
		}
		final = r.Dir + "." + strconv.Itoa(i)
	}
	r.Dir = final
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(r.tmp, "record.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the run's record: %w", err)
	}
	if err := os.Rename(r.tmp, final); err != nil {
		return fmt.Errorf("moving the run into %s: %w", final, err)
	}
	rel, err := filepath.Rel(dir, final)
	if err != nil {
		rel = final
	}
	if decision == DecisionPromoted && standing != nil {
		for i := range rs.Runs {
			if rs.Runs[i].Decision == DecisionPromoted && rs.Runs[i].Model == standing.Model && rs.Runs[i].Protocol == standing.Protocol {
				rs.Runs[i].Decision, rs.Runs[i].SupersededBy = DecisionSuperseded, r.Identity.Label
			}
		}
	}
	rs.Runs = append(rs.Runs, Entry{Label: r.Identity.Label, Dir: rel, Bundle: r.Bundle, Finished: r.Finished, Mode: r.Protocol.Mode,
		Model: r.Identity.Model.SHA256, Protocol: r.Identity.Protocol, Canary: r.canaryCell(), Row0TPS: r.Summary.Row0TPS,
		Repeated: r.Summary.RepeatedMeanTPS, Valid: r.Valid, Decision: decision, Reason: reason, Note: r.Identity.Note, Manifest: r.Identity.ManifestSHA256})
	data, err = json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, RecordsFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", RecordsFile, err)
	}
	return nil
}

// ReadRecords reads the campaign's records.json; a campaign without one has no runs yet.
func ReadRecords(dir string) (*Records, error) {
	rs := &Records{SchemaVersion: RecordSchema, dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, RecordsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return rs, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, rs); err != nil {
		return nil, fmt.Errorf("%s: %w (move it aside to start a new campaign)", filepath.Join(dir, RecordsFile), err)
	}
	rs.dir = dir
	if rs.SchemaVersion != RecordSchema {
		return nil, fmt.Errorf("%s has schemaVersion %d; this llbuild reads %d", filepath.Join(dir, RecordsFile), rs.SchemaVersion, RecordSchema)
	}
	return rs, nil
}

// lockCampaign takes an exclusive lock on the campaign directory's .lock file.
func lockCampaign(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the campaign: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the campaign: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
