package probe_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// challengePage is a Cloudflare-style challenge page that package classify
// recognises by its "_cf_chl_opt" marker.
const challengePage = `<!DOCTYPE html><html><head><title>Just a moment...</title></head>
<body><script>window._cf_chl_opt={cvId:"3"};</script></body></html>`

// siteServer serves every kind of answer under its own path prefix:
// /ok/... (200, JSON), /throttle/... (429, Retry-After: 7), /challenge/... (403
// challenge page), /slow/N/... (200 after N ms), /status/N/... (status N).
// It is a plain http.Server rather than an httptest.Server, whose
// per-connection bookkeeping under one lock would dominate a run of a
// thousand connections.
func siteServer(t testing.TB) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: http.HandlerFunc(site)}}
	s.wg.Go(func() { s.srv.Serve(ln) })
	t.Cleanup(func() {
		s.srv.Close()
		s.wg.Wait()
	})
	return s
}

// server is a loopback HTTP server.
type server struct {
	URL string
	srv *http.Server
	wg  sync.WaitGroup
}

func site(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch parts[0] {
	case "ok":
		// An API health answer: not a page the classifier needs to read.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"ok":true}`)
	case "throttle":
		w.Header().Set("Retry-After", "7")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case "challenge":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, challengePage)
	case "named":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintln(w, "Requests from egresskit-probe are not welcome here.")
	case "status":
		code, _ := strconv.Atoi(parts[1])
		w.WriteHeader(code)
	case "redirect":
		http.Redirect(w, r, "/ok/", http.StatusFound)
	case "loop":
		http.Redirect(w, r, "/loop/", http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// holdListener accepts connections and never reads from or writes to them:
// a TLS client to it stalls in its handshake, an HTTP client waits for a
// response forever. Close releases everything.
type holdListener struct {
	ln   net.Listener
	done chan struct{}

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func newHoldListener(t testing.TB) *holdListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holdListener{ln: ln, done: make(chan struct{})}
	go h.serve()
	t.Cleanup(h.close)
	return h
}

func (h *holdListener) serve() {
	defer close(h.done)
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
	}
}

func (h *holdListener) addr() string { return h.ln.Addr().String() }

func (h *holdListener) close() {
	h.ln.Close()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
}

// fillBacklog dials addr until a dial times out, so that the listener's
// accept queue is full and every later TCP handshake hangs. It returns the
// connections it made, for the caller to close.
func fillBacklog(t testing.TB, addr string) []net.Conn {
	t.Helper()
	var held []net.Conn
	for range 64 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return held
		}
		held = append(held, c)
	}
	t.Fatalf("the backlog of %s never filled", addr)
	return nil
}
