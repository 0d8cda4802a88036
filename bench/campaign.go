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
	DecisionPromoted = "promoted"
	// DecisionSuperseded is a promoted run a later promotion beat (Entry.SupersededBy).
	DecisionSuperseded = "superseded"
	// DecisionScreenWin is a screen the judge says is faster than the standing record's bundle,
	// or the first screen of a model: send it to a full run.
	DecisionScreenWin = "screen win: run --mode full"
	// DecisionPending is a valid run waiting for the end of its invocation, when the judge
	// compares its rounds with the standing record's bundle's.
	DecisionPending = "pending: judged against the record after the rounds"
	// DecisionUnjudged is a valid run the judge could not compare with the record: the record's
	// bundle was not benched beside it, or too few rounds were. Not a negative result.
	DecisionUnjudged = "not judged against the record"
	// DecisionRecordAgain is the standing record's own bundle measured again.
	DecisionRecordAgain = "the record's bundle, measured again"
	// DecisionScreenOnly was every screen's decision before screens were judged; old campaigns
	// hold it.
	DecisionScreenOnly = "screen only"
	// DecisionBelow is a run the judge says is slower than the record's bundle.
	DecisionBelow = "rejected: below record"
	// DecisionNoise is a run the judge finds no difference from the record's bundle in (old
	// campaigns hold "rejected: within the spread", the rule before the judge).
	DecisionNoise  = "rejected: no difference from the record"
	DecisionCanary = "rejected: canary mismatch"
	// DecisionNearTie is a canary mismatch where the reference's top two tokens were within
	// NearTieNats: numerical noise between batched verification and one-token decoding, not
	// a broken speculation path. The run is still not valid.
	DecisionNearTie    = "rejected: canary near-tie"
	DecisionInvalid    = "invalid"
	DecisionIncomplete = "incomplete"
	// DecisionCrashed is a server that exited at each of two starts before it was ready:
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
	// Patches are the server's patches by name and sha256, so that a patch's fate follows its
	// bytes across trees and flags (PatchFates).
	Patches []KeptPatch `json:"patches,omitempty"`
}

// PatchFate is what the campaign made of one patch (by sha256): the runs that carried it where
// no standing record did, with their decisions. A patch every record carries is the baseline,
// not a result of its own.
type PatchFate struct {
	Name   string  `json:"name"`
	SHA256 string  `json:"sha256"`
	Runs   []Entry `json:"runs"`
}

// Negative says the patch was tried and not kept: rejected, below the record, or crashed, and
// never promoted.
func (f PatchFate) Negative() bool {
	neg := false
	for _, e := range f.Runs {
		switch {
		case e.Decision == DecisionPromoted || e.Decision == DecisionSuperseded:
			return false
		case negative(e.Decision) || strings.HasPrefix(e.Decision, DecisionBelow):
			neg = true
		}
	}
	return neg
}

// PatchFates are the fates of the patches the campaign's runs carried beyond the baseline (the
// patches of every promoted run of the same model and protocol), in the order first seen.
func (rs *Records) PatchFates() []PatchFate {
	baseline := map[string]map[string]bool{} // model+protocol -> sha256 carried by a promoted run
	for _, e := range rs.Runs {
		if e.Decision == DecisionPromoted || e.Decision == DecisionSuperseded {
			k := e.Model + "\x00" + e.Protocol
			if baseline[k] == nil {
				baseline[k] = map[string]bool{}
			}
			for _, p := range e.Patches {
				baseline[k][p.SHA256] = true
			}
		}
	}
	var out []PatchFate
	at := map[string]int{}
	for _, e := range rs.Runs {
		if e.Decision == DecisionPromoted || e.Decision == DecisionSuperseded {
			continue
		}
		for _, p := range e.Patches {
			if baseline[e.Model+"\x00"+e.Protocol][p.SHA256] {
				continue
			}
			i, ok := at[p.SHA256]
			if !ok {
				i = len(out)
				at[p.SHA256] = i
				out = append(out, PatchFate{Name: p.Name, SHA256: p.SHA256})
			}
			out[i].Runs = append(out[i].Runs, e)
		}
	}
	return out
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
		if r.Crash.Signal != "" {
			return DecisionCrashed, r.Crash.Signal + ": " + r.Crash.Line
		}
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
	switch {
	case s == nil && !full:
		return DecisionScreenWin, "no record for this model and protocol yet: its first full run will be the first record"
	case s == nil:
		return DecisionPromoted, "the first record for this model and protocol: nothing to judge it against yet"
	case s.Manifest != "" && s.Manifest == r.Identity.ManifestSHA256:
		return DecisionRecordAgain, "the standing record " + s.Label + "'s own bundle: not a candidate against itself"
	}
	return DecisionPending, "to be judged against the standing record " + s.Label + " once the rounds are done"
}

// Judgement is the campaign's decision for the pending runs of one bundle: its rounds against
// the standing record's bundle's rounds in the same invocation, by the judge.
type Judgement struct {
	Bundle   string `json:"bundle"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// Verdict is the judge's, when the record's bundle was benched beside it.
	Verdict *Verdict `json:"verdict,omitempty"`
}

// judgeRecords decides the pending runs of each bundle, in the bundles' order: against the
// standing record of their model and protocol when its bundle (by manifest) ran in the same
// rounds, by the judge; a promotion makes the next bundle's record. Nothing else decides a
// promotion: no spread, no single row 0.
func judgeRecords(dir string, j Judge, bundles []*Bundle, records [][]*Record) ([]Judgement, error) {
	unlock, err := lockCampaign(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rs, err := ReadRecords(dir)
	if err != nil {
		return nil, err
	}
	byManifest := map[string]int{}
	for i, b := range bundles {
		if _, ok := byManifest[b.ManifestSHA256]; !ok {
			byManifest[b.ManifestSHA256] = i
		}
	}
	var out []Judgement
	changed := map[string]*Record{} // by run directory, relative
	for i, b := range bundles {
		var pending []*Record
		for _, r := range records[i] {
			if r != nil && r.Decision == DecisionPending {
				pending = append(pending, r)
			}
		}
		if len(pending) == 0 {
			continue
		}
		first := pending[0]
		s := rs.Standing(first.Identity.Model.SHA256, first.Identity.Protocol)
		jd := Judgement{Bundle: b.Name}
		k, benched := -1, false
		if s != nil {
			k, benched = byManifest[s.Manifest]
		}
		switch {
		case s == nil: // the record it was pending against is gone (superseded by nothing): a first record
			jd.Decision, jd.Reason = DecisionPromoted, "the first record for this model and protocol"
			if first.Protocol.Mode != ModeFull {
				jd.Decision = DecisionScreenWin
			}
		case s.Manifest == b.ManifestSHA256:
			jd.Decision, jd.Reason = DecisionRecordAgain, "the standing record "+s.Label+"'s own bundle"
		case !benched || k == i:
			jd.Decision = DecisionUnjudged
			jd.Reason = fmt.Sprintf("the standing record %s's bundle did not run in these rounds: bench the two together to decide (llbuild bench %s %s --rounds %d)", s.Label, s.Bundle, b.Name, RoundsNeeded(j.Alpha))
		default:
			var ratios []float64
			for r := range records[i] {
				if r < len(records[k]) && counts(records[i][r]) && counts(records[k][r]) {
					ratios = append(ratios, records[i][r].Summary.Row0TPS/records[k][r].Summary.Row0TPS)
				}
			}
			v := j.Compare(ratios)
			jd.Verdict = &v
			against := fmt.Sprintf("against the record %s (%s, the same rounds): ", s.Label, bundles[k].Name)
			switch v.Kind {
			case Faster:
				jd.Decision = DecisionPromoted
				if first.Protocol.Mode != ModeFull {
					jd.Decision = DecisionScreenWin
				}
			case Slower:
				jd.Decision = DecisionBelow
			case NoDifference:
				jd.Decision = DecisionNoise
			default:
				jd.Decision = DecisionUnjudged
			}
			jd.Reason = against + v.Text
			for _, rk := range records[k] {
				if rk != nil {
					if d := Differences(rk.Identity, first.Identity); len(d) > 0 {
						jd.Reason += "; differs: " + strings.Join(d, "; ")
					}
					break
				}
			}
		}
		// the best round carries the promotion (the record's figure); the others are its rounds
		best := pending[0]
		for _, r := range pending {
			if r.Summary.Row0TPS > best.Summary.Row0TPS {
				best = r
			}
		}
		for _, r := range pending {
			r.Decision = jd.Decision
			if jd.Decision == DecisionPromoted && r != best {
				r.Decision = DecisionRecordAgain
			}
			rel, err := filepath.Rel(dir, r.Dir)
			if err != nil {
				rel = r.Dir
			}
			changed[rel] = r
		}
		if jd.Decision == DecisionPromoted {
			for e := range rs.Runs {
				if rs.Runs[e].Decision == DecisionPromoted && rs.Runs[e].Model == s.Model && rs.Runs[e].Protocol == s.Protocol {
					rs.Runs[e].Decision, rs.Runs[e].SupersededBy = DecisionSuperseded, best.Identity.Label
				}
			}
		}
		for e := range rs.Runs {
			if r := changed[rs.Runs[e].Dir]; r != nil {
				rs.Runs[e].Decision, rs.Runs[e].Reason = r.Decision, jd.Reason
			}
		}
		out = append(out, jd)
	}
	if len(changed) == 0 {
		return out, nil
	}
	for _, r := range changed {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(r.Dir, "record.json"), append(data, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("writing the run's record: %w", err)
		}
	}
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, RecordsFile), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", RecordsFile, err)
	}
	return out, nil
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
	return commitLocked(dir, rs, r)
}

// commitLocked is commit with the campaign's lock held and its records read: rs gains r's entry
// and is written.
func commitLocked(dir string, rs *Records, r *Record) error {
	var err error
	if r.tmp == "" { // the run could not make its directory: the record still goes in one
		if r.tmp, err = os.MkdirTemp(filepath.Join(dir, "runs"), tmpPrefix()); err != nil {
			return fmt.Errorf("making the run's directory: %w", err)
		}
	}
	standing := rs.Standing(r.Identity.Model.SHA256, r.Identity.Protocol)
	decision, reason := rs.Decide(r)
	r.Decision = decision
	final := r.Dir
	for i := 2; ; i++ {
		_, err := os.Lstat(final)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("naming the run's directory: %w", err)
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
	// the pending record goes before the directory is in place: a run in runs/ is whole
	if err := os.Remove(filepath.Join(r.tmp, pendingFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
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
		Repeated: r.Summary.RepeatedMeanTPS, Valid: r.Valid, Decision: decision, Reason: reason, Note: r.Identity.Note, Manifest: r.Identity.ManifestSHA256,
		Patches: r.Patches})
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
