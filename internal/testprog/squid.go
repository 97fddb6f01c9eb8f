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
	"strings"
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
	p := &Proxy{Program: "squid", Scheme: "http", Dir: dir, opts: opts}
	p.Version = version(path, []string{"-v"}, "Version ", "")

	conf := fmt.Sprintf(`pid_filename %[1]s/squid.pid
cache_log %[1]s/cache.log
access_log stdio:%[1]s/access.log
cache_store_log none
coredump_dir %[1]s
cache deny all
cache_mem 0 MB
pinger_enable off
shutdown_lifetime 0 seconds
max_filedescriptors 1024
`, dir)
	var tlsPort string
	if opts.TLS {
		ca := newTestCA(t)
		cert, key := ca.issue(t, dir, "127.0.0.1")
		p.CA = ca.pool
		tlsPort = fmt.Sprintf(" tls-cert=%s tls-key=%s", cert, key)
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
	// A port found free may be taken by another process before squid
	// binds it: squid then logs the failure, and the start is retried on
	// new ports.
	var lastErr error
	for range 3 {
		port := FreePort(t)
		ports := fmt.Sprintf("http_port 127.0.0.1:%d\n", port)
		p.TLSAddr = ""
		if opts.TLS {
			tport := FreePort(t)
			p.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tport))
			ports += fmt.Sprintf("https_port 127.0.0.1:%d%s\n", tport, tlsPort)
		}
		cfg := WriteFile(t, dir, "squid.conf", ports+conf)
		os.Remove(filepath.Join(dir, "cache.log"))
		giveToProxyUser(t, dir)
		service := "egk" + randHex(6)
		t.Cleanup(func() { removeShm(service) })
		proc, err := start(Spec{Path: path, Args: []string{"-N", "-n", service, "-f", cfg}, Dir: dir, Port: port}, dir)
		if err == nil {
			if err = squidListening(proc, filepath.Join(dir, "cache.log"), port, p.TLSAddr); err == nil {
				p.Proc = proc
				break
			}
			proc.Kill()
		}
		lastErr = err
	}
	if p.Proc == nil {
		t.Fatalf("testprog: squid did not start: %v", lastErr)
	}
	t.Cleanup(func() {
		p.Proc.Kill()
		if t.Failed() {
			t.Logf("squid output:\n%s", p.Proc.Output())
		}
	})
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

// squidListening waits until squid's cache.log says it accepts
// connections on port (and on tlsAddr when set): a connection accepted on
// the port may have been another program's.
func squidListening(p *Proc, cacheLog string, port int, tlsAddr string) error {
	want := []string{"Accepting HTTP Socket connections at "}
	locals := []string{fmt.Sprintf("local=127.0.0.1:%d ", port)}
	if tlsAddr != "" {
		want = append(want, "Accepting HTTPS Socket connections at ")
		locals = append(locals, "local="+tlsAddr+" ")
	}
	deadline := time.Now().Add(startTimeout)
	for {
		b, _ := os.ReadFile(cacheLog)
		log := string(b)
		ok := true
		for i := range want {
			if !hasLineWith(log, want[i], locals[i]) {
				ok = false
			}
		}
		switch {
		case ok:
			return nil
		case p.Exited():
			return fmt.Errorf("squid exited: %s", tail(b, 2<<10))
		case time.Now().After(deadline):
			return fmt.Errorf("squid not listening after %v: %s", startTimeout, tail(b, 2<<10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasLineWith reports whether a line of log contains both a and b.
func hasLineWith(log, a, b string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, a) && strings.Contains(line, b) {
			return true
		}
	}
	return false
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
