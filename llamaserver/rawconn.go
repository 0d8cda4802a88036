package llamaserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rawPool makes the calls whose whole answer is read (/completion without a stream,
// /tokenize, /props ...) over kept-alive HTTP/1.1 connections, written and read on the
// caller's goroutine. Go's transport hands every request to a connection's writing
// goroutine and its answer back from a reading one; on a loaded host each hand-off can wait
// for a thread to wake, and the shim's scoring call through it took 0.17-0.25 ms longer than
// the same request on one connection read in place (a 2-core host, the patched llama-server
// answering 128 prompt logprobs in 2.3 ms: BenchmarkWholeAnswerCall). Streams keep Go's
// transport.
type rawPool struct {
	addr string // host:port to dial
	host string // the Host header
	key  string
	max  int
	mu   sync.Mutex
	idle []*rawConn
	// spin is how long a call polls its connection for the answer instead of parking
	// (SpinEnv); 0 parks at once
	spin time.Duration
	// dials counts the connections opened
	dials atomic.Int64
}

type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	buf []byte // the request being written
}

// newRawPool returns a pool for base when it is a plain http://host[:port] URL (llama-server
// on loopback or a private address), else nil: anything else keeps Go's transport.
func newRawPool(base, key string, max int) *rawPool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || (u.Path != "" && u.Path != "/") || u.Host == "" {
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &rawPool{addr: addr, host: u.Host, key: key, max: max}
}

// get returns a kept-alive connection (reused true) or, when there is none or fresh is set, a
// new one.
func (p *rawPool) get(ctx context.Context, fresh bool) (*rawConn, bool, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 && !fresh {
		rc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return rc, true, nil
	}
	p.mu.Unlock()
	var d net.Dialer
	p.dials.Add(1)
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 32<<10)}, false, nil
}

// dropIdle closes the kept-alive connections: one found closed by the server says the others,
// idle as long, were closed with it (llama-server's idle timeout closes them all).
func (p *rawPool) dropIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, rc := range idle {
		rc.c.Close()
	}
}

func (p *rawPool) put(rc *rawConn) {
	p.mu.Lock()
	if len(p.idle) < p.max {
		p.idle = append(p.idle, rc)
		rc = nil
	}
	p.mu.Unlock()
	if rc != nil {
		rc.c.Close()
	}
}

// do sends one request and reads its whole answer. A reused connection that the server
// had closed while it was idle (llama-server closes kept-alive connections after a few
// seconds or 100 requests) gives no byte of an answer: the request is sent again once on
// a new connection, as Go's transport does for an idempotent request, and the other kept
// connections, idle as long, are closed rather than tried in turn. Errors are a
// *ConnError (no answer) or a *ReadError (an answer that broke off).
func (p *rawPool) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		rc, reused, err := p.get(ctx, attempt > 0)
		if err != nil {
			return 0, nil, &ConnError{Method: method, Path: path, Err: err}
		}
		if dl, ok := ctx.Deadline(); ok {
			rc.c.SetDeadline(dl)
		} else {
			rc.c.SetDeadline(time.Time{})
		}
		// a canceled context unblocks the read at once (a goroutine only then)
		stop := context.AfterFunc(ctx, func() { rc.c.SetDeadline(time.Unix(1, 0)) })
		status, data, keep, answered, err := rc.exchange(method, p.host, path, p.key, body, p.spin)
		watching := stop()
		if err != nil {
			rc.c.Close()
			cerr := ctx.Err()
			if dl, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(dl) {
				cerr = context.DeadlineExceeded // the connection's deadline fired first
			}
			if cerr != nil {
				err = cerr
			}
			switch {
			case !answered && reused && attempt == 0 && cerr == nil:
				p.dropIdle()
				continue
			case !answered:
				return 0, nil, &ConnError{Method: method, Path: path, Err: err}
			default:
				return 0, nil, &ReadError{Path: path, Err: err}
			}
		}
		if keep && watching {
			p.put(rc)
		} else {
			rc.c.Close()
		}
		return status, data, nil
	}
}

var errMalformed = errors.New("malformed HTTP answer")

// exchange writes the request and reads the answer: its status, its body, whether the
// connection may carry another request, and whether any byte of an answer came.
func (rc *rawConn) exchange(method, host, path, key string, body []byte, spin time.Duration) (status int, data []byte, keep, answered bool, err error) {
	b := rc.buf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: llbuild\r\n"...)
	if key != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, key...)
		b = append(b, "\r\n"...)
	}
	if body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	rc.buf = b
	if _, err := rc.c.Write(b); err != nil {
		return 0, nil, false, false, err
	}
	if len(b) > 256<<10 {
		rc.buf = nil // do not keep a big request's buffer alive with the connection
	}

	if spin > 0 && rc.br.Buffered() == 0 {
		spinReadable(rc.c, spin)
	}
	keep = true
	for {
		line, err := rc.br.ReadSlice('\n')
		if len(line) == 0 && err != nil {
			return 0, nil, false, false, err
		}
		answered = true
		if err != nil {
			return 0, nil, false, true, err
		}
		proto, rest, _ := strings.Cut(strings.TrimRight(string(line), "\r\n"), " ")
		code, _, _ := strings.Cut(rest, " ")
		status, err = strconv.Atoi(code)
		if err != nil || !strings.HasPrefix(proto, "HTTP/1.") {
			return 0, nil, false, true, fmt.Errorf("%w: status line %q", errMalformed, line)
		}
		if proto == "HTTP/1.0" {
			keep = false
		}
		if status >= 200 || status == 101 {
			break
		}
		// 1xx: skip its headers, read the real answer
		if err := skipHeaders(rc.br); err != nil {
			return 0, nil, false, true, err
		}
	}
	length, chunked := int64(-1), false
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, true, err
		}
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			break
		}
		name, value, ok := strings.Cut(string(line), ":")
		if !ok {
			return 0, nil, false, true, fmt.Errorf("%w: header %q", errMalformed, line)
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(name, "Content-Length"):
			if length, err = strconv.ParseInt(value, 10, 64); err != nil || length < 0 || length >= 1<<30 {
				return 0, nil, false, true, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
		case strings.EqualFold(name, "Transfer-Encoding"):
			chunked = strings.EqualFold(value, "chunked")
		case strings.EqualFold(name, "Connection"):
			if strings.EqualFold(value, "close") {
				keep = false
			}
		}
	}
	switch {
	case method == "HEAD" || status == 204 || status == 304:
	case chunked:
		if data, err = io.ReadAll(httputil.NewChunkedReader(rc.br)); err == nil {
			err = skipHeaders(rc.br) // the trailer
		}
	case length >= 0:
		data = make([]byte, length)
		_, err = io.ReadFull(rc.br, data)
	default: // the body runs to the end of the connection
		data, err = io.ReadAll(rc.br)
		keep = false
	}
	if err != nil {
		return 0, nil, false, true, err
	}
	return status, data, keep, true, nil
}

func skipHeaders(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if strings.TrimRight(string(line), "\r\n") == "" {
			return nil
		}
	}
}
