package egress_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egresskit/egresskit/egress"
)

// dnsServer is a DNS server on loopback UDP for tests (miekg/dns): it
// answers A queries for the names in its zone with 127.0.0.1, NXDOMAIN
// with a SOA for others, and counts the queries per name.
type dnsServer struct {
	addr string
	srv  *dns.Server

	mu      sync.Mutex
	ttl     uint32
	zone    map[string]string // fqdn → IPv4 or IPv6 address
	queries map[string]int    // "name type" → count
	fail    bool              // answer SERVFAIL
	hold    chan struct{}     // when set, answers wait for it to close
}

func newDNSServer(t *testing.T, ttl uint32, names ...string) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{addr: pc.LocalAddr().String(), ttl: ttl, zone: map[string]string{}, queries: map[string]int{}}
	for _, n := range names {
		s.zone[dns.Fqdn(n)] = "127.0.0.1"
	}
	started := make(chan struct{})
	s.srv = &dns.Server{PacketConn: pc, Handler: s, NotifyStartedFunc: func() { close(started) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.srv.ActivateAndServe()
	}()
	<-started
	t.Cleanup(func() {
		s.srv.Shutdown()
		<-done
	})
	return s
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	s.mu.Lock()
	s.queries[strings.TrimSuffix(q.Name, ".")+" "+dns.TypeToString[q.Qtype]]++
	hold, fail, ttl, ip := s.hold, s.fail, s.ttl, s.zone[strings.ToLower(q.Name)]
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	m := new(dns.Msg)
	m.SetReply(req)
	switch {
	case fail:
		m.Rcode = dns.RcodeServerFailure
	case ip == "":
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, &dns.SOA{
			Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300},
			Ns:  "ns.test.", Mbox: "hostmaster.test.", Serial: 1, Refresh: 60, Retry: 60, Expire: 600, Minttl: 20,
		})
	case q.Qtype == dns.TypeA && strings.Contains(ip, "."):
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   net.ParseIP(ip),
		})
	case q.Qtype == dns.TypeAAAA && strings.Contains(ip, ":"):
		m.Answer = append(m.Answer, &dns.AAAA{
			Hdr:  dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl},
			AAAA: net.ParseIP(ip),
		})
	}
	w.WriteMsg(m)
}

func (s *dnsServer) count(name, qtype string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[name+" "+qtype]
}

func (s *dnsServer) setFail(v bool) {
	s.mu.Lock()
	s.fail = v
	s.mu.Unlock()
}

// withHost is rawURL with its host replaced by name.
func withHost(rawURL, name string) string {
	u, _ := url.Parse(rawURL)
	u.Host = net.JoinHostPort(name, u.Port())
	return u.String()
}

// get sends a GET on a fresh connection, so that every request dials.
func get(ctx context.Context, rt http.RoundTripper, u string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Close = true
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// TestDNSCacheOneLookupPerTTL sends 1,000 requests to one host, each on
// a new connection, eight at a time: the DNS server sees one query.
func TestDNSCacheOneLookupPerTTL(t *testing.T) {
	ns := newDNSServer(t, 300, "origin.test")
	target := newTarget(t, http.StatusOK, false)
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       egress.DNSConfig{Servers: []string{ns.addr}},
	})
	u := withHost(target.URL, "origin.test")
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for range 125 {
				if err := get(context.Background(), pool, u); err != nil {
					failed.Add(1)
					t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	st := pool.DNSStats()
	t.Logf("1000 requests: %d A queries, stats %+v", ns.count("origin.test", "A"), st)
	if got := ns.count("origin.test", "A"); got != 1 {
		t.Errorf("the DNS server saw %d A queries for 1000 requests within the TTL, want 1", got)
	}
	if !st.Enabled || st.Queries != 1 || st.Hits+st.Misses != 1000 || st.Hits < 992 || st.Entries != 1 {
		t.Errorf("DNSStats = %+v, want 1 query, 1000 resolutions of which at most 8 misses, 1 entry", st)
	}
}

// TestDNSCacheExpiryStaleAndNegative walks the clock through a TTL:
// expiry asks again, a failing server serves the stale answer (and is
// not asked again for a while), and a name that does not exist is
// remembered for the SOA's negative TTL.
func TestDNSCacheExpiryStaleAndNegative(t *testing.T) {
	ns := newDNSServer(t, 60, "origin.test")
	target := newTarget(t, http.StatusOK, false)
	clock := newFakeClock()
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       egress.DNSConfig{Servers: []string{ns.addr}, ServeStale: 10 * time.Minute},
		Now:       clock.Now,
	})
	ctx := context.Background()
	u := withHost(target.URL, "origin.test")
	step := func(what string, wantErr bool, wantQueries int) {
		t.Helper()
		err := get(ctx, pool, u)
		if (err != nil) != wantErr {
			t.Fatalf("%s: request error %v, want error: %v", what, err, wantErr)
		}
		if got := ns.count("origin.test", "A"); got != wantQueries {
			t.Fatalf("%s: %d A queries so far, want %d", what, got, wantQueries)
		}
	}
	step("first request", false, 1)
	clock.Advance(59 * time.Second)
	step("within the TTL", false, 1)
	clock.Advance(2 * time.Second)
	step("after the TTL", false, 2)

	ns.setFail(true)
	clock.Advance(61 * time.Second)
	step("server failing: stale answer", false, 3)
	clock.Advance(10 * time.Second)
	step("server failing: stale again, no new query yet", false, 3)
	clock.Advance(30 * time.Second)
	step("server failing: recheck, stale again", false, 4)
	if st := pool.DNSStats(); st.Stale != 3 || st.Hits+st.Misses+st.Stale != 6 || st.Waiting != 0 {
		t.Errorf("DNSStats = %+v, want 3 stale of 6 resolutions, none waiting", st)
	}
	clock.Advance(10 * time.Minute)
	err := get(ctx, pool, u)
	var de *net.DNSError
	if !errors.As(err, &de) || de.Name != "origin.test" || !de.IsTemporary {
		t.Fatalf("past ServeStale with the server failing: %v, want a temporary *net.DNSError for origin.test", err)
	}
	ns.setFail(false)
	clock.Advance(time.Minute)
	step("server back", false, 6)

	// Negative caching: NXDOMAIN with a SOA whose minimum is 20s.
	missing := withHost(target.URL, "missing.test")
	for i := range 3 {
		err := get(ctx, pool, missing)
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Fatalf("request %d to missing.test: %v, want a not-found *net.DNSError", i, err)
		}
	}
	if got := ns.count("missing.test", "A"); got != 1 {
		t.Errorf("missing.test: %d A queries for 3 requests within the negative TTL, want 1", got)
	}
	clock.Advance(21 * time.Second)
	get(ctx, pool, missing)
	if got := ns.count("missing.test", "A"); got != 2 {
		t.Errorf("missing.test: %d A queries after the negative TTL, want 2", got)
	}
}

// TestDNSCacheSingleflight starts many resolutions of a cold name while
// the server holds its answer: they share one query.
func TestDNSCacheSingleflight(t *testing.T) {
	ns := newDNSServer(t, 300, "origin.test")
	hold := make(chan struct{})
	ns.mu.Lock()
	ns.hold = hold
	ns.mu.Unlock()
	target := newTarget(t, http.StatusOK, false)
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       egress.DNSConfig{Servers: []string{ns.addr}},
	})
	u := withHost(target.URL, "origin.test")
	const n = 50
	errs := make(chan error, n)
	for range n {
		go func() { errs <- get(context.Background(), pool, u) }()
	}
	for pool.DNSStats().Waiting < n {
		runtime.Gosched() // until every resolution waits on the held query
	}
	close(hold)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ns.count("origin.test", "A"); got != 1 {
		t.Errorf("%d concurrent resolutions sent %d A queries, want 1", n, got)
	}
}

// TestDNSCacheBounded resolves more names than the cache holds.
func TestDNSCacheBounded(t *testing.T) {
	var names []string
	for _, c := range "abcdefghijklmnopqrst" {
		names = append(names, string(c)+".test")
	}
	ns := newDNSServer(t, 300, names...)
	target := newTarget(t, http.StatusOK, false)
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       egress.DNSConfig{Servers: []string{ns.addr}, MaxEntries: 8},
	})
	for _, n := range names {
		if err := get(context.Background(), pool, withHost(target.URL, n)); err != nil {
			t.Fatal(err)
		}
	}
	if st := pool.DNSStats(); st.Entries > 8 || st.Entries < 4 {
		t.Errorf("DNSStats.Entries = %d after 20 names, want between 4 and 8", st.Entries)
	}
}

// TestDNSCacheOnlyForLocalResolution checks that socks5 resolves through
// the cache, while socks5h and HTTP proxies hand the proxy the name and
// ask the DNS server nothing.
func TestDNSCacheOnlyForLocalResolution(t *testing.T) {
	ns := newDNSServer(t, 300, "origin.test")
	target := newTarget(t, http.StatusOK, false)
	for _, tc := range []struct {
		scheme   string
		wantATYP byte
		wantHost string
		queries  int
	}{
		{"socks5", 1, "127.0.0.1", 1},
		{"socks5h", 3, "origin.test", 0},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			sp := newSOCKSProxy(t, "socks", "", "")
			pool := newPool(t, egress.Config{
				Endpoints: []egress.Endpoint{{ID: "s", Proxy: sp.URL(tc.scheme, "")}},
				DNS:       egress.DNSConfig{Servers: []string{ns.addr}},
			})
			before := ns.count("origin.test", "A")
			fetch(context.Background(), pool, withHost(target.URL, "origin.test")) // socks5h may fail at the proxy
			if _, atyp, host := sp.seen(); atyp != tc.wantATYP || host != tc.wantHost {
				t.Errorf("proxy saw address type %d host %q, want %d %q", atyp, host, tc.wantATYP, tc.wantHost)
			}
			if got := ns.count("origin.test", "A") - before; got != tc.queries {
				t.Errorf("%s sent %d DNS queries, want %d", tc.scheme, got, tc.queries)
			}
		})
	}
	t.Run("http", func(t *testing.T) {
		hp := newHTTPProxy(t, "http")
		pool := newPool(t, egress.Config{
			Endpoints: []egress.Endpoint{{ID: "h", Proxy: hp.URL("")}},
			DNS:       egress.DNSConfig{Servers: []string{ns.addr}},
		})
		before := ns.count("origin.test", "A")
		fetch(context.Background(), pool, withHost(target.URL, "origin.test"))
		if requests, _, _, _ := hp.counts(); requests != 1 {
			t.Errorf("the proxy saw %d requests, want 1", requests)
		}
		if got := ns.count("origin.test", "A") - before; got != 0 {
			t.Errorf("an HTTP proxy endpoint sent %d DNS queries, want 0", got)
		}
	})
}

func TestDNSConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dns   egress.DNSConfig
		field string
	}{
		{"negative entries", egress.DNSConfig{MaxEntries: -1}, "DNS.MaxEntries"},
		{"negative TTL", egress.DNSConfig{MaxTTL: -time.Second}, "DNS.MaxTTL"},
		{"negative negative TTL", egress.DNSConfig{NegativeTTL: -time.Second}, "DNS.NegativeTTL"},
		{"negative timeout", egress.DNSConfig{Timeout: -time.Second}, "DNS.Timeout"},
		{"server without host", egress.DNSConfig{Servers: []string{":53"}}, "DNS.Servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.dns.Servers = append(tc.dns.Servers, "127.0.0.1:53")
			_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "d"}}, DNS: tc.dns})
			var ce *egress.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, egress.ErrBadSetting) {
				t.Errorf("New = %v, want a *ConfigError for %s", err, tc.field)
			}
		})
	}
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "d"}}, DNS: egress.DNSConfig{Disabled: true}})
	if st := pool.DNSStats(); st.Enabled {
		t.Errorf("DNSStats with the cache disabled = %+v, want Enabled false", st)
	}
}

// TestDNSCacheIPv6Only resolves a name with only an AAAA record: the A
// query finds no data, the AAAA query answers, and both are cached.
func TestDNSCacheIPv6Only(t *testing.T) {
	ns := newDNSServer(t, 300)
	ns.mu.Lock()
	ns.zone["v6.test."] = "::1"
	ns.mu.Unlock()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	target.Listener.Close()
	target.Listener = ln
	target.Start()
	t.Cleanup(target.Close)
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       egress.DNSConfig{Servers: []string{ns.addr}},
	})
	for range 3 {
		if err := get(context.Background(), pool, withHost(target.URL, "v6.test")); err != nil {
			t.Fatal(err)
		}
	}
	if a, aaaa := ns.count("v6.test", "A"), ns.count("v6.test", "AAAA"); a != 1 || aaaa != 1 {
		t.Errorf("3 requests to an IPv6-only name sent %d A and %d AAAA queries, want 1 and 1", a, aaaa)
	}
}

// TestDNSCacheHonoursContext: a caller whose context ends while the
// server holds the answer returns at once; the lookup itself ends with
// the pool (goleak checks that nothing outlives it).
func TestDNSCacheHonoursContext(t *testing.T) {
	ns := newDNSServer(t, 300, "origin.test")
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	ns.mu.Lock()
	ns.hold = hold
	ns.mu.Unlock()
	target := newTarget(t, http.StatusOK, false)
	pool, err := egress.New(egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		DNS:       egress.DNSConfig{Servers: []string{ns.addr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- get(ctx, pool, withHost(target.URL, "origin.test")) }()
	for pool.DNSStats().Waiting < 1 {
		runtime.Gosched() // until the resolution waits on the held query
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("request whose context ended during the lookup: %v, want context.Canceled", err)
	}
	pool.Close() // ends the held lookup and waits for it
}

// TestDNSCacheLeavesHostsFileNames checks that a name of the hosts file is
// resolved as the system resolves it (Config.Resolver), never by the
// cache's servers, while other names still go through the cache.
func TestDNSCacheLeavesHostsFileNames(t *testing.T) {
	cacheNS := newDNSServer(t, 300, "origin.test", "pinned.test")
	systemNS := newDNSServer(t, 300, "pinned.test")
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("# comment\n127.0.0.1 localhost\n127.0.0.1\tPinned.Test. other # trailing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The system resolver asks the nameservers of /etc/resolv.conf, which
	// its Dial sends to systemNS; the cache's queries go through the same
	// Dial, to the cache's own server.
	system := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, addr string) (net.Conn, error) {
		var d net.Dialer
		if addr == cacheNS.addr {
			return d.DialContext(ctx, "udp", addr)
		}
		return d.DialContext(ctx, "udp", systemNS.addr)
	}}
	target := newTarget(t, http.StatusOK, false)
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}},
		Resolver:  system,
		DNS:       egress.DNSConfig{Servers: []string{cacheNS.addr}, HostsFile: hosts},
	})
	for _, name := range []string{"pinned.test", "origin.test"} {
		if err := get(context.Background(), pool, withHost(target.URL, name)); err != nil {
			t.Fatalf("GET through %s: %v", name, err)
		}
	}
	if got := cacheNS.count("pinned.test", "A"); got != 0 {
		t.Errorf("the cache asked its servers %d times for a name of the hosts file, want 0", got)
	}
	if got := systemNS.count("pinned.test", "A"); got == 0 {
		t.Error("a name of the hosts file did not reach Config.Resolver")
	}
	if got := cacheNS.count("origin.test", "A"); got != 1 {
		t.Errorf("the cache asked %d times for a name not in the hosts file, want 1", got)
	}
}
