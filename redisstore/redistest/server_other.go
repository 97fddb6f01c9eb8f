//go:build !unix

package redistest

import "errors"

// ErrNoServer: no redis-server can be started on this system.
var ErrNoServer = errors.New("redistest: cannot start redis-server on this system")

// Server is a redis-server process; it cannot be started on this system.
type Server struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
}

// NewServer returns ErrNoServer on this system.
func NewServer() (*Server, error) { return nil, ErrNoServer }

// NewClusterServer returns ErrNoServer on this system.
func NewClusterServer(string) (*Server, error) { return nil, ErrNoServer }

// NewTLSServer returns ErrNoServer on this system.
func NewTLSServer(TLSFiles) (*Server, error) { return nil, ErrNoServer }

// Close does nothing.
func (s *Server) Close() {}

// Kill does nothing.
func (s *Server) Kill() {}

// Restart returns ErrNoServer.
func (s *Server) Restart() error { return ErrNoServer }

// Pause does nothing.
func (s *Server) Pause() {}

// Resume does nothing.
func (s *Server) Resume() {}
