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
