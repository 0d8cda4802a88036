package shim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/llbuild/llbuild/llamaserver"
)

// Options configure Run.
type Options struct {
	// ServerPath is the llama-server executable.
	ServerPath string
	// ServerArgs are llama-server's arguments (model, context, slots),
	// without --host and --port: the shim adds a private loopback port.
	ServerArgs []string
	// Env is llama-server's environment; nil means the shim's own.
	Env []string
	// Dir is llama-server's working directory; relative paths in
	// ServerArgs resolve against it.
	Dir string
	// Addr is where the shim listens; empty means 127.0.0.1:8080.
	Addr string
	// Listener, if set, is used instead of listening on Addr.
	Listener net.Listener
	// APIKey, if set, must come with every request except GET /health as
	// "Authorization: Bearer KEY".
	APIKey string
	// ModelName is the model id the API reports; empty means
	// llama-server's model alias.
	ModelName string
	// NoPromptLogprobs, when set, is why this server keeps no prompt-logprob contract (a bundle
	// of a build made with the plain series): echo with logprobs is then refused with it
	// instead of computed token by token.
	NoPromptLogprobs string
	// MaxRequestBytes bounds a request body; 0 means 16 MiB.
	MaxRequestBytes int64
	// SlotWait is how long a request may wait for a free llama-server
	// slot before it gets 503; 0 means 60 s.
	SlotWait time.Duration
	// ReadyTimeout bounds llama-server's start until /health answers 200;
	// 0 means 10 minutes (large models load slowly).
	ReadyTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before restarting an
	// exited llama-server; 0 means 250 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// ServerOutput, if set, receives llama-server's stdout and stderr.
	ServerOutput io.Writer
	// IdleTimeout closes a kept-alive client connection idle this long; 0
	// means 2 minutes.
	IdleTimeout time.Duration
	// BodyTimeout bounds how long a request body may take to arrive; 0
	// means 60 s. A slow client then gets 408 instead of holding a
	// connection open indefinitely.
	BodyTimeout time.Duration
	// MaxEchoEntries bounds the prompt logprob entries of one request (maxEchoEntries, its
	// default when 0); a request asking for more is a 400.
	MaxEchoEntries int64
	// AllowHosts are names besides loopback's that a shim on loopback answers (checkLoopback):
	// a reverse proxy on this machine that passes the Host it was asked for.
	AllowHosts []string
}

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = 16 << 20
	}
	if o.SlotWait == 0 {
		o.SlotWait = 60 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = 60 * time.Second
	}
	if o.MaxEchoEntries == 0 {
		o.MaxEchoEntries = maxEchoEntries
	}
	return o
}

// Server is the shim's HTTP handler in front of a supervised llama-server.
type Server struct {
	opts Options
	log  *slog.Logger
	sup  *llamaserver.Process[*upstream]
	mux  *http.ServeMux
	key  [32]byte // sha256 of the API key, compared in constant time
	// loopback: the shim listens on a loopback address only, and so answers only requests
	// addressed to a loopback name, from no other site's page (checkLoopback)
	loopback bool
}

func newServer(opts Options, log *slog.Logger) *Server {
	opts = opts.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, mux: http.NewServeMux()}
	s.sup = llamaserver.New(llamaserver.Options[*upstream]{
		Path: opts.ServerPath, Args: opts.ServerArgs, Env: opts.Env, Dir: opts.Dir, Output: opts.ServerOutput,
		ReadyTimeout: opts.ReadyTimeout, MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff,
		Prepare:  prepare(opts.Dir),
		Describe: func(u *upstream) []any { return []any{"scorer", u.scorer.Name()} },
	}, log)
	if opts.APIKey != "" {
		s.key = sha256.Sum256([]byte(opts.APIKey))
	}
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("POST /v1/completions", apiHandler(s, parseCompletionRequest, s.handleCompletions))
	s.mux.HandleFunc("POST /v1/chat/completions", apiHandler(s, parseChatRequest, s.handleChat))
	s.mux.HandleFunc("POST /tokenize", apiHandler(s, parseTokenizeRequest, s.handleTokenize))
	s.mux.HandleFunc("POST /detokenize", apiHandler(s, parseDetokenizeRequest, s.handleDetokenize))
	s.mux.HandleFunc("GET /tokenizer_info", s.handleTokenizerInfo)
	return s
}

// Run starts llama-server as opts describe, supervises it and serves the
// API until ctx is done; then it stops both and returns. It returns an
// error when the shim cannot listen or is misconfigured, or when
// llama-server exits again and again without ever becoming ready.
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	if opts.ServerPath == "" {
		return errors.New("shim: no llama-server path given")
	}
	tuneGC()
	s := newServer(opts, log)
	l := s.opts.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", s.opts.Addr); err != nil {
			return fmt.Errorf("listening on %s: %w", s.opts.Addr, err)
		}
	}
	return runServer(ctx, s, l)
}

// gcPercent is the garbage collector's target (GOGC) that Run sets unless
// GOGC is set: the shim's live heap is small (mostly the vocabulary) and an
// echoed 512-token prompt allocates about 0.4 MB, so at Go's default of 100
// it collected every few requests, which took a third of its own time on such
// an answer (BenchmarkEchoAnswer). The heap stays a few times the vocabulary.
const gcPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// runServer serves s on l and supervises llama-server until ctx is done.
func runServer(ctx context.Context, s *Server, l net.Listener) error {
	s.log.Info("shim listening", "addr", l.Addr().String(), "api_key", s.opts.APIKey != "")
	if ta, ok := l.Addr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		s.loopback = true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	supDone := make(chan error, 1)
	go func() { supDone <- s.sup.Run(ctx) }()
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       s.opts.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(l) }()
	var err error
	supExited := false
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serving: %w", err)
		cancel()
	case err = <-supDone:
		supExited = true
		cancel()
	}
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shutCancel()
	hs.Shutdown(shutCtx)
	if !supExited {
		<-supDone
	}
	s.log.Info("shim stopped")
	return err
}

// ServeHTTP checks the API key and recovers from panics so that a bug
// answers 500 instead of dropping the connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
			writeError(w, fmt.Errorf("internal error: %v", p))
		}
	}()
	if err := s.checkLoopback(r); err != nil {
		writeError(w, err)
		return
	}
	if s.opts.APIKey != "" && r.URL.Path != "/health" && !s.authorized(r) {
		writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: "missing or wrong API key; send Authorization: Bearer KEY"})
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.notFound(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// checkLoopback refuses, on a shim that listens on loopback only, a request addressed to
// another name or sent by a page of another site. A browser lets any page it shows send a
// request to 127.0.0.1 (a text/plain POST needs no preflight), and a name the page's site
// controls can be made to resolve to 127.0.0.1 (DNS rebinding), which lets the page read the
// answers too; neither is a client the user started.
func (s *Server) checkLoopback(r *http.Request) error {
	if !s.loopback {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !s.allowedName(host) {
		return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Message: fmt.Sprintf("Host %q: this server listens on loopback and answers requests addressed to localhost, 127.0.0.1 or [::1] only (a page of another site can reach a loopback server through its browser); to be reached by another name, serve with --addr on that interface and --api-key-file, or name it with --allow-host (a reverse proxy on this machine)", r.Host)}
	}
	// a page's origin is http(s), or "null" (a sandboxed frame, which a hostile page can make);
	// other schemes are the user's own programs (an extension, an editor's webview, an app)
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || (u.Scheme == "http" || u.Scheme == "https") && !s.allowedName(u.Hostname()) {
			return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Message: fmt.Sprintf("Origin %q: a page of another site may not use this loopback server; call it from a program, or from a page served on localhost", o)}
		}
	}
	return nil
}

// allowedName says host (no port) is loopback or one of Options.AllowHosts.
func (s *Server) allowedName(host string) bool {
	if loopbackName(host) {
		return true
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	for _, a := range s.opts.AllowHosts {
		if h == strings.TrimSuffix(strings.ToLower(a), ".") {
			return true
		}
	}
	return false
}

// loopbackName says host (no port) names this machine's loopback: localhost (and its
// subdomains, RFC 6761) or a loopback address.
func loopbackName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Message: fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, m)})
			return
		}
	}
	writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
}

func (s *Server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.key[:]) == 1
}

// apiHandler is the opening the POST endpoints share: it reads the body, parses it with
// parse and takes the llama-server now serving, and answers the first of these that fails
// with its error; serve answers the rest. start is when the request came in: Server-Timing
// counts reading and parsing the body as the shim's own time.
func apiHandler[R any](s *Server, parse func(body []byte) (R, error), serve func(w http.ResponseWriter, r *http.Request, u *upstream, req R, start time.Time)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, err := s.readBody(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		req, err := parse(body)
		if err != nil {
			writeError(w, err)
			return
		}
		u, err := s.current()
		if err != nil {
			writeError(w, err)
			return
		}
		serve(w, r, u, req, start)
	}
}

// readBody reads a request body of at most MaxRequestBytes.
// A body is read within BodyTimeout. One over the limit is answered 413 at
// once, and what the client still sends is read and dropped (up to
// maxDrainBytes, within the same deadline), so that a client that sends its
// whole body before reading the answer reads the 413 instead of a broken pipe.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.opts.MaxRequestBytes && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// the client waits for a 100 before it sends the body: say no at once, and read none
		w.Header().Set("Connection", "close")
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Message: fmt.Sprintf("request body exceeds %d bytes", s.opts.MaxRequestBytes)}
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(s.opts.BodyTimeout)
	rc.SetReadDeadline(deadline)
	orig := r.Body
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		// a body that timed out keeps its passed deadline: net/http reads what is left of a
		// small body after the handler, and without one a client trickling bytes would hold
		// the connection for as long as it liked
		defer rc.SetReadDeadline(time.Time{})
	}
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		tooLarge := &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Message: fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)}
		if rc.EnableFullDuplex() == nil {
			w.Header().Set("Connection", "close")
			writeError(w, tooLarge)
			rc.Flush()
			io.Copy(io.Discard, io.LimitReader(orig, maxDrainBytes))
			return nil, errAnswered
		}
		return nil, tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Message: fmt.Sprintf("the request body did not arrive within %v", s.opts.BodyTimeout)}
	}
	return nil, badRequest("", "reading request body: %v", err)
}

// maxDrainBytes is how much of an oversized body the shim reads and drops.
const maxDrainBytes = 1 << 30

// errAnswered is returned by readBody when it has answered the request itself.
var errAnswered = errors.New("answered")

func (s *Server) newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// checkRequest refuses what a request names that this server does not have: another model,
// a logit_bias token beyond the vocabulary.
func (s *Server) checkRequest(u *upstream, model string, bias [][2]float64) error {
	if err := s.checkModel(u, model); err != nil {
		return err
	}
	return checkLogitBias(bias, u.vocab)
}

// checkModel accepts a request's "model" when it is empty or names the model this server
// serves: the name /v1/models lists (the bundle's model) or llama-server's own alias for it.
// Any other name is 404 model_not_found, as OpenAI and vLLM answer.
func (s *Server) checkModel(u *upstream, name string) error {
	served := s.modelName(u)
	alias := u.info.ModelAlias
	if name == "" || name == served || name == alias || name == filepath.Base(alias) || name == strings.TrimSuffix(filepath.Base(alias), ".gguf") {
		return nil
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` does not exist: this server serves %q (GET /v1/models lists it)", name, served)}
}

func (s *Server) modelName(u *upstream) string {
	if s.opts.ModelName != "" {
		return s.opts.ModelName
	}
	return strings.TrimSuffix(filepath.Base(u.info.ModelAlias), ".gguf")
}

func (s *Server) requestFailed(r *http.Request, err error) {
	if errors.Is(err, errCanceled) || errors.Is(err, context.Canceled) {
		s.log.Debug("request canceled", "path", r.URL.Path)
		return
	}
	s.log.Warn("request failed", "path", r.URL.Path, "err", err)
}

// current returns the ready llama-server, or a 503 saying why there is none.
func (s *Server) current() (*upstream, error) {
	_, u, err := s.sup.Current()
	if err != nil {
		return nil, unavailable("%s; retry shortly", err)
	}
	return u, nil
}

// healthTimeout bounds how long /health waits for llama-server's own.
const healthTimeout = 2 * time.Second

// handleHealth says 200 only when llama-server itself answers its /health: a
// child that was killed (before the supervisor has reaped it) or hangs is 503
// at once, as a completion sent to it would be.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	u, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	err = u.ls.Health(ctx)
	var se *llamaserver.StatusError
	if errors.As(err, &se) {
		err = fmt.Errorf("its /health answered %d", se.Status)
	} else if err != nil {
		err = upstreamOrCanceled(ctx, err)
		if ctx.Err() != nil && r.Context().Err() == nil {
			err = fmt.Errorf("its /health did not answer within %v", healthTimeout)
		}
	}
	if err != nil {
		writeError(w, unavailable("llama-server is not answering: %v", llamaserver.ShortError(err)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	u, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id":            s.modelName(u),
			"object":        "model",
			"created":       s.sup.StartedAt().Unix(),
			"owned_by":      "llbuild",
			"max_model_len": u.info.NCtx,
		}},
	})
}
