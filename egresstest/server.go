package egresstest

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// Server is a fault-injecting server listening on 127.0.0.1, made by one
// of the New...Server functions. It counts the connections it accepts and
// the HTTP requests it reads. Close stops it and waits for every goroutine
// it started. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the server, "http://127.0.0.1:port" (or
	// "https://..." for the TLS stall server), with no trailing slash.
	URL string

	done chan struct{} // closed by Close; handlers return when it is

	// One of ln (raw servers) or ts (HTTP servers) is set.
	ln net.Listener
	ts *httptest.Server
	wg sync.WaitGroup // raw servers: the accept loop and one per conn

	closeOnce sync.Once

	mu       sync.Mutex // guards accepted, requests, changed, conns and closed
	accepted int
	requests int
	changed  chan struct{} // closed and replaced when a count changes
	conns    map[net.Conn]struct{}
	closed   bool
}

func newServer() *Server {
	return &Server{
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		conns:   make(map[net.Conn]struct{}),
	}
}

// listenLoopback listens on a free TCP port of 127.0.0.1. Like
// httptest.NewServer, it panics when it cannot: a test kit cannot work
// without a loopback interface.
func listenLoopback() net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("egresstest: cannot listen on 127.0.0.1: " + err.Error())
	}
	return ln
}

// startRaw starts a server that hands each accepted connection to serve
// in its own goroutine. serve must return once the connection is closed.
func startRaw(scheme string, serve func(s *Server, c net.Conn)) *Server {
	s := newServer()
	s.ln = listenLoopback()
	s.URL = scheme + "://" + s.ln.Addr().String()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return // listener closed
			}
			if !s.addConn(c) {
				c.Close()
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.dropConn(c)
				serve(s, c)
			}()
		}
	}()
	return s
}

// startHTTP starts an HTTP server on 127.0.0.1 running h. h must return
// when s.done is closed. Like httptest.NewServer, it panics when it cannot
// listen.
func startHTTP(h http.HandlerFunc) *Server {
	s := newServer()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count(false)
		h(w, r)
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.count(true)
		}
	}
	ts.Start()
	s.ts = ts
	s.URL = ts.URL
	return s
}

// count adds one accepted connection (accept) or one request.
func (s *Server) count(accept bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if accept {
		s.accepted++
	} else {
		s.requests++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) addConn(c net.Conn) bool {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conns[c] = struct{}{}
	}
	s.mu.Unlock()
	if !closed {
		s.count(true)
	}
	return !closed
}

func (s *Server) dropConn(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Accepted returns the number of TCP connections accepted so far.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Requests returns the number of HTTP requests read so far (the TLS stall
// server never reads one).
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// AwaitAccepted blocks until the server has accepted at least n
// connections, or ctx ends; it returns ctx.Err() in that case. A test uses
// it to act (cancel a request, say) once a client is known to be connected,
// without sleeping.
func (s *Server) AwaitAccepted(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, changed := s.accepted, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the server: it closes the listener and every connection,
// releases handlers that are waiting, and blocks until every goroutine the
// server started has returned. Close may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]net.Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		close(s.done)
		if s.ts != nil {
			s.ts.Close()
			return
		}
		s.ln.Close()
		for _, c := range conns {
			c.Close()
		}
	})
	s.wg.Wait()
}
