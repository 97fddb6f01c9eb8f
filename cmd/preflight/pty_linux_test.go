//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/egresskit/egresskit/internal/testprog"
)

// openPTY returns a new pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Fatalf("unlocking the pseudo-terminal: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Fatalf("naming the pseudo-terminal: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("opening the pseudo-terminal: %v", err)
	}
	return m, s
}

// TestEndToEndTerminal runs the binary with stderr on a terminal: the
// progress and the summary go there, and stdout stays one JSON document.
func TestEndToEndTerminal(t *testing.T) {
	site := testprog.ProbeSite(t)
	dead := deadProxy(t)
	master, slave := openPTY(t)
	defer master.Close()

	cmd := exec.Command(binary, "-timeout", "5s", "-matrix", "-proxy", "direct", "-proxy", dead,
		site+"/ok/1", site+"/throttle/2")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, slave
	var tty bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&tty, master) }) // ends with EIO once no one holds the slave
	err := cmd.Run()
	slave.Close()
	wg.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitCritical {
		t.Fatalf("preflight: %v, want exit status %d", err, exitCritical)
	}
	checkStableJSON(t, stdout.String())
	term := tty.String()
	for _, want := range []string{"probed 4/4", "CRITICAL", "failing egresses", "backoff"} {
		if !strings.Contains(term, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, term)
		}
	}
	for _, s := range []string{stdout.String(), term} {
		if strings.Contains(s, "pa55-w0rd-secret") {
			t.Errorf("output leaks the proxy password:\n%s", s)
		}
	}
}
