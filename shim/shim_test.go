package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/internal/testwriter"
)

// testShim is a shim in front of a real llama-server (Debian sid's) on a
// tiny random-weight model, shared by the tests of this binary.
type testShim struct {
	URL    string
	srv    *Server
	cancel context.CancelFunc
	done   chan error
	log    *testwriter.Buffer

	stopOnce sync.Once
	runErr   error
}

var (
	sharedOnce  sync.Once
	shared      *testShim
	sharedErr   error
	modelDir    string
	sharedModel string
)

func TestMain(m *testing.M) {
	switch os.Getenv("SHIM_TEST_HELPER") {
	case "run":
		helperRun()
		return
	case "replay":
		replayRun()
		return
	}
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if benchShim != nil {
		benchShim.stop()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	if modelDir != "" {
		os.RemoveAll(modelDir)
	}
	os.Exit(code)
}

// llamaServer is the llama-server the tests run: Debian sid's from
// llamatest, or the one $SHIM_LLAMA_SERVER names (an upstream build, say),
// to hold the shim to the contract against another llama-server version.
func llamaServer(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHIM_LLAMA_SERVER"); p != "" {
		return p
	}
	return llamatest.Server(t).Path
}

// sharedShim returns the shared shim, starting it on first use.
func sharedShim(t testing.TB) *testShim {
	t.Helper()
	serverPath := llamaServer(t)
	sharedOnce.Do(func() {
		modelDir, sharedErr = os.MkdirTemp("", "shim-model-")
		if sharedErr != nil {
			return
		}
		model := filepath.Join(modelDir, "tiny.gguf")
		if sharedErr = gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); sharedErr != nil {
			return
		}
		sharedModel = model
		shared, sharedErr = startShim(serverPath, model, Options{})
	})
	if sharedErr != nil {
		t.Fatalf("starting the shared shim: %v", sharedErr)
	}
	return shared
}

// startShim runs Run on a free loopback port and waits until /health
// answers 200.
func startShim(serverPath, model string, opts Options) (*testShim, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	opts.ServerPath = serverPath
	opts.ServerArgs = append([]string{"-m", model, "-c", "8192", "-np", "2", "-t", "1", "--no-webui"}, opts.ServerArgs...)
	// SHIM_SERVER_ARGS adds llama-server arguments, e.g. "-ngl 99" for a CUDA build.
	opts.ServerArgs = append(opts.ServerArgs, strings.Fields(os.Getenv("SHIM_SERVER_ARGS"))...)
	opts.Listener = l
	ts := &testShim{URL: "http://" + l.Addr().String(), done: make(chan error, 1), log: &testwriter.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	logger := slog.New(slog.NewTextHandler(ts.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts.srv = newServer(opts, logger)
	go func() { ts.done <- runServer(ctx, ts.srv, l) }()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ts.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return ts, nil
			}
		}
		select {
		case err := <-ts.done:
			return nil, fmt.Errorf("shim stopped: %v\n%s", err, ts.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	ts.stop()
	return nil, fmt.Errorf("shim not healthy after 2 minutes\n%s", ts.log.String())
}

func (ts *testShim) stop() {
	ts.stopOnce.Do(func() {
		ts.cancel()
		ts.runErr = <-ts.done
	})
}

// post sends v as JSON and decodes the answer into out (when not nil),
// returning the status.
func (ts *testShim) post(t testing.TB, path string, v any, out any) int {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return ts.postRaw(t, path, body, out)
}

func (ts *testShim) postRaw(t testing.TB, path string, body []byte, out any) int {
	t.Helper()
	resp, err := http.Post(ts.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("decoding %s answer %q: %v", path, data, err)
		}
	}
	return resp.StatusCode
}
