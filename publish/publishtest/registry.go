package publishtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is a running registry for a test, seen through a counting proxy.
type Registry struct {
	// Host is HOST:PORT on 127.0.0.1 (ggcr speaks plain HTTP to loopback).
	Host    string
	Counter *Counter
	// Log is the real registry's log file; empty for the in-memory one.
	Log string
}

// Counter counts the requests a registry receives, by method.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
	// Requests are "METHOD PATH" in arrival order.
	Requests []string
	// committed counts finished blob uploads by digest.
	committed map[string]int
}

// Handler wraps h, counting what passes.
func (c *Counter) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[r.Method]++
		c.Requests = append(c.Requests, r.Method+" "+r.URL.Path)
		if d := r.URL.Query().Get("digest"); d != "" && (r.Method == http.MethodPut || r.Method == http.MethodPost) && strings.Contains(r.URL.Path, "/blobs/uploads/") {
			if c.committed == nil {
				c.committed = map[string]int{}
			}
			c.committed[d]++
		}
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// Writes counts the requests that change a registry: POST, PUT, PATCH and DELETE.
func (c *Counter) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[http.MethodPost] + c.n[http.MethodPut] + c.n[http.MethodPatch] + c.n[http.MethodDelete]
}

// WriteRequests lists the write requests received so far.
func (c *Counter) WriteRequests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.Requests {
		m, _, _ := strings.Cut(r, " ")
		if m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch || m == http.MethodDelete {
			out = append(out, r)
		}
	}
	return out
}

// BlobUploads counts the blob uploads finished (the request carrying the digest), by digest.
func (c *Counter) BlobUploads() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for d, n := range c.committed {
		out[d] = n
	}
	return out
}

// Reset forgets what was counted.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.Requests, c.committed = nil, nil, nil
}

// Memory starts go-containerregistry's in-memory registry on loopback. wrap, when not nil,
// stands between the client and the registry (to refuse requests or ask for credentials).
func Memory(t testing.TB, wrap func(http.Handler) http.Handler) *Registry {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(nopLogger()))
	if wrap != nil {
		h = wrap(h)
	}
	c := &Counter{}
	srv := httptest.NewServer(c.Handler(h))
	t.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://"), Counter: c}
}

// DistributionOptions configure the real registry.
type DistributionOptions struct {
	// User and Password, when set, turn on htpasswd authentication.
	User, Password string
	// Wrap, when not nil, stands between the client and the registry.
	Wrap func(http.Handler) http.Handler
}

// Distribution starts Debian's docker-registry (distribution 2.x) on 127.0.0.1 with a
// random port and a temporary storage directory, installing the docker-registry and
// apache2-utils (htpasswd) packages with apt-get when they are missing. Without them it
// fails the test when CI=true and skips it otherwise. Requests pass through a counting
// reverse proxy, whose address is Host.
func Distribution(t testing.TB, o DistributionOptions) *Registry {
	t.Helper()
	bin := need(t, "docker-registry")
	dir := t.TempDir()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:%%d\n  secret: llbuild-test-secret\n", filepath.Join(dir, "data"))
	if o.User != "" {
		htpasswd := need(t, "htpasswd")
		out, err := exec.Command(htpasswd, "-Bbn", o.User, o.Password).Output()
		if err != nil {
			t.Fatalf("htpasswd: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "htpasswd"), out, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: llbuild-test\n    path: %s\n", filepath.Join(dir, "htpasswd"))
	}
	logPath := filepath.Join(dir, "registry.log")
	var addr string
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		conf := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(conf, []byte(fmt.Sprintf(cfg, port)), 0o644); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", conf)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(done) }()
		stop := func() {
			cmd.Process.Kill()
			<-done
		}
		addr = fmt.Sprintf("127.0.0.1:%d", port)
		if waitReady(addr, done) {
			t.Cleanup(stop)
			break
		}
		stop()
		if attempt == 2 {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("docker-registry did not come up on %s:\n%s", addr, tail(b, 2000))
		}
	}
	target, _ := url.Parse("http://" + addr)
	var h http.Handler = httputil.NewSingleHostReverseProxy(target)
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	c := &Counter{}
	srv := httptest.NewServer(c.Handler(h))
	t.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://"), Counter: c, Log: logPath}
}

// need finds a program of the registry packages, installing them if missing.
func need(t testing.TB, prog string) string {
	t.Helper()
	return NeedCommand(t, prog, "docker-registry", "apache2-utils")
}

var (
	installMu    sync.Mutex
	installTried = map[string]string{}
)

// NeedCommand returns the path of prog, installing the Debian packages pkgs with apt-get
// when it is missing (once per test binary; retried, since another test binary may hold
// dpkg's lock). Without it the test fails when CI=true and is skipped otherwise.
func NeedCommand(t testing.TB, prog string, pkgs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(prog); err == nil {
		return p
	}
	key := strings.Join(pkgs, " ")
	installMu.Lock()
	msg, tried := installTried[key]
	if !tried {
		for attempt := 0; attempt < 3; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120"}, pkgs...)...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			out, err := cmd.CombinedOutput()
			cancel()
			if err == nil {
				msg = ""
				break
			}
			msg = fmt.Sprintf("apt-get install %s: %v\n%s", key, err, tail(out, 1500))
			time.Sleep(time.Duration(attempt+1) * 2 * time.Second)
		}
		installTried[key] = msg
	}
	installMu.Unlock()
	if p, err := exec.LookPath(prog); err == nil {
		return p
	}
	if msg == "" {
		msg = fmt.Sprintf("%s is not installed (apt-get install %s)", prog, key)
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is needed: %s", prog, msg)
	}
	t.Skipf("%s is missing: %s", prog, msg)
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitReady polls /v2/ until the registry answers (200, or 401 with auth on).
func waitReady(addr string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// BasicAuth asks for HTTP Basic credentials user:password before passing requests to h, as
// a registry with htpasswd authentication does; a wrong pair gets 401 with a body that
// quotes the credentials received, as a careless registry might, so tests can check that
// they are not repeated.
func BasicAuth(user, password string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="llbuild-test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":"got %s:%s (%s)"}]}`, u, p, r.Header.Get("Authorization"))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// Refuse answers requests with method whose path contains pathPart with status and an OCI
// error body carrying code and message; everything else goes to h.
func Refuse(method, pathPart string, status int, code, message string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == method && strings.Contains(r.URL.Path, pathPart) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				if code != "" {
					fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, code, message)
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}
