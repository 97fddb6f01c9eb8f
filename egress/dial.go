package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/net/proxy"
)

// newTransport builds the endpoint's own transport. Its dial functions
// turn failures of the egress path into *ProxyError values and feed the
// connection setup time into the endpoint's health.
func (p *Pool) newTransport(e *endpoint) *http.Transport {
	s := &p.set
	nd := &net.Dialer{Timeout: s.dialTimeout, KeepAlive: s.keepAlive, Resolver: s.resolver}
	tr := &http.Transport{
		MaxIdleConns:          s.maxIdleConns,
		MaxIdleConnsPerHost:   s.maxIdleConnsPerHost,
		MaxConnsPerHost:       s.maxConnsPerHost,
		IdleConnTimeout:       s.idleConnTimeout,
		TLSHandshakeTimeout:   s.tlsHandshakeTimeout,
		ResponseHeaderTimeout: s.responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       s.tlsClientConfig.Clone(),
		ForceAttemptHTTP2:     true,
		DialContext:           nd.DialContext,
	}
	switch e.proxy.kind {
	case kindDirect:
		if p.dns != nil {
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				return p.dns.dial(ctx, nd, network, addr)
			}
		}
	case kindHTTP, kindHTTPS:
		tr.Proxy = http.ProxyURL(e.proxy.url)
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			start := p.now()
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, e.fail(ctx, failDial, err)
			}
			if e.proxy.kind == kindHTTP {
				p.sampleSetup(e, p.now().Sub(start))
			}
			return c, nil
		}
		if e.proxy.kind == kindHTTPS {
			tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				return p.dialTLSProxy(ctx, e, nd, network, addr)
			}
		}
		tr.OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			return connectFailure(e.ep.ID, resp, e.proxy.url.User != nil)
		}
	case kindSOCKS5, kindSOCKS5H:
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.dialSOCKS(ctx, e, nd, network, addr)
		}
	}
	return tr
}

// fail wraps an egress-path error, unless the caller's context ended it:
// a cancelled request says nothing about the endpoint.
func (e *endpoint) fail(ctx context.Context, kind string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return &ProxyError{EndpointID: e.ep.ID, Kind: kind, Err: err}
}

// dialTLSProxy dials an https:// proxy and completes TLS with it, using
// Config.ProxyTLSConfig rather than the targets' TLSClientConfig.
func (p *Pool) dialTLSProxy(ctx context.Context, e *endpoint, nd *net.Dialer, network, addr string) (net.Conn, error) {
	start := p.now()
	raw, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, e.fail(ctx, failDial, err)
	}
	cfg := p.set.proxyTLSConfig.Clone()
	if cfg == nil {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = e.proxy.url.Hostname()
	}
	cfg.NextProtos = []string{"http/1.1"} // CONNECT and absolute-form speak HTTP/1.1
	hctx := ctx
	if d := p.set.tlsHandshakeTimeout; d > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, e.fail(ctx, failTLS, err)
	}
	p.sampleSetup(e, p.now().Sub(start))
	return tc, nil
}

// dialSOCKS connects to addr through a SOCKS5 proxy. For socks5 it
// resolves the target's name itself and hands the proxy an address; for
// socks5h it hands the proxy the name.
func (p *Pool) dialSOCKS(ctx context.Context, e *endpoint, nd *net.Dialer, network, addr string) (net.Conn, error) {
	if e.proxy.kind == kindSOCKS5 {
		resolved, err := p.resolveTarget(ctx, addr)
		if err != nil {
			return nil, err // the target's name or our resolver, not the proxy
		}
		addr = resolved
	}
	var auth *proxy.Auth
	if u := e.proxy.url.User; u != nil {
		pw, _ := u.Password()
		auth = &proxy.Auth{User: u.Username(), Password: pw}
	}
	fwd := &sniffDialer{nd: nd}
	d, err := proxy.SOCKS5("tcp", e.proxy.addr, auth, fwd)
	if err != nil {
		return nil, e.fail(ctx, failHandshake, err)
	}
	cd, ok := d.(proxy.ContextDialer)
	if !ok {
		return nil, e.fail(ctx, failHandshake, errors.New("socks dialer without context support"))
	}
	start := p.now()
	c, err := cd.DialContext(ctx, network, addr)
	if err != nil {
		if fwd.err != nil {
			return nil, e.fail(ctx, failDial, fwd.err)
		}
		var seen []byte
		if fwd.conn != nil {
			seen = fwd.conn.seen()
		}
		kind := socksFailure(seen)
		if kind == failAuth {
			err = authCause(auth != nil)
		}
		if rep, ok := socksReply(seen); ok && rep == socksGeneralFailure && e.proxy.kind == kindSOCKS5H && !isIPAddr(addr) {
			// The proxy resolved the name for us, and microsocks 1.0.3
			// (compared in TestRealSOCKS5HUnresolvable) reports a name
			// that does not resolve as a general failure: the target's.
			kind = failDestination
		}
		return nil, e.fail(ctx, kind, err)
	}
	fwd.conn.stop()
	p.sampleSetup(e, p.now().Sub(start))
	return c, nil
}

// resolveTarget resolves a target's name for a socks5 proxy, through the
// DNS cache when it is on.
func (p *Pool) resolveTarget(ctx context.Context, addr string) (string, error) {
	if p.dns != nil {
		return p.dns.resolveAddr(ctx, addr)
	}
	return resolveLocally(ctx, p.set.resolver, addr)
}

// resolveLocally resolves the host of addr, preferring IPv4, and returns
// ip:port. Addresses pass through.
func resolveLocally(ctx context.Context, r *net.Resolver, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupIPAddr(ctx, host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	ip := ips[0].IP
	for _, a := range ips {
		if a.IP.To4() != nil {
			ip = a.IP
			break
		}
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// sniffDialer dials the SOCKS proxy for one connection and remembers
// whether the dial failed, and the bytes the proxy answered during the
// handshake, so that a failure can be told apart by protocol code rather
// than by error text.
type sniffDialer struct {
	nd   *net.Dialer
	err  error
	conn *sniffConn
}

// Dial implements proxy.Dialer.
func (d *sniffDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// DialContext implements proxy.ContextDialer.
func (d *sniffDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.nd.DialContext(ctx, network, addr)
	if err != nil {
		d.err = err
		return nil, err
	}
	d.conn = &sniffConn{Conn: c}
	return d.conn, nil
}

// sniffConn records the first bytes read from the proxy until stopped.
// The handshake runs on one goroutine before the connection is handed to
// the transport, so it needs no lock.
type sniffConn struct {
	net.Conn
	buf  [16]byte
	n    int
	done bool
}

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.done && n > 0 {
		c.n += copy(c.buf[c.n:], b[:n])
	}
	return n, err
}

func (c *sniffConn) stop()        { c.done = true }
func (c *sniffConn) seen() []byte { return c.buf[:c.n] }

// SOCKS5 protocol codes (RFC 1928, RFC 1929).
const (
	socksVersion      = 0x05
	socksNoAcceptable = 0xff
	socksUserPass     = 0x02
)

// socksGeneralFailure is the SOCKS5 reply "general SOCKS server failure".
const socksGeneralFailure = 0x01

// socksReply returns the reply code of the bytes a SOCKS5 proxy sent, if
// they got that far (see socksFailure).
func socksReply(seen []byte) (byte, bool) {
	if len(seen) < 2 || seen[0] != socksVersion || seen[1] == socksNoAcceptable {
		return 0, false
	}
	off := 2
	if seen[1] == socksUserPass {
		if len(seen) < 4 || seen[3] != 0 {
			return 0, false
		}
		off = 4
	}
	if len(seen) < off+2 || seen[off] != socksVersion {
		return 0, false
	}
	return seen[off+1], true
}

// isIPAddr reports whether the host of host:port is an IP address.
func isIPAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && net.ParseIP(host) != nil
}

// socksFailure classifies a failed SOCKS5 handshake from the bytes the
// proxy sent: method selection [VER METHOD], then for username/password
// authentication [VER STATUS], then the reply [VER REP RSV ATYP ...].
func socksFailure(seen []byte) string {
	if len(seen) < 2 || seen[0] != socksVersion {
		return failHandshake
	}
	off := 2
	switch seen[1] {
	case socksNoAcceptable:
		return failAuth
	case socksUserPass:
		if len(seen) < 4 {
			return failAuth // hung up on our credentials
		}
		if seen[3] != 0 {
			return failAuth
		}
		off = 4
	}
	if len(seen) < off+2 || seen[off] != socksVersion {
		return failHandshake
	}
	switch seen[off+1] {
	case 0x00: // succeeded, but the reply was malformed
		return failHandshake
	case 0x04, 0x05, 0x06: // host unreachable, connection refused, TTL expired
		return failDestination
	case 0x07, 0x08: // command or address type not supported
		return failHandshake
	default: // general failure, not allowed by ruleset, network unreachable, unassigned
		return failProxy
	}
}
