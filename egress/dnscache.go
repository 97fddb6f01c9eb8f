package egress

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DNSConfig configures the pool's DNS cache, which resolves target names
// for direct endpoints and socks5:// endpoints (local resolution). It is
// not used for socks5h:// and HTTP proxies, which resolve target names
// themselves, nor for the proxies' own names (Config.Resolver resolves
// those).
//
// The cache asks the DNS servers itself and keeps each answer for its
// TTL: one query per name per TTL, however many connections are dialled.
// Concurrent lookups of one name share one query. A name that does not
// exist is remembered too, for the SOA's negative TTL (RFC 2308). When
// every server fails, an expired answer is served until ServeStale after
// its TTL, and never later (RFC 8767); meanwhile the servers are asked
// again at most every 30 seconds. The cache starts no goroutine of its
// own beyond the lookups in flight, which Pool.Close ends and waits for.
//
// When Config.Resolver has a Dial function, the cache sends its queries
// through it (network "udp", or "tcp" for a truncated answer, and the
// server's address), as net.Resolver does: the cache sits in front of
// that resolver, and a Dial that redirects the queries redirects the
// cache's too.
//
// A lookup that fails at every server, with no answer left to serve, is a
// fault of the egress route, not of the target host: its error reports
// EndpointFault() true, so the chain retries it without counting it
// against the host's circuit breaker (classify.Result.Egress). A name
// that does not exist is the host's own answer and is not such a fault.
//
// Names without a dot (other than "localhost") and names listed in the hosts
// file (HostsFile, /etc/hosts by default, read once when the pool is
// created) are left to Config.Resolver, which applies the system's search
// list and hosts file, so that a name pinned there is dialled where the
// system would dial it; "localhost" and names under it are loopback
// (RFC 6761).
type DNSConfig struct {
	// Disabled turns the cache off: every dial resolves the target's
	// name afresh through Config.Resolver.
	Disabled bool
	// Servers are the DNS servers, "host:port" (or a host, port 53),
	// asked in order until one answers. Empty means the nameservers of
	// /etc/resolv.conf; when that file cannot be read or names none, the
	// cache is off as if Disabled.
	Servers []string
	// MaxEntries bounds the names kept. Default 4096.
	MaxEntries int
	// MaxTTL caps the time an answer is kept. Default 1h.
	MaxTTL time.Duration
	// NegativeTTL caps the time a name that does not exist is remembered;
	// without a SOA in the answer, it is that time. Default 30s.
	NegativeTTL time.Duration
	// ServeStale is how long after its TTL an answer may still be served
	// when every server fails: not at or after the end of the TTL plus
	// ServeStale, whatever the 30-second re-check. Default 1h; negative
	// means never.
	ServeStale time.Duration
	// Timeout bounds each query to one server. Default 2s.
	Timeout time.Duration
	// HostsFile is the hosts file whose names bypass the cache. Empty
	// means /etc/hosts; a file that cannot be read means no such names.
	HostsFile string
}

// DNSStats are the DNS cache's counters since the pool was created;
// telemetry/prometheus exports them (its Config.DNS).
type DNSStats struct {
	// Enabled is false when the cache is off (see DNSConfig).
	Enabled bool
	// Hits counts resolutions answered from the cache within the TTL,
	// negative answers included. Every resolution not cancelled counts in
	// exactly one of Hits, Misses and Stale.
	Hits uint64
	// Misses counts resolutions that waited for a query (their own, or
	// one already in flight for the same name) and got its answer or its
	// failure.
	Misses uint64
	// Stale counts resolutions answered past the TTL because every
	// server failed.
	Stale uint64
	// Waiting is the number of resolutions waiting for a query now.
	Waiting int
	// Queries counts the DNS queries sent.
	Queries uint64
	// Failures counts lookups that failed at every server with no stale
	// answer to fall back on.
	Failures uint64
	// Entries is the number of names cached now.
	Entries int
}

// staleRecheck is how long a stale answer is served after a failed
// refresh before the servers are asked again (RFC 8767's "failure
// recheck timer" suggests 30 seconds).
const staleRecheck = 30 * time.Second

// dnsCache resolves and caches target names. Safe for concurrent use.
type dnsCache struct {
	servers    []string
	udp, tcp   *dns.Client
	now        func() time.Time
	maxTTL     time.Duration
	negTTL     time.Duration
	serveStale time.Duration
	fallback   *net.Resolver // names without a dot, and pinned ones
	// queryDial is Config.Resolver's Dial, through which every query goes;
	// nil dials the servers directly.
	queryDial func(ctx context.Context, network, addr string) (net.Conn, error)
	pinned    map[string]bool // names of the hosts file

	base   context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // lookups in flight

	// mu guards entries, calls, closed and every entry's fields.
	mu      sync.Mutex
	entries genCache[*dnsEntry]
	calls   map[string]*dnsCall // lookups in flight, by name
	closed  bool                // close was called: no lookup starts

	hits, misses, stale, queries, failures atomic.Uint64
	waiting                                atomic.Int64
}

// dnsEntry is one name's answer. No addresses means the name does not
// exist.
type dnsEntry struct {
	addrs   []netip.Addr
	expires time.Time // end of the TTL
	// recheck is, after a failed refresh, when the servers are asked
	// again: until then the answer is served stale. It is never later
	// than expires + ServeStale.
	recheck time.Time
}

// dnsCall is a lookup in flight, shared by every resolution of its name.
type dnsCall struct {
	done  chan struct{}
	addrs []netip.Addr
	stale bool
	err   error
}

// newDNSCache returns the cache described by c, or nil when it is off.
func newDNSCache(c DNSConfig, now func() time.Time, fallback *net.Resolver) (*dnsCache, error) {
	if c.Disabled {
		return nil, nil
	}
	servers := c.Servers
	if len(servers) == 0 {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(cc.Servers) == 0 {
			return nil, nil
		}
		for _, s := range cc.Servers {
			servers = append(servers, net.JoinHostPort(s, cc.Port))
		}
	}
	norm := make([]string, len(servers))
	for i, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(strings.Trim(s, "[]"), "53")
		}
		if host, _, _ := net.SplitHostPort(s); host == "" {
			return nil, &configError{Field: "DNS.Servers", Value: s, Err: errBadSetting}
		}
		norm[i] = s
	}
	bad := func(field string, d time.Duration) (*dnsCache, error) {
		return nil, &configError{Field: field, Value: d.String(), Err: errBadSetting}
	}
	switch {
	case c.MaxEntries < 0:
		return nil, &configError{Field: "DNS.MaxEntries", Value: fmt.Sprint(c.MaxEntries), Err: errBadSetting}
	case c.MaxTTL < 0:
		return bad("DNS.MaxTTL", c.MaxTTL)
	case c.NegativeTTL < 0:
		return bad("DNS.NegativeTTL", c.NegativeTTL)
	case c.Timeout < 0:
		return bad("DNS.Timeout", c.Timeout)
	}
	timeout := cmp.Or(c.Timeout, 2*time.Second)
	d := &dnsCache{
		servers:    norm,
		udp:        &dns.Client{Net: "udp", Timeout: timeout},
		tcp:        &dns.Client{Net: "tcp", Timeout: timeout},
		now:        now,
		maxTTL:     cmp.Or(c.MaxTTL, time.Hour),
		negTTL:     cmp.Or(c.NegativeTTL, 30*time.Second),
		serveStale: orDefault(c.ServeStale, time.Hour),
		fallback:   fallback,
		pinned:     readHosts(c.HostsFile),
		calls:      map[string]*dnsCall{},
	}
	if fallback != nil {
		d.queryDial = fallback.Dial
	}
	d.entries.init(cmp.Or(c.MaxEntries, 4096))
	d.base, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// close ends the lookups in flight and waits for them; no lookup starts
// afterwards, so none outlives it.
func (d *dnsCache) close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}

func (d *dnsCache) stats() DNSStats {
	if d == nil {
		return DNSStats{}
	}
	d.mu.Lock()
	n := d.entries.len()
	d.mu.Unlock()
	return DNSStats{
		Enabled:  true,
		Hits:     d.hits.Load(),
		Misses:   d.misses.Load(),
		Stale:    d.stale.Load(),
		Queries:  d.queries.Load(),
		Failures: d.failures.Load(),
		Waiting:  int(d.waiting.Load()),
		Entries:  n,
	}
}

// notFound is the error of a name that does not exist.
func notFound(name string) error {
	return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// lookup returns the addresses of name (lower case, no trailing dot).
func (d *dnsCache) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	now := d.now()
	d.mu.Lock()
	if e, _ := d.entries.get(name); e != nil {
		switch {
		case now.Before(e.expires):
			d.mu.Unlock()
			d.hits.Add(1)
			return answer(name, e.addrs)
		case now.Before(e.recheck):
			d.mu.Unlock()
			d.stale.Add(1)
			return answer(name, e.addrs)
		}
	}
	call := d.calls[name]
	if call == nil {
		if d.closed {
			// A dial still running when the pool closed: start no
			// lookup that Close would not wait for.
			d.mu.Unlock()
			return nil, &net.DNSError{Err: ErrClosed.Error(), Name: name}
		}
		call = &dnsCall{done: make(chan struct{})}
		d.calls[name] = call
		d.wg.Add(1)
		go d.resolve(name, call)
	}
	d.mu.Unlock()
	d.waiting.Add(1)
	select {
	case <-call.done:
		d.waiting.Add(-1)
	case <-ctx.Done():
		d.waiting.Add(-1)
		return nil, ctx.Err()
	}
	if call.stale {
		d.stale.Add(1)
	} else {
		d.misses.Add(1)
	}
	if call.err != nil {
		return nil, call.err
	}
	return answer(name, call.addrs)
}

func answer(name string, addrs []netip.Addr) ([]netip.Addr, error) {
	if len(addrs) == 0 {
		return nil, notFound(name)
	}
	return addrs, nil
}

// resolve runs one lookup for name and settles call.
func (d *dnsCache) resolve(name string, call *dnsCall) {
	defer d.wg.Done()
	addrs, ttl, err := d.query(name)
	now := d.now()
	d.mu.Lock()
	delete(d.calls, name)
	old, _ := d.entries.get(name)
	switch {
	case err == nil:
		d.entries.put(name, &dnsEntry{addrs: addrs, expires: now.Add(ttl)})
		call.addrs = addrs
	case old != nil && d.serveStale > 0 && now.Before(old.expires.Add(d.serveStale)):
		old.recheck = now.Add(staleRecheck)
		if end := old.expires.Add(d.serveStale); end.Before(old.recheck) {
			old.recheck = end
		}
		call.addrs, call.stale = old.addrs, true
	default:
		d.failures.Add(1)
		call.err = &resolverError{&net.DNSError{Err: err.Error(), Name: name, IsTemporary: true}}
	}
	d.mu.Unlock()
	close(call.done)
}

// resolverError is the failure of every DNS server with no answer to
// serve: the egress route's fault, not the target host's (see DNSConfig).
type resolverError struct{ *net.DNSError }

// Unwrap returns the *net.DNSError.
func (e *resolverError) Unwrap() error { return e.DNSError }

// EndpointFault reports true: the route failed to resolve, the host said
// nothing.
func (e *resolverError) EndpointFault() bool { return true }

// isLocalhost reports whether name is "localhost" or a name under it.
func isLocalhost(name string) bool {
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// addrs resolves host for a dial: an address stands for itself,
// localhost is loopback, a name without a dot goes to the fallback
// resolver (nil addresses, nil error: dial the name as given).
func (d *dnsCache) addrs(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case isLocalhost(name):
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case !strings.Contains(name, "."), d.pinned[name]:
		return nil, nil
	}
	return d.lookup(ctx, name)
}

// dial dials addr, resolving its host through the cache and trying each
// address in turn.
func (d *dnsCache) dial(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := d.addrs(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if ips == nil {
		return nd.DialContext(ctx, network, addr)
	}
	var last error
	for _, ip := range ips {
		if (network == "tcp4" && !ip.Is4()) || (network == "tcp6" && !ip.Is6()) {
			continue
		}
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "no suitable address", Addr: host}}
	}
	return nil, last
}

// resolveAddr returns ip:port for addr, for a socks5 proxy that is handed
// an address.
func (d *dnsCache) resolveAddr(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	ips, err := d.addrs(ctx, host)
	if err != nil {
		return "", err
	}
	if ips == nil {
		return resolveLocally(ctx, d.fallback, addr)
	}
	ip := ips[0]
	for _, a := range ips {
		if a.Is4() {
			ip = a
			break
		}
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// DNSStats returns the DNS cache's counters; Enabled is false when the
// cache is off.
func (p *Pool) DNSStats() DNSStats { return p.dns.stats() }
