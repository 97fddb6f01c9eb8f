//go:build linux

package probe_test

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// newHangAddr returns the address of a listener whose accept queue is full
// and that never accepts: a TCP handshake with it hangs (the kernel drops
// the SYNs), as with a firewalled or overloaded endpoint.
func newHangAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "hang-listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	held := fillBacklog(t, addr)
	t.Cleanup(func() {
		ln.Close()
		for _, c := range held {
			c.Close()
		}
	})
	return addr
}
