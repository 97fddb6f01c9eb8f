package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The DNS cache's questions to the servers, and the hosts file it leaves
// to the system resolver.

// query asks for A records, then AAAA records when there are none. A name
// that does not exist is an answer without addresses.
func (d *dnsCache) query(name string) ([]netip.Addr, time.Duration, error) {
	fqdn := dns.Fqdn(name)
	neg := d.negTTL
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		r, err := d.exchange(fqdn, qt)
		if err != nil {
			return nil, 0, err
		}
		neg = min(neg, soaTTL(r, d.negTTL))
		if r.Rcode == dns.RcodeNameError {
			return nil, neg, nil
		}
		var addrs []netip.Addr
		ttl := d.maxTTL
		for _, rr := range r.Answer {
			ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
			var ip net.IP
			switch rr := rr.(type) {
			case *dns.A:
				ip = rr.A
			case *dns.AAAA:
				ip = rr.AAAA
			default:
				continue
			}
			if a, ok := netip.AddrFromSlice(ip); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(addrs) > 0 {
			return addrs, ttl, nil
		}
	}
	return nil, neg, nil
}

// soaTTL is the negative TTL a response's SOA allows (RFC 2308 §5), or
// def when it carries none.
func soaTTL(r *dns.Msg, def time.Duration) time.Duration {
	for _, rr := range r.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return time.Duration(min(soa.Hdr.Ttl, soa.Minttl)) * time.Second
		}
	}
	return def
}

// errServers is the failure of every server.
var errServers = errors.New("DNS servers failed")

// exchange sends one question to each server in turn until one answers
// with NOERROR or NXDOMAIN.
func (d *dnsCache) exchange(fqdn string, qtype uint16) (*dns.Msg, error) {
	last := errServers
	for _, s := range d.servers {
		m := new(dns.Msg)
		m.SetQuestion(fqdn, qtype)
		ctx, cancel := context.WithTimeout(d.base, d.udp.Timeout)
		d.queries.Add(1)
		r, err := d.ask(ctx, d.udp, m, s)
		if err == nil && r.Truncated {
			d.queries.Add(1)
			r, err = d.ask(ctx, d.tcp, m, s)
		}
		cancel()
		switch {
		case err != nil:
			last = fmt.Errorf("%w: %s: %w", errServers, s, err)
		case r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError:
			return r, nil
		default:
			last = fmt.Errorf("%w: %s answered %s", errServers, s, dns.RcodeToString[r.Rcode])
		}
		if d.base.Err() != nil {
			break
		}
	}
	return nil, last
}

// ask sends m to server over c's network, through the dial function of
// Config.Resolver when it has one.
func (d *dnsCache) ask(ctx context.Context, c *dns.Client, m *dns.Msg, server string) (*dns.Msg, error) {
	if d.queryDial == nil {
		r, _, err := c.ExchangeContext(ctx, m, server)
		return r, err
	}
	conn, err := d.queryDial(ctx, c.Net, server)
	if err != nil {
		return nil, err
	}
	co := &dns.Conn{Conn: conn}
	defer co.Close()
	r, _, err := c.ExchangeWithConnContext(ctx, m, co)
	return r, err
}

// readHosts returns the names of a hosts file (lower-cased, without a
// trailing dot); nil when it cannot be read.
func readHosts(path string) map[string]bool {
	if path == "" {
		path = "/etc/hosts"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	names := make(map[string]bool)
	for line := range strings.Lines(string(b)) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if _, err := netip.ParseAddr(f[0]); err != nil {
			continue
		}
		for _, n := range f[1:] {
			names[strings.TrimSuffix(strings.ToLower(n), ".")] = true
		}
	}
	return names
}
