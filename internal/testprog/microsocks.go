package testprog

import (
	"strconv"
	"strings"
	"testing"
)

// Microsocks starts a real microsocks SOCKS5 server (tested with Debian's
// 1.0.3) on a free loopback port, with username/password authentication
// (RFC 1929) when opts.User is set. Its URL scheme is socks5; use
// URLWith("socks5h", ...) to let it resolve target names. opts.TLS is not
// supported.
func Microsocks(t testing.TB, opts ProxyOptions) *Proxy {
	t.Helper()
	if opts.TLS {
		t.Fatal("testprog: microsocks has no TLS port")
	}
	path := Need(t, "microsocks")
	dir := programDir(t)
	p := &Proxy{Program: "microsocks", Scheme: "socks5", Dir: dir, opts: opts}
	// microsocks has no version flag: ask the package manager.
	p.Version = version(path, nil, "", "microsocks")
	p.Proc = startOwned(t, dir, func(port int) Spec {
		args := []string{"-i", "127.0.0.1", "-p", strconv.Itoa(port)}
		if opts.User != "" {
			args = append(args, "-u", opts.User, "-P", opts.Pass)
		}
		return Spec{Path: path, Args: args, Dir: dir}
	})
	// It logs "client[fd] addr: connected to host:port" per connection.
	p.forwarded = func() int { return strings.Count(p.Output(), ": connected to ") }
	return p
}
