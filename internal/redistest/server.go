//go:build unix

package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 10 * time.Second

// ErrNoServer: no redis-server binary was found in PATH.
var ErrNoServer = errors.New("redistest: redis-server not found in PATH")

// Server is a redis-server process on 127.0.0.1 with no persistence. Its
// methods are safe for concurrent use.
type Server struct {
	// Addr is "127.0.0.1:PORT"; it stays the same across Restart.
	Addr string

	path  string
	port  int
	extra []string // more redis-server arguments

	mu   sync.Mutex // guards proc
	proc *process   // nil while stopped
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when its output ends (the process exited)
	log  *tail
}

// NewServer starts a redis-server on a free port of 127.0.0.1 and returns
// when it accepts connections. It returns an error wrapping ErrNoServer
// when there is no redis-server binary. The caller must Close it.
func NewServer() (*Server, error) { return newServer() }

// NewServerWith starts a redis-server as NewServer does, with more
// command-line arguments (e.g. "--enable-debug-command", "local", which
// lets a test make it sleep with DEBUG SLEEP).
func NewServerWith(args ...string) (*Server, error) { return newServer(args...) }

// NewClusterServer starts a redis-server in cluster mode, keeping its
// cluster configuration in dir, and makes it a one-node cluster serving
// every slot. Scripts are then checked as a cluster checks them: the keys
// of one call must share a slot.
func NewClusterServer(dir string) (*Server, error) {
	s, err := newServer("--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--dir", dir)
	if err != nil {
		return nil, err
	}
	if err := s.serveAllSlots(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// NewTLSServer starts a redis-server that accepts only TLS connections,
// with the certificates of files and client certificates required: Addr
// is its TLS port, and it has no plain port.
func NewTLSServer(files TLSFiles) (*Server, error) {
	return newServer("--tls-cert-file", files.ServerCert, "--tls-key-file", files.ServerKey,
		"--tls-ca-cert-file", files.CA, "--tls-auth-clients", "yes")
}

func newServer(extra ...string) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	var last error
	for range 5 { // another process may take the free port first
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), path: path, port: port, extra: extra}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: no free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port, nil
}

// start runs redis-server on s.port and waits until it is ready.
func (s *Server) start() error {
	port := []string{"--port", strconv.Itoa(s.port)}
	if slices.Contains(s.extra, "--tls-cert-file") {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	args := []string{
		port[0], port[1], "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--loglevel", "notice", "--logfile", "",
	}
	args = append(args, port[2:]...)
	cmd := exec.Command(s.path, append(args, s.extra...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), log: &tail{}}
	ready := make(chan struct{})
	go p.read(out, ready)
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		s.mu.Lock()
		s.proc = p
		s.mu.Unlock()
		return nil
	case <-p.done:
		cmd.Wait()
		return fmt.Errorf("redistest: redis-server exited: %s", p.log.String())
	case <-timer.C:
		cmd.Process.Kill()
		<-p.done
		cmd.Wait()
		return fmt.Errorf("redistest: redis-server not ready after %v: %s", startTimeout, p.log.String())
	}
}

// read consumes the server's log until it exits, signalling ready when the
// server accepts connections.
func (p *process) read(out io.Reader, ready chan struct{}) {
	defer close(p.done)
	sc := bufio.NewScanner(out)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		p.log.add(line)
		if !signalled && strings.Contains(line, "Ready to accept connections") {
			close(ready)
			signalled = true
		}
	}
	io.Copy(io.Discard, out)
}

// stop signals the running process and waits for it.
func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	if sig == syscall.SIGTERM {
		p.cmd.Process.Signal(syscall.SIGCONT) // a paused server must run to exit
	}
	p.cmd.Process.Signal(sig)
	<-p.done
	p.cmd.Wait()
}

// Close stops the server (SIGTERM) and waits for it to exit. It may be
// called more than once.
func (s *Server) Close() { s.stop(syscall.SIGTERM) }

// Kill kills the server (SIGKILL), as a crash would, and waits for it to
// exit; its data is lost. Restart starts it again.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

// Restart starts a stopped or killed server again on the same address,
// empty, and returns when it accepts connections.
func (s *Server) Restart() error {
	s.mu.Lock()
	running := s.proc != nil
	s.mu.Unlock()
	if running {
		return errors.New("redistest: server is running")
	}
	var err error
	for range 5 {
		if err = s.start(); err == nil {
			return nil
		}
	}
	return err
}

// Pause stops the server process (SIGSTOP) without closing its
// connections, so that clients hang as with an overloaded server; Resume
// continues it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.cmd.Process.Signal(sig)
	}
}

// tail keeps the last lines of a server's log, for error messages.
type tail struct {
	mu    sync.Mutex // guards lines
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 8 {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, " | ")
}

// serveAllSlots assigns every slot to the server and waits until the
// cluster reports itself ready.
func (s *Server) serveAllSlots() error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, DialerRetries: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE: %w", err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster not ready: %v", err)
		case <-tick.C:
		}
	}
}
