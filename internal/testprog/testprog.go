// Package testprog starts real programs — nginx, proxies, servers — on
// loopback for tests, in the spirit of net/http/httptest.
//
// Need finds a program's binary in PATH (and in /usr/sbin, where Debian puts
// daemons). When it is missing the test is skipped, or failed when the
// environment variable EGRESSKIT_REQUIRE_PROGRAMS is 1, so that CI never
// skips a real-program test silently.
//
// Start runs a program in the foreground, waits until it accepts TCP
// connections on its port, and kills it (by pid, with its process group)
// when the test ends. Every program is given a configuration of the test's
// own in t.TempDir() and listens on 127.0.0.1 only.
package testprog

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvRequire names the environment variable that turns a missing program
// into a test failure.
const EnvRequire = "EGRESSKIT_REQUIRE_PROGRAMS"

// startTimeout bounds how long a program may take to accept connections.
const startTimeout = 15 * time.Second

// extraDirs are searched after PATH: Debian installs daemons in sbin, which
// is not in every user's PATH.
var extraDirs = []string{"/usr/sbin", "/usr/local/sbin", "/sbin"}

// Lookup returns the path of the named binary, or an error when it is not
// installed.
func Lookup(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range extraDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("testprog: %s not found in PATH or %v", name, extraDirs)
}

// Need returns the path of the named binary. When it is missing it skips
// the test, or fails it when EGRESSKIT_REQUIRE_PROGRAMS is 1.
func Need(t testing.TB, name string) string {
	t.Helper()
	p, err := Lookup(name)
	if err == nil {
		return p
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%v (%s=1: real-program tests must run)", err, EnvRequire)
	}
	t.Skipf("%v; install it to run this test", err)
	return ""
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testprog: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Proc is a running program. Its methods are safe for concurrent use.
type Proc struct {
	// Name is the program's base name, for messages.
	Name string
	// Addr is the "127.0.0.1:PORT" it was waited on.
	Addr string

	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when the process has exited
	mu   sync.Mutex    // guards err
	err  error         // the process's exit status
}

// Spec describes a program to start.
type Spec struct {
	// Path is the binary (from Need); Args its arguments.
	Path string
	Args []string
	// Dir is the working directory; empty means the test's temp dir.
	Dir string
	// Env is added to the test process's environment.
	Env []string
	// Port is the loopback TCP port the program listens on; Start returns
	// when it accepts a connection there.
	Port int
}

// Start runs spec and returns when the program accepts connections on
// spec.Port. The program is killed when the test ends; its output is
// logged when the test has failed.
func Start(t testing.TB, spec Spec) *Proc {
	t.Helper()
	p, err := start(spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", p.Name, p.Output())
		}
	})
	return p
}

func start(spec Spec, tmp string) (*Proc, error) {
	name := filepath.Base(spec.Path)
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	if cmd.Dir == "" {
		cmd.Dir = tmp
	}
	cmd.Env = append(os.Environ(), spec.Env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testprog: starting %s: %w", name, err)
	}
	p := &Proc{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(spec.Port)), cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("testprog: %s exited before listening on %s (%v): %s", name, p.Addr, p.exitErr(), out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("testprog: %s not listening on %s after %v: %s", name, p.Addr, startTimeout, out.String())
		}
	}
}

// Pid returns the program's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output returns what the program has written to stdout and stderr.
func (p *Proc) Output() string { return p.out.String() }

// Kill kills the program and its process group (SIGKILL) and waits for it
// to exit. It may be called more than once.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Process.Kill()
	<-p.done
}

// Signal sends sig to the program.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited reports whether the program has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return errors.New("exit status 0")
	}
	return p.err
}

// WriteFile writes content to name under dir and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a bytes.Buffer safe for concurrent use, bounded to its
// last 64 KiB.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

const maxOutput = 64 << 10

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.b.Len() > maxOutput {
		s.b.Next(s.b.Len() - maxOutput)
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
