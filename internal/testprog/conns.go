package testprog

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Established returns the number of this machine's established TCP
// connections whose remote end is addr ("127.0.0.1:PORT"): the
// connections clients hold to a server listening there. It reads
// /proc/net/tcp and skips the test where that file does not exist.
func Established(t testing.TB, addr string) int {
	t.Helper()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(host).To4()
	port, err := strconv.Atoi(portStr)
	if ip == nil || err != nil {
		t.Fatalf("testprog: Established wants an IPv4 address and port, got %q", addr)
	}
	// /proc/net/tcp prints the address as the little-endian hex of its
	// 32-bit value, then the port in hex.
	want := strings.ToUpper(hex.EncodeToString([]byte{ip[3], ip[2], ip[1], ip[0]})) + fmt.Sprintf(":%04X", port)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("testprog: cannot count connections: %v", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st ...; 01 is ESTABLISHED.
		if len(fields) > 3 && fields[2] == want && fields[3] == "01" {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// listens reports whether process pid holds the listening TCP socket of
// 127.0.0.1:port: a connection accepted on a port found free a moment
// before may have been another program's. Where /proc cannot tell, it
// reports true.
func listens(pid, port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return true
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	inode := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) > 9 && f[1] == local && f[3] == "0A" {
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return true
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// startOwned starts the program spec(port) returns on a free port, and
// starts it again on another port, up to three times, when the port turns
// out to be another program's.
func startOwned(t testing.TB, dir string, spec func(port int) Spec) *Proc {
	t.Helper()
	var lastErr error
	for range 3 {
		port := FreePort(t)
		s := spec(port)
		s.Port = port
		p, err := start(s, dir)
		if err == nil {
			if listens(p.Pid(), port) {
				t.Cleanup(func() {
					p.Kill()
					if t.Failed() {
						t.Logf("%s output:\n%s", p.Name, p.Output())
					}
				})
				return p
			}
			p.Kill()
			err = fmt.Errorf("testprog: %s does not hold port %d", p.Name, port)
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}
