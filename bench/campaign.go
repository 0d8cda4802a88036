package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	DecisionPromoted   = "promoted"
	DecisionScreenOnly = "screen only"
	DecisionBelow      = "rejected: below record"
	DecisionCanary     = "rejected: canary mismatch"
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
	case r.Protocol.Mode != ModeFull:
		return DecisionScreenOnly, "a screen finds candidates; only a full run can be promoted"
	}
	s := rs.Standing(r.Identity.Model.SHA256, r.Identity.Protocol)
	if s == nil {
		return DecisionPromoted, "first record for this model and protocol"
	}
	if r.Summary.Row0TPS > s.Row0TPS {
		return DecisionPromoted, fmt.Sprintf("beats %s (%.2f tok/s)", s.Label, s.Row0TPS)
	}
	return DecisionBelow, fmt.Sprintf("%.2f tok/s does not beat %s (%.2f tok/s)", r.Summary.Row0TPS, s.Label, s.Row0TPS)
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
	rs := &Records{SchemaVersion: RecordSchema}
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
