package testprog

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Squid starts a real squid (tested with 5.7, Debian's GnuTLS build) on a
// free loopback port, with basic authentication through basic_ncsa_auth
// and an htpasswd file when opts.User is set, and a TLS port when opts.TLS
// is set. It runs in the foreground (-N) with no disk cache, its
// configuration, pid file and logs in a temporary directory, and a service
// name of its own (-n) so that several squids can run at once. Started as
// root, squid drops to its "proxy" user, which is given the directory.
func Squid(t testing.TB, opts ProxyOptions) *Proxy {
	t.Helper()
	path := Need(t, "squid")
	dir := programDir(t)
	port := FreePort(t)
	p := &Proxy{Program: "squid", Scheme: "http", Dir: dir, opts: opts}
	p.Version = version(path, []string{"-v"}, "Version ", "")

	conf := fmt.Sprintf(`http_port 127.0.0.1:%d
pid_filename %[2]s/squid.pid
cache_log %[2]s/cache.log
access_log stdio:%[2]s/access.log
cache_store_log none
coredump_dir %[2]s
cache deny all
cache_mem 0 MB
pinger_enable off
shutdown_lifetime 0 seconds
max_filedescriptors 1024
`, port, dir)
	if opts.TLS {
		ca := newTestCA(t)
		cert, key := ca.issue(t, dir, "127.0.0.1")
		p.CA = ca.pool
		tport := FreePort(t)
		p.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tport))
		conf += fmt.Sprintf("https_port 127.0.0.1:%d tls-cert=%s tls-key=%s\n", tport, cert, key)
	}
	if opts.User != "" {
		htpasswd := Need(t, "htpasswd")
		pwfile := filepath.Join(dir, "passwd")
		out, err := exec.Command(htpasswd, "-b", "-c", "-B", pwfile, opts.User, opts.Pass).CombinedOutput()
		if err != nil {
			t.Fatalf("testprog: htpasswd: %v: %s", err, out)
		}
		helper, err := Lookup("basic_ncsa_auth")
		if err != nil {
			helper = "/usr/lib/squid/basic_ncsa_auth"
		}
		conf += fmt.Sprintf(`auth_param basic program %s %s
auth_param basic realm egresskit-test
auth_param basic children 2 startup=1
acl authed proxy_auth REQUIRED
http_access allow authed
http_access deny all
`, helper, pwfile)
	} else {
		conf += "http_access allow all\n"
	}
	cfg := WriteFile(t, dir, "squid.conf", conf)
	giveToProxyUser(t, dir)

	service := "egk" + randHex(6)
	t.Cleanup(func() { removeShm(service) })
	p.Proc = Start(t, Spec{Path: path, Args: []string{"-N", "-n", service, "-f", cfg}, Dir: dir, Port: port})
	if p.TLSAddr != "" {
		waitListening(t, p.Proc, p.TLSAddr)
	}
	access := filepath.Join(dir, "access.log")
	p.forwarded = func() int { return countLines(access, " HIER_DIRECT/") }
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "cache.log"))
			t.Logf("squid cache.log:\n%s", tail(b, 8<<10))
		}
	})
	return p
}

// programDir returns a directory of the test's temp dir that a program
// dropping privileges can read and write.
func programDir(t testing.TB) string {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		// t.TempDir's parent is 0700: let the dropped user traverse it.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// giveToProxyUser hands dir and its files to squid's "proxy" user when
// the test runs as root, since squid drops to it before opening its logs.
func giveToProxyUser(t testing.TB, dir string) {
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("proxy")
	if err != nil {
		t.Fatalf("testprog: squid started as root needs the proxy user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	err = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// removeShm removes the shared memory segments squid left behind when
// killed; they are named after its service name.
func removeShm(service string) {
	matches, _ := filepath.Glob("/dev/shm/" + service + "-*")
	for _, m := range matches {
		os.Remove(m)
	}
}

// waitListening waits until addr accepts connections, or fails the test.
func waitListening(t testing.TB, p *Proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("testprog: %s not listening on %s: %v", p.Name, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
