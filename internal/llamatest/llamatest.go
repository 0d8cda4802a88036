package llamatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llbuild/llbuild/internal/sidapt"
)

var (
	once      sync.Once
	onceBin   Binary
	onceErr   error
	setupTime = 10 * time.Minute
)

// Server returns the cached sid llama-server, downloading it on first use.
// When it cannot be had, the test fails if CI=true and is skipped otherwise.
//
// Code that launches llama-server itself, such as the serving shim, runs
// Binary.Path as if it were an installed llama-server:
//
//	bin := llamatest.Server(t)
//	cmd := exec.Command(bin.Path, "-m", model, "--port", port)
func Server(t testing.TB) Binary {
	t.Helper()
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTime)
		defer cancel()
		if path := os.Getenv("LLBUILD_LLAMA_SERVER"); path != "" {
			// A llama-server built elsewhere (a CUDA build on a GPU machine with no network),
			// run as it is.
			onceBin, onceErr = External(ctx, path)
			if onceErr == nil {
				t.Logf("llamatest: %s at %s (LLBUILD_LLAMA_SERVER)", onceBin.Version, path)
			}
			return
		}
		onceBin, onceErr = Ensure(ctx, CacheDir())
		if onceErr == nil {
			t.Logf("llamatest: %s from Debian %s llama.cpp-tools %s (cache %s)", onceBin.Version, Suite, onceBin.Packages["llama.cpp-tools"], onceBin.Root)
		}
	})
	if onceErr != nil {
		Unavailable(t, fmt.Sprintf("no llama-server: %v", onceErr))
	}
	return onceBin
}

// Unavailable fails the test when CI=true and skips it otherwise, for a
// test whose real dependency cannot be had here.
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(reason)
	}
	t.Skip(reason)
}

// Instance is a running llama-server.
type Instance struct {
	// URL is the server's base URL, such as http://127.0.0.1:40123.
	URL string
	// Addr is host:port.
	Addr string
	// Binary is the llama-server that runs.
	Binary Binary
	// Log is the file that receives the server's stdout and stderr.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs llama-server on modelPath on a free loopback port with
// extraArgs appended, waits until GET /health answers 200 and stops the
// server when the test ends. Its output goes to a log file whose tail is
// reported if it does not come up.
//
//	model := llamatest.TinyModel(t, gguf.DefaultTiny())
//	srv := llamatest.Start(t, model, "-c", "512", "-t", "2")
//	resp, err := http.Post(srv.URL+"/completion", "application/json", body)
func Start(t testing.TB, modelPath string, extraArgs ...string) *Instance {
	t.Helper()
	return StartWith(t, Server(t), modelPath, extraArgs...)
}

// StartWith is Start with a llama-server of the caller's (External): one a build made, such as
// enginetest.PatchedServer's.
func StartWith(t testing.TB, b Binary, modelPath string, extraArgs ...string) *Instance {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		inst, err := start(t, b, modelPath, extraArgs)
		if err == nil {
			return inst
		}
		lastErr = err
		// Only a port taken between choosing and binding is worth another go.
		if !errors.Is(err, errBind) {
			break
		}
	}
	t.Fatalf("starting llama-server: %v", lastErr)
	return nil
}

var errBind = errors.New("port in use")

func start(t testing.TB, b Binary, modelPath string, extraArgs []string) (*Instance, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(t.TempDir(), "llama-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log: %w", err)
	}
	args := append([]string{"-m", modelPath, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, extraArgs...)
	cmd := exec.Command(b.Path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("running %s: %w", b.Path, err)
	}
	inst := &Instance{URL: "http://" + addr, Addr: addr, Binary: b, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		inst.err = cmd.Wait()
		logFile.Close()
		close(inst.done)
	}()
	t.Cleanup(inst.stop)
	if err := inst.waitHealthy(2 * time.Minute); err != nil {
		inst.stop()
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log, []byte("couldn't bind")) || bytes.Contains(log, []byte("Address already in use")) {
			return nil, fmt.Errorf("%w: %v", errBind, err)
		}
		return nil, fmt.Errorf("%v; log %s:\n%s", err, logPath, sidapt.Tail(log))
	}
	return inst, nil
}

func (inst *Instance) waitHealthy(limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-inst.done:
			return fmt.Errorf("llama-server exited before becoming healthy: %v", inst.err)
		default:
		}
		resp, err := client.Get(inst.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("llama-server not healthy after %v", limit)
}

// stop sends SIGTERM to the server's process group, then SIGKILL if it has
// not exited within five seconds.
func (inst *Instance) stop() {
	select {
	case <-inst.done:
		return
	default:
	}
	pgid := inst.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-inst.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-inst.done
	}
}

// Stop stops the server now instead of at the end of the test.
func (inst *Instance) Stop() { inst.stop() }

// Done is closed when the server process has exited.
func (inst *Instance) Done() <-chan struct{} { return inst.done }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// External describes a llama-server binary that is already on the machine.
func External(ctx context.Context, path string) (Binary, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Binary{}, err
	}
	out, err := exec.CommandContext(ctx, abs, "--version").CombinedOutput()
	if err != nil {
		return Binary{}, fmt.Errorf("%s --version: %w: %s", abs, err, out)
	}
	version := ""
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "version:") {
			version = strings.TrimSpace(line)
		}
	}
	return Binary{Path: abs, Argv: []string{abs}, Version: version}, nil
}
