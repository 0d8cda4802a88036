package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ownShim starts a shim with its own llama-server, for tests that kill or
// starve it.
func ownShim(t *testing.T, opts Options) *testShim {
	t.Helper()
	serverPath := llamaServer(t)
	sharedShim(t) // writes the model
	ts, err := startShim(serverPath, sharedModel, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.stop)
	return ts
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestKilledServerAnswers503ThenRecovers(t *testing.T) {
	// The backoff keeps llama-server down long enough for a completion sent after /health
	// said 503 to arrive while it still is: a restart within 200 ms once raced the request.
	ts := ownShim(t, Options{MinBackoff: time.Second})
	old := ts.srv.sup.PID()
	if err := ts.srv.sup.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	saw503, answered503 := false, false
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st := getStatus(t, ts.URL+"/health")
		if st == 503 {
			saw503 = true
			var out cmplResp
			got := ts.post(t, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 1}, &out)
			switch {
			case got == 503 && out.Error != nil:
				answered503 = true
			case got == 200 && ts.srv.sup.PID() != old:
				// the restart finished between the two requests
			default:
				t.Errorf("completion while restarting: status %d, error %+v; want 503 with an error object", got, out.Error)
			}
		}
		if st == 200 && saw503 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !saw503 {
		t.Fatal("never saw 503 after killing llama-server")
	}
	if !answered503 {
		t.Error("no completion was answered 503 while llama-server restarted")
	}
	if getStatus(t, ts.URL+"/health") != 200 {
		t.Fatalf("not healthy again within a minute\n%s", ts.log)
	}
	if ts.srv.sup.PID() == old {
		t.Errorf("llama-server pid %d unchanged after restart", old)
	}
	ch := ts.complete(t, map[string]any{"prompt": "hello", "max_tokens": 2, "logprobs": 1, "echo": true})
	if len(ch.Choices) != 1 || ch.Choices[0].Logprobs == nil {
		t.Errorf("completion after restart: %+v", ch)
	}
	if log := ts.log.String(); !strings.Contains(log, "llama-server exited; restarting") || !strings.Contains(log, "signal: killed") {
		t.Errorf("log does not record the exit and its reason:\n%s", log)
	}
}

func TestStopEndsLlamaServer(t *testing.T) {
	ts := ownShim(t, Options{})
	pid := ts.srv.sup.PID()
	ts.stop()
	if err := syscall.Kill(pid, 0); err == nil {
		// A zombie would still answer; /proc says whether it is gone.
		if b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat")); len(b) > 0 && !bytes.Contains(b, []byte(") Z")) {
			t.Errorf("llama-server %d still running after the shim stopped", pid)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestSlotWaitTimesOutWith503(t *testing.T) {
	ts := ownShim(t, Options{SlotWait: 300 * time.Millisecond})
	u := ts.upstream(t)
	// Hold every slot, as long-running requests would.
	var held []int
	for range u.info.TotalSlots {
		s, err := u.acquire(context.Background(), time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	defer func() {
		for _, s := range held {
			u.release(s, nil)
		}
	}()
	start := time.Now()
	var out cmplResp
	st := ts.post(t, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 1}, &out)
	if st != 503 || out.Error == nil {
		t.Errorf("status %d, error %+v; want 503 with an error object", st, out.Error)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to answer", d)
	}
}

// TestClientDisconnectCancelsUpstream starts a long generation, goes away,
// and checks that llama-server's slot stops processing.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	ts := ownShim(t, Options{})
	u := ts.upstream(t)
	for _, stream := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		body, _ := json.Marshal(map[string]any{"prompt": "the", "max_tokens": 100000, "stream": stream, "temperature": 1})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", bytes.NewReader(body))
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("stream %v: status %d: %s", stream, resp.StatusCode, b)
				}
			}
		}()
		if !waitProcessing(t, u, true, 20*time.Second) {
			cancel()
			t.Fatalf("stream %v: llama-server never started processing", stream)
		}
		cancel()
		if !waitProcessing(t, u, false, 20*time.Second) {
			t.Errorf("stream %v: llama-server still processing 20 s after the client left", stream)
		}
	}
}

// waitProcessing polls llama-server's /slots until some slot's
// is_processing equals want.
func waitProcessing(t *testing.T, u *upstream, want bool, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var slots []struct {
			IsProcessing bool `json:"is_processing"`
		}
		if err := u.getJSON(context.Background(), "/slots", &slots); err != nil {
			t.Fatalf("GET /slots: %v", err)
		}
		any := false
		for _, s := range slots {
			any = any || s.IsProcessing
		}
		if any == want {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// helperRun is the test binary acting as a shim process, for tests that
// kill the shim itself.
func helperRun() {
	opts := Options{
		ServerPath: os.Getenv("SHIM_HELPER_SERVER"),
		ServerArgs: []string{"-m", os.Getenv("SHIM_HELPER_MODEL"), "-t", "1"},
		Addr:       os.Getenv("SHIM_HELPER_ADDR"),
	}
	if err := Run(context.Background(), opts, nil); err != nil {
		os.Exit(1)
	}
}

// TestKilledShimTakesLlamaServerAlong SIGKILLs a shim process, which
// cannot stop llama-server itself: llama-server must not outlive it.
func TestKilledShimTakesLlamaServerAlong(t *testing.T) {
	serverPath := llamaServer(t)
	sharedShim(t) // writes the model
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + itoa(port)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SHIM_TEST_HELPER=run", "SHIM_HELPER_SERVER="+serverPath, "SHIM_HELPER_MODEL="+sharedModel, "SHIM_HELPER_ADDR="+addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(time.Minute)
	for getStatus(t, "http://"+addr+"/health") != 200 {
		if time.Now().After(deadline) {
			t.Fatal("helper shim not healthy after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	child := childOf(t, cmd.Process.Pid)
	if child == 0 {
		t.Fatal("no llama-server child of the shim process")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("llama-server %d outlived its killed shim", child)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// childOf returns a child process of pid, from /proc.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ")".
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) > 1 && f[1] == itoa(pid) {
			return n
		}
	}
	return 0
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
	if err != nil {
		return false
	}
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	f := strings.Fields(string(rest))
	return len(f) > 0 && f[0] != "Z"
}

// /health tells the truth about llama-server itself (issue 27, item 6): a stopped (hung)
// llama-server is 503 within the health timeout although the supervisor still holds it, and
// 200 again once it runs.
func TestHealthFollowsLlamaServerItself(t *testing.T) {
	ts := ownShim(t, Options{})
	if got := getStatus(t, ts.URL+"/health"); got != 200 {
		t.Fatalf("health before = %d", got)
	}
	if err := ts.srv.sup.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// the signal takes effect asynchronously: wait until the process is stopped
	stat := "/proc/" + strconv.Itoa(ts.srv.sup.PID()) + "/stat"
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile(stat)
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "T" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t0 := time.Now()
	got := getStatus(t, ts.URL+"/health")
	took := time.Since(t0)
	if err := ts.srv.sup.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got != 503 || took > healthTimeout+2*time.Second {
		t.Errorf("health of a stopped llama-server = %d after %v, want 503 within about %v", got, took, healthTimeout)
	}
	if got := getStatus(t, ts.URL+"/health"); got != 200 {
		t.Errorf("health after SIGCONT = %d, want 200", got)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
