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
	"time"

	"github.com/llbuild/llbuild/internal/atomicfile"
)

// pendingFile is written into a run's temporary directory as soon as it exists: the record as
// it started and the process measuring it, so that a later bench can adopt the run of a bench
// that was killed (kill -9, a machine lost) instead of leaving the directory behind.
const pendingFile = "pending.json"

// pending is pendingFile's content.
type pending struct {
	Record *Record `json:"record"`
	Owner  owner   `json:"owner"`
}

// owner is the process that measures a run: its pid and its start time in clock ticks since
// boot (/proc/PID/stat's 22nd field), so that a pid used again by another process is not taken
// for the owner.
type owner struct {
	PID   int    `json:"pid"`
	Start string `json:"start"`
}

func self() owner {
	return owner{PID: os.Getpid(), Start: procStart(os.Getpid())}
}

// procStart is a process's start time as /proc has it, "" where it cannot be read.
func procStart(pid int) string {
	if f := procStat(pid); len(f) >= 20 {
		return f[19] // field 22 overall: starttime
	}
	return ""
}

// alive says the owner still runs: its pid is there with the same start time.
func (o owner) alive() bool {
	if o.PID <= 0 {
		return false
	}
	start := procStart(o.PID)
	return start != "" && start == o.Start
}

// tmpPrefix names a run's temporary directory after the process that makes it
// (.tmp-PID-START-), so that from its first moment anyone can tell whether its owner still runs.
func tmpPrefix() string {
	o := self()
	return fmt.Sprintf(".tmp-%d-%s-", o.PID, o.Start)
}

// ownerOf reads the owner from a temporary directory's name; ok is false for a name from before
// owners were named (.tmp-RANDOM).
func ownerOf(tmp string) (owner, bool) {
	parts := strings.Split(strings.TrimPrefix(filepath.Base(tmp), ".tmp-"), "-")
	if len(parts) != 3 {
		return owner{}, false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil {
		return owner{}, false
	}
	return owner{PID: pid, Start: parts[1]}, true
}

// writePending keeps rec and this process in its temporary directory.
func writePending(tmp string, rec *Record) error {
	b, err := json.Marshal(pending{Record: rec, Owner: self()})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(tmp, pendingFile), b, 0o644)
}

// Continuing is what a bench found of a campaign it continues: its runs, how many of them are
// incomplete, and the runs it adopted from benches that were killed or cleaned away.
type Continuing struct {
	Runs       int      `json:"runs"`
	Incomplete int      `json:"incomplete"`
	Adopted    []string `json:"adopted,omitempty"`
	// SetAside are temporary directories without a record to adopt (a bench from before
	// pending.json, killed before it wrote one), moved to runs/abandoned-*.
	SetAside []string `json:"setAside,omitempty"`
}

// adopt takes in, under the campaign's lock, every run a killed bench left in runs/.tmp-*: its
// record completed as incomplete ("killed") and committed as any run is; a directory without a
// pending record is moved to runs/abandoned-NAME. Runs whose bench is still running are left to
// it.
func adopt(dir string, now time.Time) (*Continuing, error) {
	unlock, err := lockCampaign(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rs, err := ReadRecords(dir)
	if err != nil {
		return nil, err
	}
	c := &Continuing{}
	tmps, err := filepath.Glob(filepath.Join(dir, "runs", ".tmp-*"))
	if err != nil {
		return nil, err
	}
	for _, tmp := range tmps {
		if o, ok := ownerOf(tmp); ok && o.alive() {
			continue // its bench is still measuring it
		}
		b, err := os.ReadFile(filepath.Join(tmp, pendingFile))
		var p pending
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err == nil && p.Record == nil {
			err = errors.New("no record")
		}
		if err != nil {
			if _, named := ownerOf(tmp); !named && errors.Is(err, fs.ErrNotExist) {
				if fi, serr := os.Stat(tmp); serr == nil && time.Since(fi.ModTime()) < time.Minute {
					continue // an older bench's, just made: maybe still running
				}
			}
			if entries, rerr := os.ReadDir(tmp); rerr == nil && len(entries) == 0 {
				if rerr := os.Remove(tmp); rerr != nil {
					return nil, fmt.Errorf("removing %s: %w", tmp, rerr)
				}
				continue // killed before it held anything
			}
			aside := filepath.Join(dir, "runs", "abandoned-"+strings.TrimPrefix(filepath.Base(tmp), ".tmp-"))
			if rerr := os.Rename(tmp, aside); rerr != nil {
				return nil, fmt.Errorf("setting aside %s: %w", tmp, rerr)
			}
			c.SetAside = append(c.SetAside, aside)
			continue
		}
		if p.Owner.alive() {
			continue
		}
		r := p.Record
		r.tmp = tmp
		r.Complete, r.Valid = false, false
		r.Error = fmt.Sprintf("killed: the bench measuring it (pid %d) ended without finishing it (kill -9, a machine lost); adopted by the next bench", p.Owner.PID)
		if r.Finished.IsZero() {
			r.Finished = now.UTC()
		}
		r.Summary = summarize(r.Rows)
		if err := commitLocked(dir, rs, r); err != nil {
			return nil, err
		}
		c.Adopted = append(c.Adopted, r.Identity.Label)
	}
	c.Runs = len(rs.Runs)
	for _, e := range rs.Runs {
		if e.Decision == DecisionIncomplete {
			c.Incomplete++
		}
	}
	return c, nil
}

// String says it as the bench does on stderr.
func (c *Continuing) String() string {
	s := fmt.Sprintf("%d runs, %d incomplete", c.Runs, c.Incomplete)
	if n := len(c.Adopted); n > 0 {
		s += fmt.Sprintf(" (%d adopted from a bench that was killed)", n)
	}
	if n := len(c.SetAside); n > 0 {
		s += fmt.Sprintf("; %d left-over run directories without a record moved to %s", n, strings.Join(c.SetAside, ", "))
	}
	return s
}
