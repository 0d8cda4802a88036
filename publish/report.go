package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/llbuild/llbuild/internal/atomicfile"
)

// Report is what publish says of one plan, as publish --json prints it.
type Report struct {
	Target   string   `json:"target"`
	Tags     []string `json:"tags"`
	Digest   string   `json:"digest,omitempty"`
	Ref      string   `json:"ref,omitempty"`
	Existing bool     `json:"existing"`
	Moved    []string `json:"moved"`
	Error    string   `json:"error,omitempty"`
	// Gate is the speed gate's verdict (--not-slower-than) for an image it benched.
	Gate *GateVerdict `json:"gate,omitempty"`
}

// Reports is the report of each result, in result order, with the gate's verdict for its
// target where g (which may be nil) judged one.
func Reports(results []Result, g *Gate) []Report {
	reports := make([]Report, 0, len(results))
	for _, r := range results {
		rep := Report{Target: r.Target, Tags: nonNil(r.Tags), Digest: r.Digest, Ref: r.Ref, Existing: r.Existing, Moved: nonNil(r.Moved)}
		if g != nil {
			rep.Gate = g.Verdict(r.Target)
		}
		if r.Err != nil {
			rep.Error = r.Err.Error()
		}
		reports = append(reports, rep)
	}
	return reports
}

// WriteReport tells what a publish did: it records beside the gate's verdicts (g may be nil)
// where each admitted image went, writes each published image's digest to w, one a line, or
// with asJSON every plan's Report as one JSON array, and, when digestFile is named, writes the
// DigestLines there, atomically. Its error joins each result's error with its own.
func WriteReport(w io.Writer, results []Result, g *Gate, asJSON bool, digestFile string) error {
	var errs []error
	if g != nil {
		if err := g.Pushed(results); err != nil {
			errs = append(errs, fmt.Errorf("writing the gate's verdicts: %w", err))
		}
	}
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, r.Err)
		} else if !asJSON {
			fmt.Fprintln(w, r.Digest)
		}
	}
	if asJSON {
		b, err := json.MarshalIndent(Reports(results, g), "", "  ")
		if err == nil {
			_, err = w.Write(append(b, '\n'))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if digestFile != "" {
		if err := atomicfile.WriteFile(digestFile, DigestLines(results), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("writing --digest-file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// nonNil makes a nil list an empty one, so that JSON has [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
