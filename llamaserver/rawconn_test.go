package llamaserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A pooled client's whole-answer calls go over one kept-alive connection, with the request
// as Go's server reads it (method, path, body, JSON type, the key); an error answer is a
// *StatusError with llama-server's message, and a stream still works beside them.
func TestRawPoolKeepsOneConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("Authorization") != "Bearer k":
			http.Error(w, `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`, 401)
		case r.URL.Path == "/tokenize" && r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"tokens":[`+strconv.Itoa(len(b))+`]}`)
		case r.URL.Path == "/props" && r.Method == http.MethodGet && len(b) == 0:
			io.WriteString(w, `{"total_slots":3}`)
		default:
			http.Error(w, `{"error":{"code":400,"message":"no such thing","type":"invalid_request_error"}}`, 400)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(srv.URL, "k", WithPool(1))
	if c.raw == nil {
		t.Fatalf("WithPool on %s kept Go's transport for whole answers", srv.URL)
	}
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "abc"})
		if err != nil || len(ids) != 1 || ids[0] == 0 {
			t.Fatalf("call %d: %v %v", i, ids, err)
		}
		var props struct {
			TotalSlots int `json:"total_slots"`
		}
		if err := c.GetJSON(ctx, "/props", &props); err != nil || props.TotalSlots != 3 {
			t.Fatalf("GET /props: %+v %v", props, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("40 calls opened %d connections, want 1 kept alive", n)
	}
	err := c.PostJSON(ctx, "/nothing", map[string]int{"a": 1}, &struct{}{})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 400 || se.Message() != "no such thing" || se.Path != "/nothing" {
		t.Errorf("error answer: %v, want a *StatusError 400 with llama-server's message", err)
	}
	bad := NewClient(srv.URL, "wrong", WithPool(1))
	if _, err := bad.Tokenize(ctx, TokenizeRequest{Content: "x"}); !errors.As(err, &se) || se.Status != 401 {
		t.Errorf("wrong key: %v, want a 401 *StatusError", err)
	}
}

// rawServer answers each connection's requests by answer(n), n counting requests on that
// connection, and closes the connection after answer's close; accepted counts connections.
func rawServer(t *testing.T, answer func(n int, req string) (resp string, closeAfter bool)) (string, *atomic.Int32) {
	t.Helper()
	base, accepted, _ := rawServerClosing(t, answer)
	return base, accepted
}

// rawServerClosing is rawServer with closeAll, which closes every connection it accepted so
// far, as llama-server's idle timeout closes its kept-alive ones.
func rawServerClosing(t *testing.T, answer func(n int, req string) (resp string, closeAfter bool)) (base string, accepted *atomic.Int32, closeAll func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted = new(atomic.Int32)
	var mu sync.Mutex
	var open []net.Conn
	closeAll = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					resp, closeAfter := answer(n, req.Method+" "+req.URL.Path+" "+string(b))
					if _, err := io.WriteString(c, resp); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return "http://" + l.Addr().String(), accepted, closeAll
}

func TestRawPoolAnswers(t *testing.T) {
	ok := func(body string, headers ...string) string {
		return "HTTP/1.1 200 OK\r\n" + strings.Join(headers, "") + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	ctx := context.Background()
	t.Run("Connection: close (llama-server's 100th answer) takes a new connection", func(t *testing.T) {
		base, accepted := rawServer(t, func(n int, _ string) (string, bool) {
			if n == 1 {
				return ok(`{"tokens":[2]}`, "Connection: close\r\n"), true
			}
			return ok(`{"tokens":[1]}`), false
		})
		c := NewClient(base, "", WithPool(1))
		for i, want := range []int{1, 2, 1} {
			ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "a"})
			if err != nil || len(ids) != 1 || ids[0] != want {
				t.Fatalf("call %d: %v %v, want [%d]", i, ids, err, want)
			}
		}
		if n := accepted.Load(); n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
	})
	t.Run("a kept connection the server closed while idle is replaced, the request sent again", func(t *testing.T) {
		base, accepted := rawServer(t, func(n int, _ string) (string, bool) {
			return ok(`{"tokens":[7]}`), true // closed without saying so, as an idle timeout does
		})
		c := NewClient(base, "", WithPool(1))
		for i := 0; i < 3; i++ {
			time.Sleep(20 * time.Millisecond) // the close reaches this side
			if ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "a"}); err != nil || len(ids) != 1 || ids[0] != 7 {
				t.Fatalf("call %d: %v %v", i, ids, err)
			}
		}
		if n := accepted.Load(); n != 3 {
			t.Errorf("%d connections, want 3", n)
		}
	})
	t.Run("chunked, and a body that runs to the close", func(t *testing.T) {
		base, _ := rawServer(t, func(n int, _ string) (string, bool) {
			if n == 0 {
				return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"tok\r\n9\r\nens\":[3]}\r\n0\r\n\r\n", false
			}
			return "HTTP/1.1 200 OK\r\n\r\n{\"tokens\":[4]}", true
		})
		c := NewClient(base, "", WithPool(1))
		for _, want := range []int{3, 4} {
			if ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "a"}); err != nil || len(ids) != 1 || ids[0] != want {
				t.Fatalf("%v %v, want [%d]", ids, err, want)
			}
		}
	})
	t.Run("an answer that breaks off is a *ReadError", func(t *testing.T) {
		base, _ := rawServer(t, func(int, string) (string, bool) {
			return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"tokens\":", true
		})
		_, err := NewClient(base, "", WithPool(1)).Tokenize(ctx, TokenizeRequest{Content: "a"})
		var re *ReadError
		if !errors.As(err, &re) {
			t.Errorf("%v, want a *ReadError", err)
		}
	})
	t.Run("no server is a *ConnError", func(t *testing.T) {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		base := "http://" + l.Addr().String()
		l.Close()
		_, err := NewClient(base, "", WithPool(1)).Tokenize(ctx, TokenizeRequest{Content: "a"})
		var ce *ConnError
		if !errors.As(err, &ce) {
			t.Errorf("%v, want a *ConnError", err)
		}
	})
	t.Run("a canceled call returns at once with the context's error", func(t *testing.T) {
		base, _ := rawServer(t, func(int, string) (string, bool) {
			time.Sleep(5 * time.Second)
			return ok(`{}`), true
		})
		c := NewClient(base, "", WithPool(1))
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		t0 := time.Now()
		_, err := c.Tokenize(cctx, TokenizeRequest{Content: "a"})
		if !errors.Is(err, context.Canceled) || time.Since(t0) > 2*time.Second {
			t.Errorf("canceled call: %v after %v, want context.Canceled at once", err, time.Since(t0))
		}
		dctx, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		defer stop()
		if _, err := c.Tokenize(dctx, TokenizeRequest{Content: "a"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call past its deadline: %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("what is not plain http keeps Go's transport", func(t *testing.T) {
		for _, base := range []string{"https://127.0.0.1:1", "http://127.0.0.1:1/prefix", "http://u:p@127.0.0.1:1", "unix:///run/x.sock"} {
			if NewClient(base, "", WithPool(1)).raw != nil {
				t.Errorf("%s: raw connections, want Go's transport", base)
			}
		}
		if NewClient("http://127.0.0.1:1", "", WithPool(1), WithHTTPClient(http.DefaultClient)).raw != nil {
			t.Error("WithHTTPClient after WithPool: raw connections, want the given client for every request")
		}
		t.Setenv(TransportEnv, "go") // what scripts/echo-bench.sh AB=transport compares with
		if NewClient("http://127.0.0.1:1", "", WithPool(1)).raw != nil {
			t.Errorf("%s=go: raw connections, want Go's transport", TransportEnv)
		}
	})
}

// Calls from many goroutines at once each take a connection of their own: every answer is
// its own request's, and no more connections stay open than the pool keeps.
func TestRawPoolConcurrentCalls(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in TokenizeRequest
		json.NewDecoder(r.Body).Decode(&in)
		time.Sleep(time.Millisecond)
		fmt.Fprintf(w, `{"tokens":[%s]}`, in.Content)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(srv.URL, "", WithPool(2)) // keeps 12
	var wg sync.WaitGroup
	errs := make(chan error, 16*25)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				want := g*1000 + i
				ids, err := c.Tokenize(context.Background(), TokenizeRequest{Content: strconv.Itoa(want)})
				if err != nil || len(ids) != 1 || ids[0] != want {
					errs <- fmt.Errorf("goroutine %d call %d: %v %v, want [%d]", g, i, ids, err, want)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conns.Load(); n < 2 || n > 16*25/2 {
		t.Errorf("%d connections for 400 calls from 16 goroutines, want them kept and reused", n)
	}
	if len(c.raw.idle) > c.raw.max {
		t.Errorf("%d idle connections kept, more than the pool's %d", len(c.raw.idle), c.raw.max)
	}
}

// TestRawPoolSeveralStaleConnections: llama-server closes every idle kept-alive connection after
// its idle timeout, so a pool that kept several finds them all closed at once. A call that finds
// one closed must not take another stale one for its second try (a 503 "closed the connection"
// under concurrent traffic, seen in TestScoresDoNotDependOnTraffic): it is answered on a new
// connection, and the pool keeps none of the dead ones.
func TestRawPoolSeveralStaleConnections(t *testing.T) {
	base, accepted, closeAll := rawServerClosing(t, func(int, string) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", false
	})
	p := newRawPool(base, "", 4)
	ctx := context.Background()
	// four calls at once leave four kept-alive connections in the pool
	var wg, got sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		got.Add(1)
		go func() {
			defer wg.Done()
			rc, _, err := p.get(ctx, false)
			got.Done()
			if err != nil {
				t.Error(err)
				return
			}
			<-start
			if _, _, _, _, err := rc.exchange("GET", p.host, "/props", "", nil, 0); err != nil {
				t.Error(err)
			}
			p.put(rc)
		}()
	}
	got.Wait() // four connections taken before any goes back
	close(start)
	wg.Wait()
	if n := len(p.idle); n != 4 {
		t.Fatalf("%d idle connections, want 4", n)
	}
	closeAll() // the server's idle timeout: every connection closed
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < 3; i++ {
		status, body, err := p.do(ctx, "GET", "/props", nil)
		if err != nil || status != 200 || string(body) != "{}" {
			t.Fatalf("call %d after the server closed its idle connections: %d %q %v", i, status, body, err)
		}
	}
	if n := accepted.Load(); n != 5 {
		t.Errorf("%d connections, want 5: the four closed ones and one new one that answered the three calls", n)
	}
}

// With SpinEnv a call polls its connection before it parks: the answers are the same whether
// they come at once, within the spin, after it, in two parts, or not at all (a connection the
// server closed is replaced, as without the spin), and a bad value is no spin.
func TestRawPoolSpinReadsTheSameAnswers(t *testing.T) {
	ok := func(body string) string {
		return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	delays := []time.Duration{0, 5 * time.Millisecond, 60 * time.Millisecond}
	base, accepted := rawServer(t, func(n int, req string) (string, bool) {
		if n < len(delays) {
			time.Sleep(delays[n])
			return ok(`{"tokens":[` + strconv.Itoa(n) + `]}`), false
		}
		return "", true // closed without an answer: as an idle timeout does
	})
	t.Setenv(SpinEnv, "20ms")
	c := NewClient(base, "", WithPool(1))
	if c.raw == nil || c.raw.spin != 20*time.Millisecond {
		t.Fatalf("%s=20ms: pool %+v", SpinEnv, c.raw)
	}
	ctx := context.Background()
	for i := range delays {
		ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "a"})
		if err != nil || len(ids) != 1 || ids[0] != i {
			t.Fatalf("call %d (answer after %v): %v %v", i, delays[i], ids, err)
		}
	}
	// the fourth request finds its connection closed: sent again on a new one, answered there
	ids, err := c.Tokenize(ctx, TokenizeRequest{Content: "a"})
	if err != nil || len(ids) != 1 || ids[0] != 0 || accepted.Load() != 2 {
		t.Fatalf("after the server closed the connection: %v %v, %d connections (want [0], 2)", ids, err, accepted.Load())
	}
	for _, bad := range []string{"fast", "-1ms", "1s"} {
		t.Setenv(SpinEnv, bad)
		if c := NewClient(base, "", WithPool(1)); c.raw.spin != 0 {
			t.Errorf("%s=%s: spin %v, want none", SpinEnv, bad, c.raw.spin)
		}
	}
}

// spinReadable returns when the first byte comes, not when its time is up, and at once on a
// connection the peer closed or one without a descriptor.
func TestSpinReadableReturnsWithTheFirstByte(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(peer)
			return
		}
		peer <- c
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := <-peer
	returns := func(what string, conn net.Conn) {
		t.Helper()
		done := make(chan struct{})
		go func() { spinReadable(conn, time.Hour); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still spinning after 30 s", what)
		}
	}
	go func() { time.Sleep(10 * time.Millisecond); p.Write([]byte("x")) }()
	returns("a byte after 10 ms", c)
	b := make([]byte, 1)
	if n, err := c.Read(b); n != 1 || b[0] != 'x' {
		t.Fatalf("the byte the spin saw: %d %q %v", n, b, err) // peeked, not taken
	}
	p.Close()
	returns("the peer closed", c)
	a, z := net.Pipe()
	defer a.Close()
	defer z.Close()
	returns("a pipe (no descriptor)", a)
}
