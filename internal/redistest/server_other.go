//go:build !unix

package redistest

import (
	"context"
	"errors"
	"testing"
)

// ErrNoServer: no redis-server can be started on this system.
var ErrNoServer = errors.New("redistest: cannot start redis-server on this system")

// Server is a redis-server process; it cannot be started on this system.
type Server struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
}

// NewServer returns ErrNoServer on this system.
func NewServer() (*Server, error) { return nil, ErrNoServer }

// NewServerWith returns ErrNoServer on this system.
func NewServerWith(...string) (*Server, error) { return nil, ErrNoServer }

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

// Cluster is a Redis Cluster; it cannot be started on this system.
type Cluster struct {
	// Masters are the nodes.
	Masters []*Server
}

// NewCluster returns ErrNoServer on this system.
func NewCluster(string, int) (*Cluster, error) { return nil, ErrNoServer }

// StartClusterOf skips (or fails) t on this system.
func StartClusterOf(t testing.TB, masters int) *Cluster {
	t.Helper()
	missing(t, ErrNoServer)
	return nil
}

// Addrs returns nil.
func (c *Cluster) Addrs() []string { return nil }

// Close does nothing.
func (c *Cluster) Close() {}

// Master returns ErrNoServer.
func (c *Cluster) Master(context.Context, string) (*Server, error) { return nil, ErrNoServer }

// WaitReady returns ErrNoServer.
func (c *Cluster) WaitReady(context.Context) error { return ErrNoServer }
