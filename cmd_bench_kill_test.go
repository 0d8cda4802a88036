package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llbuild/llbuild/bench"
)

// TestMain lets a test run this binary as llbuild itself (LLBUILD_TEST_AS_MAIN=1): a bench a
// test can send signals to and kill, as a lab's shell does.
func TestMain(m *testing.M) {
	if os.Getenv("LLBUILD_TEST_AS_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// benchProcess starts llbuild bench ARGS as its own process and returns it once its stderr has
// said marker; the rest of stderr is read on (into the returned func's result).
func benchProcess(t *testing.T, marker string, args ...string) (*exec.Cmd, func() string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"bench"}, args...)...)
	cmd.Env = append(os.Environ(), "LLBUILD_TEST_AS_MAIN=1")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	lines := bufio.NewScanner(pipe)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	found := make(chan bool, 1)
	rest := make(chan string, 1)
	go func() {
		hit := false
		for lines.Scan() {
			seen.WriteString(lines.Text() + "\n")
			if !hit && strings.Contains(lines.Text(), marker) {
				hit = true
				found <- true
			}
		}
		if !hit {
			found <- false
		}
		rest <- seen.String()
	}()
	select {
	case ok := <-found:
		if !ok {
			cmd.Wait()
			t.Fatalf("bench ended before saying %q:\n%s", marker, <-rest)
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("bench did not say %q in 3 minutes", marker)
	}
	return cmd, func() string { return <-rest }
}

// A tuning lab's runs end at any phase: Ctrl-C and SIGTERM stop the bench within seconds with
// the run in progress marked incomplete (exit 130); kill -9 leaves a run directory that the next
// bench adopts as an incomplete run ("killed") and says so ("continuing campaign DIR: N runs, M
// incomplete"); records.json and comparisons.json stay valid throughout, and the A/B rounds
// finished before a kill are in comparisons.json. Against Debian sid's real llama-server, at
// each phase: the server loading, the canaries, the rows, between two runs.
func TestBenchSurvivesSignalsAndKillsAtEveryPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real llama-servers")
	}
	bs := benchBundles(t, sidArtifacts(t, "cpu-v3"), nil, []string{"--threads", "1"})
	// generous canaries (progress says every 64th) and rows: each phase lasts long enough to be hit
	common := []string{"--mode", "full", "--canaries", "130", "--canary-tokens", "8", "--prompt-tokens", "32", "--generate", "128", "--rows", "3"}
	phases := []struct{ name, marker string }{
		{"loading", ": starting llama-server"},
		{"canaries", ": canaries 64/130"},
		{"rows", ": row 1:"},
		{"between runs", ": pending: judged"},
	}
	validJSON := func(dir string) *bench.Records {
		t.Helper()
		rs := readRecords(t, dir)
		if b, err := os.ReadFile(filepath.Join(dir, bench.ComparisonsFile)); err == nil && !json.Valid(b) {
			t.Errorf("%s is not valid JSON", bench.ComparisonsFile)
		}
		return rs
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, ph := range phases[:3] {
			t.Run(fmt.Sprintf("%s while %s", sig, ph.name), func(t *testing.T) {
				dir := t.TempDir()
				cmd, rest := benchProcess(t, ph.marker, append([]string{bs[0], "--dir", dir, "--rounds", "2"}, common...)...)
				sent := time.Now()
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				took := time.Since(sent)
				var ee *exec.ExitError
				// within seconds: a llama-server busy in a request may take its stop's grace
				// (SIGTERM, then SIGKILL after 10 s) to go; a loaded CI machine adds some
				if !errors.As(err, &ee) || ee.ExitCode() != 130 || took > 25*time.Second {
					t.Fatalf("after %s: %v in %v, want exit 130 within seconds\n%s", sig, err, took, rest())
				}
				rs := validJSON(dir)
				if len(rs.Runs) != 1 || rs.Runs[0].Decision != bench.DecisionIncomplete {
					t.Errorf("records %+v, want the run in progress, incomplete", rs.Runs)
				}
				if left, _ := filepath.Glob(filepath.Join(dir, "runs", ".tmp-*")); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			})
		}
	}
	for _, ph := range phases {
		t.Run("kill -9 while "+ph.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd, rest := benchProcess(t, ph.marker, append([]string{bs[0], bs[1], "--dir", dir, "--rounds", "2"}, common...)...)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			rest()
			before := validJSON(dir)
			code, stdout, stderr := benchRun(t, bs[0], "--dir", dir, "--rounds", "1", "--canaries", "1", "--rows", "1", "--prompt", "short", "--generate", "16")
			if code != 0 {
				t.Fatalf("the next bench: exit %d\n%s\n%s", code, stdout, stderr)
			}
			rs := validJSON(dir)
			adopted := 0
			for _, e := range rs.Runs {
				if e.Decision == bench.DecisionIncomplete && strings.Contains(e.Reason, "killed") {
					adopted++
				}
			}
			want := []int{1}
			if ph.name == "between runs" {
				// the round's two runs are committed; the next may have begun (its directory
				// made) in the moment before the kill, and then it is adopted
				want = []int{0, 1}
				if len(before.Runs) < 2 {
					t.Errorf("killed between runs: %d runs kept, want the first round's two", len(before.Runs))
				}
				saved, err := os.ReadFile(filepath.Join(dir, bench.ComparisonsFile))
				if err != nil || !strings.Contains(string(saved), `"ratios": [`) {
					t.Errorf("the finished round is not in %s (%v):\n%s", bench.ComparisonsFile, err, saved)
				}
			}
			if !slices.Contains(want, adopted) || !strings.Contains(stderr, "continuing campaign "+dir+": ") {
				t.Errorf("%d runs adopted as killed, want %v; stderr:\n%s\nrecords %+v", adopted, want, stderr, rs.Runs)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "runs", ".tmp-*")); len(left) > 0 {
				t.Errorf("left behind after the next bench: %v", left)
			}
		})
	}
}
