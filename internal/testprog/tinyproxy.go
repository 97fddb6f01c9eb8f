package testprog

import (
	"fmt"
	"path/filepath"
	"testing"
)

// Tinyproxy starts a real tinyproxy (tested with 1.11.1) on a free
// loopback port in the foreground (-d), with BasicAuth when opts.User is
// set, CONNECT allowed to every port, and its log in a temporary
// directory. opts.TLS is not supported: tinyproxy has no TLS port.
func Tinyproxy(t testing.TB, opts ProxyOptions) *Proxy {
	t.Helper()
	if opts.TLS {
		t.Fatal("testprog: tinyproxy has no TLS port")
	}
	path := Need(t, "tinyproxy")
	dir := programDir(t)
	p := &Proxy{Program: "tinyproxy", Scheme: "http", Dir: dir, opts: opts}
	p.Version = version(path, []string{"-v"}, "tinyproxy ", "")
	logf := filepath.Join(dir, "tinyproxy.log")
	p.Proc = startOwned(t, dir, func(port int) Spec {
		conf := fmt.Sprintf(`Port %d
Listen 127.0.0.1
Timeout 30
MaxClients 200
LogFile "%s"
LogLevel Connect
PidFile "%s/tinyproxy.pid"
`, port, logf, dir)
		if opts.User != "" {
			conf += fmt.Sprintf("BasicAuth %s %s\n", opts.User, opts.Pass)
		}
		cfg := WriteFile(t, dir, "tinyproxy.conf", conf)
		return Spec{Path: path, Args: []string{"-d", "-c", cfg}, Dir: dir}
	})
	p.forwarded = func() int { return countLines(logf, "Established connection to host") }
	return p
}
