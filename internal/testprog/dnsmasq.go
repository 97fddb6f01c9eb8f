package testprog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// DNSOptions configures a dnsmasq started by Dnsmasq.
type DNSOptions struct {
	// Names are answered with an A record for 127.0.0.1; every other name
	// under the same top-level domains is NXDOMAIN (without a SOA).
	Names []string
	// TTL is the TTL of those answers, in seconds. Zero means 0 (dnsmasq's
	// own default for local answers).
	TTL int
}

// DNS is a running dnsmasq answering on loopback UDP and TCP.
type DNS struct {
	*Proc
	// Version is dnsmasq's version ("2.90").
	Version string

	log string // the query log
}

// Dnsmasq starts a real dnsmasq (tested with Debian's 2.90) on a free
// loopback port, in the foreground, with no upstream servers, no hosts
// file and no cache of its own: it answers the names of opts itself and
// logs every query to a file, before it answers, which Queries counts. It is killed when the test ends;
// the test is skipped when dnsmasq is missing, unless
// EGRESSKIT_REQUIRE_PROGRAMS is set. Stop it with Kill to play a dead
// resolver, or with Signal(syscall.SIGSTOP) to hold its answers.
func Dnsmasq(t testing.TB, opts DNSOptions) *DNS {
	t.Helper()
	if opts.TTL < 0 {
		t.Fatalf("testprog: bad dnsmasq TTL %d", opts.TTL)
	}
	path := Need(t, "dnsmasq")
	dir := programDir(t)
	d := &DNS{Version: version(path, []string{"--version"}, "Dnsmasq version ", ""), log: filepath.Join(dir, "queries.log")}
	// dnsmasq writes its log synchronously, but may do so as the user it
	// drops to: the file is there for it, writable.
	WriteFile(t, dir, "queries.log", "")
	if err := os.Chmod(d.log, 0o666); err != nil {
		t.Fatal(err)
	}
	if i := strings.IndexByte(d.Version, ' '); i > 0 {
		d.Version = d.Version[:i]
	}
	tlds := map[string]bool{}
	d.Proc = startOwned(t, dir, func(port int) Spec {
		args := []string{
			"--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll",
			"--listen-address=127.0.0.1", "--bind-interfaces",
			"--port=" + strconv.Itoa(port), "--pid-file=", "--cache-size=0",
			"--log-queries", "--log-facility=" + d.log,
			"--local-ttl=" + strconv.Itoa(opts.TTL),
		}
		for _, n := range opts.Names {
			args = append(args, fmt.Sprintf("--host-record=%s,127.0.0.1,%d", n, opts.TTL))
			if i := strings.LastIndexByte(n, '.'); i >= 0 && !tlds[n[i+1:]] {
				tlds[n[i+1:]] = true
				args = append(args, "--local=/"+n[i+1:]+"/")
			}
		}
		return Spec{Path: path, Args: args, Dir: dir}
	})
	return d
}

// Queries counts the queries of type qtype ("A", "AAAA") for name that
// dnsmasq has received so far: every query it answered is counted.
func (d *DNS) Queries(name, qtype string) int {
	return countLines(d.log, "query["+qtype+"] "+name+" from ")
}
