package main

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/publish/publishtest"
)

// TestShellScriptsPassShellcheck lints the repository's shell scripts: the test command, the CI
// entry point and the benchmarks that run only on GPU machines (which no test executes).
func TestShellScriptsPassShellcheck(t *testing.T) {
	shellcheck := publishtest.NeedCommand(t, "shellcheck", "shellcheck")
	scripts, err := filepath.Glob("scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	scripts = append(scripts, ".ci/run")
	if len(scripts) < 2 {
		t.Fatalf("found only %v", scripts)
	}
	for _, s := range scripts {
		if out, err := exec.Command(shellcheck, "--shell=bash", s).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", s, err, out)
		}
	}
}

// TestGPUPlansNameStagesTheirScriptsHave reads every plan of scripts/gpu-plans/ (the steps
// scripts/gpu-chain.sh runs on a GPU lease, which no test can run) and checks each step against
// the script it calls: the script exists and has a branch of its stage case for the stage named,
// and the step starts with its seconds. A typo there would cost a lease's scarce minutes.
func TestGPUPlansNameStagesTheirScriptsHave(t *testing.T) {
	plans, err := filepath.Glob("scripts/gpu-plans/*.plan")
	if err != nil || len(plans) == 0 {
		t.Fatalf("no plans in scripts/gpu-plans: %v", err)
	}
	stagesOf := map[string]map[string]bool{}
	stages := func(script string) map[string]bool {
		if s, ok := stagesOf[script]; ok {
			return s
		}
		b, err := os.ReadFile(script)
		if err != nil {
			t.Fatalf("a plan calls %s: %v", script, err)
		}
		s := map[string]bool{}
		// the stage case's branches: lines like "build-new) ..." or "ab | ab-bigram)"
		branch := regexp.MustCompile(`(?m)^([a-z0-9-]+(?: \| [a-z0-9-]+)*)\)`)
		for _, m := range branch.FindAllStringSubmatch(string(b), -1) {
			for name := range strings.SplitSeq(m[1], " | ") {
				s[name] = true
			}
		}
		stagesOf[script] = s
		return s
	}
	step := regexp.MustCompile(`^(\d+) (.*)$`)
	call := regexp.MustCompile(`bash (scripts/[a-z0-9-]+\.sh) \S+ ([a-z0-9-]+)`)
	steps := 0
	for _, plan := range plans {
		b, err := os.ReadFile(plan)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			m := step.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s:%d: a step starts with its seconds: %q", plan, i+1, line)
				continue
			}
			c := call.FindStringSubmatch(m[2])
			if c == nil {
				t.Errorf("%s:%d: no `bash scripts/NAME.sh CARRY STAGE` in %q", plan, i+1, m[2])
				continue
			}
			if !stages(c[1])[c[2]] {
				t.Errorf("%s:%d: %s has no stage %q (it has %v)", plan, i+1, c[1], c[2], slices.Sorted(maps.Keys(stages(c[1]))))
			}
			steps++
		}
	}
	if steps < len(plans) {
		t.Fatalf("read %d steps from %d plans", steps, len(plans))
	}
}

// TestGPUChainRunsAPlanAcrossCalls runs scripts/gpu-chain.sh on a plan of small steps as a lease
// would: a call runs the steps that fit in its time and says to run it again, the next call skips
// what is done, a failed step stops the chain with its log named, a chain.tgz too large to come
// back is made without the campaigns' archives, and a step without its seconds is refused.
func TestGPUChainRunsAPlanAcrossCalls(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.plan")
	marks := filepath.Join(dir, "marks")
	os.WriteFile(plan, []byte("# a comment\n\n1 echo one >>"+marks+"\n5 echo two >>"+marks+"\n1 echo three >>"+marks+"\n"), 0o644)
	run := func(limit string) (string, int) {
		cmd := exec.Command("bash", "scripts/gpu-chain.sh", plan)
		cmd.Env = append(os.Environ(), "LIMIT="+limit, "CHAIN_STATE="+filepath.Join(dir, "state"), "OUT="+filepath.Join(dir, "out"))
		out, _ := cmd.CombinedOutput()
		summary, err := os.ReadFile(filepath.Join(dir, "out", "summary.txt"))
		if err != nil {
			t.Fatalf("no summary.txt: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "out", "chain.tgz")); err != nil {
			t.Errorf("no chain.tgz: %v", err)
		}
		return string(summary), cmd.ProcessState.ExitCode()
	}
	// LIMIT 3: step 1 starts (the first of a call always does), step 2 (5 s) does not fit
	summary, code := run("3")
	if code != 0 || !strings.Contains(summary, "step 2 needs about 5 s") || !strings.Contains(summary, "run the same command again") {
		t.Fatalf("first call: exit %d, summary:\n%s", code, summary)
	}
	summary, code = run("3") // step 2 is this call's first: it starts; step 3 fits
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(summary), "chain: done") {
		t.Fatalf("second call: exit %d, summary:\n%s", code, summary)
	}
	if b, _ := os.ReadFile(marks); string(b) != "one\ntwo\nthree\n" {
		t.Errorf("the steps ran as %q, want each once, in order", b)
	}
	summary, code = run("600") // all done: nothing runs again
	if b, _ := os.ReadFile(marks); code != 0 || string(b) != "one\ntwo\nthree\n" || !strings.HasSuffix(strings.TrimSpace(summary), "chain: done") {
		t.Errorf("a third call: exit %d, marks %q, summary:\n%s", code, b, summary)
	}
	// a step's seconds corrected and a step appended: only the new step runs
	os.WriteFile(plan, []byte("# a comment\n\n9 echo one >>"+marks+"\n5 echo two >>"+marks+"\n1 echo three >>"+marks+"\n1 echo four >>"+marks+"\n"), 0o644)
	if summary, code = run("600"); code != 0 || !strings.HasSuffix(strings.TrimSpace(summary), "chain: done") {
		t.Errorf("a step appended: exit %d, summary:\n%s", code, summary)
	}
	if b, _ := os.ReadFile(marks); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Errorf("after a step was appended the steps ran as %q, want the new one alone", b)
	}
	// a finished step's command changed: refused, nothing runs
	os.WriteFile(plan, []byte("1 echo ONE >>"+marks+"\n5 echo two >>"+marks+"\n1 echo five >>"+marks+"\n"), 0o644)
	if summary, code = run("600"); code != 2 || !strings.Contains(summary, `step 1 ran as "echo one >>`) || !strings.Contains(summary, "CHAIN_STATE") {
		t.Errorf("a finished step changed: exit %d, summary:\n%s", code, summary)
	}
	if b, _ := os.ReadFile(marks); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Errorf("a plan whose finished step changed ran %q", b)
	}
	// a second plan on the same machine starts at its own step 1, not at the first plan's end
	other := filepath.Join(dir, "q.plan")
	os.WriteFile(other, []byte("1 echo q1 >>"+marks+"\n"), 0o644)
	cmd := exec.Command("bash", "scripts/gpu-chain.sh", other)
	cmd.Env = append(os.Environ(), "CHAIN_STATE="+filepath.Join(dir, "state"), "OUT="+filepath.Join(dir, "out"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "== step 1") {
		t.Errorf("a second plan after the first was done: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(marks); string(b) != "one\ntwo\nthree\nfour\nq1\n" {
		t.Errorf("a second plan: the steps ran as %q", b)
	}

	os.RemoveAll(filepath.Join(dir, "state"))
	os.WriteFile(plan, []byte("1 echo ok\n1 exit 3\n1 echo never >>"+marks+"\n"), 0o644)
	summary, code = run("600")
	if code != 1 || !strings.Contains(summary, "step 2 failed (exit 3)") || !strings.Contains(summary, "log-2 in chain.tgz") {
		t.Errorf("a failing step: exit %d, summary:\n%s", code, summary)
	}
	if b, _ := os.ReadFile(marks); strings.Contains(string(b), "never") {
		t.Error("the chain went on after a failed step")
	}

	// a chain.tgz over 16 MiB would not come back from the GPU machine: it is made again
	// without the campaigns' archives, and the summary says so
	os.RemoveAll(filepath.Join(dir, "state"))
	os.WriteFile(plan, []byte("1 head -c 17000000 /dev/urandom >$OUT/runs-big.tgz && echo verdict >$OUT/bench-x.txt\n"), 0o644)
	summary, code = run("600")
	listing, err := exec.Command("tar", "-tzf", filepath.Join(dir, "out", "chain.tgz")).Output()
	if code != 0 || err != nil || !strings.Contains(summary, "without runs-*.tgz") || strings.Contains(string(listing), "runs-big.tgz") || !strings.Contains(string(listing), "bench-x.txt") {
		t.Errorf("a chain over 16 MiB: exit %d (%v), summary:\n%s\nchain.tgz holds:\n%s", code, err, summary, listing)
	}

	// a call the machine cuts off in a step (its device time spent) still leaves the steps
	// before it in $OUT: chain.tgz and the summary are kept after every step (exit -1: killed)
	os.RemoveAll(filepath.Join(dir, "state"))
	os.RemoveAll(filepath.Join(dir, "out"))
	os.WriteFile(plan, []byte("1 echo kept >$OUT/bench-one.txt\n1 kill -9 $PPID\n"), 0o644)
	if summary, code = run("600"); code != -1 || !strings.Contains(summary, "step 1: exit 0") || strings.Contains(summary, "chain:") {
		t.Errorf("a chain killed in step 2: exit %d, summary:\n%s", code, summary)
	}
	if listing, err := exec.Command("tar", "-tzf", filepath.Join(dir, "out", "chain.tgz")).Output(); err != nil || !strings.Contains(string(listing), "out-1/bench-one.txt") {
		t.Errorf("a chain killed in step 2 left chain.tgz (%v) holding:\n%s", err, listing)
	}

	os.RemoveAll(filepath.Join(dir, "state"))
	os.WriteFile(plan, []byte("echo no seconds\n"), 0o644)
	if summary, code = run("600"); code != 2 || !strings.Contains(summary, "does not start with its seconds") {
		t.Errorf("a step without its seconds: exit %d, summary:\n%s", code, summary)
	}
}

// TestJoinCandidateScript joins a candidate to the series in a clone of the repository with
// scripts/join-candidate.sh: the patch moves into patches/, its line (name and sha256) ends
// patches/series, the plan goldens are remade and ./pipeline's tests pass on them. Refusals (no
// number, no such candidate, a number not after the series' last, a second join) exit 2 and
// change nothing. The clone holds HEAD: a change to the script is tested once committed.
func TestJoinCandidateScript(t *testing.T) {
	git := publishtest.NeedCommand(t, "git", "git")
	dir := filepath.Join(t.TempDir(), "repo")
	if out, err := exec.Command(git, "clone", "-q", ".", dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	series, err := os.ReadFile(filepath.Join(dir, "patches", "series"))
	if err != nil {
		t.Fatal(err)
	}
	nums := regexp.MustCompile(`(?m)^([0-9]{4})-\S+\.patch `).FindAllSubmatch(series, -1)
	if len(nums) == 0 {
		t.Fatal("no patches in patches/series")
	}
	var last int
	if _, err := fmt.Sscanf(string(nums[len(nums)-1][1]), "%d", &last); err != nil {
		t.Fatal(err)
	}
	next := fmt.Sprintf("%04d", last+50) // after the series and any candidate waiting
	name := next + "-test-candidate.patch"
	body := "a test candidate\n\ndiff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-x\n+y\n"
	if err := os.WriteFile(filepath.Join(dir, "patches", "candidates", name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// and one numbered inside the series, which must be renumbered before it can join
	early := "0005-test-early.patch"
	if err := os.WriteFile(filepath.Join(dir, "patches", "candidates", early), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(git, "-C", dir, "add", "patches/candidates/"+name, "patches/candidates/"+early).CombinedOutput(); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	status := func() string {
		out, err := exec.Command(git, "-C", dir, "status", "--porcelain").CombinedOutput()
		if err != nil {
			t.Fatalf("git status: %v\n%s", err, out)
		}
		return string(out)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command("bash", append([]string{"scripts/join-candidate.sh"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	before := status()
	for _, args := range [][]string{{}, {"14x"}, {"0999"}, {fmt.Sprintf("%04d", last)}, {"0005"}} {
		if code, out := run(args...); code != 2 || status() != before {
			t.Errorf("join-candidate.sh %v: exit %d, want 2 and nothing changed\n%s", args, code, out)
		}
	}
	// the real join; a candidate numbered before the test's, if one waits, stays where it is
	code, out := run(next)
	if code != 0 {
		t.Fatalf("join-candidate.sh %s: exit %d\n%s", next, code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "patches", name)); err != nil {
		t.Errorf("the patch is not in patches/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "patches", "candidates", name)); err == nil {
		t.Errorf("the patch is still in patches/candidates/")
	}
	after, err := os.ReadFile(filepath.Join(dir, "patches", "series"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(after)), "\n")
	want := fmt.Sprintf("%s sha256:%x", name, sha256.Sum256([]byte(body)))
	if lines[len(lines)-1] != want || !strings.HasPrefix(string(after), string(series)) {
		t.Errorf("patches/series ends %q, want the old series then %q", lines[len(lines)-1], want)
	}
	if !strings.Contains(status(), "pipeline/testdata/") {
		t.Errorf("the plan goldens were not remade:\n%s", status())
	}
	if !strings.Contains(out, "Still to write") {
		t.Errorf("the script does not say what is left to write:\n%s", out)
	}
	if code, out := run(next); code != 2 {
		t.Errorf("joining %s again: exit %d, want 2\n%s", next, code, out)
	}
}
