package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/bench"
)

// benchRun runs llbuild bench in-process and returns its exit status, stdout and stderr.
func benchRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"llbuild", "bench"}, args...), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func readRecords(t *testing.T, dir string) *bench.Records {
	t.Helper()
	rs, err := bench.ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func readRecord(t *testing.T, path string) *bench.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// A bundle of sid's llama-server with a draft: a screen runs its canaries (repeated greedy
// outputs: sid's server lacks patch 0004, so the record says the reference is "repeat" and
// why), measures row 0 with draft counters, and writes record.json, server.log and
// records.json.
func TestBenchScreenOfADraftBundle(t *testing.T) {
	b := realServerBundle(t)
	dir := t.TempDir()
	if d := os.Getenv("BENCH_KEEP"); d != "" {
		dir = d
	}
	code, stdout, stderr := benchRun(t, b, "--dir", dir, "--canaries", "8", "--prompt-tokens", "64", "--generate", "32")
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Logf("stdout:\n%s", stdout)
	rs := readRecords(t, dir)
	if len(rs.Runs) != 1 || rs.Runs[0].Decision != bench.DecisionScreenOnly || rs.Runs[0].Canary != "8/8" {
		t.Fatalf("records = %+v, want one screen-only run with 8/8 canaries", rs.Runs)
	}
	rec := readRecord(t, filepath.Join(dir, rs.Runs[0].Dir, "record.json"))
	if rec.Canary.Reference != "repeat" || !strings.Contains(rec.Canary.Why, "0004") {
		t.Errorf("canary reference %q (%s), want repeat naming patch 0004", rec.Canary.Reference, rec.Canary.Why)
	}
	if len(rec.Rows) != 1 {
		t.Fatalf("rows = %+v, want 1", rec.Rows)
	}
	row := rec.Rows[0]
	if !row.Fresh || row.PromptTokens != 64 || row.CachedTokens != 0 || row.Generated != 32 || row.DecodeTPS <= 0 || row.ClientTPS <= 0 || row.TTFTMS <= 0 {
		t.Errorf("row 0 = %+v, want fresh, 64 prompt tokens, none cached, 32 generated, positive rates", row)
	}
	if row.DraftProposed == 0 || row.Acceptance == nil {
		t.Errorf("row 0 drafted nothing: %+v", row)
	}
	if !rec.Valid {
		t.Errorf("run invalid: %v", rec.Invalid)
	}
	log, err := os.ReadFile(filepath.Join(dir, rs.Runs[0].Dir, "server.log"))
	if err != nil || len(log) == 0 {
		t.Errorf("server.log: %v, %d bytes", err, len(log))
	}
}
