package egress_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/testprog"
)

// The tests in this file run against real proxies started by package
// testprog: squid 5.7 (Debian's GnuTLS build), tinyproxy 1.11.1 and
// microsocks 1.0.3. They skip when a program is missing, and fail instead
// when EGRESSKIT_REQUIRE_PROGRAMS=1, as in CI.

const (
	realUser = "crawler"
	realPass = "pw-Real-7Hq2"
)

// realEndpoint is one way through a real proxy.
type realEndpoint struct {
	name  string
	start func(testing.TB, testprog.ProxyOptions) *testprog.Proxy
	tls   bool   // squid's TLS port
	url   string // scheme for URLWith
}

var realKinds = []realEndpoint{
	{"squid http", testprog.Squid, false, "http"},
	{"squid https-to-proxy", testprog.Squid, true, "https"},
	{"tinyproxy http", testprog.Tinyproxy, false, "http"},
	{"microsocks socks5", testprog.Microsocks, false, "socks5"},
	{"microsocks socks5h", testprog.Microsocks, false, "socks5h"},
}

// start starts the proxy with the test account and returns it.
func (k realEndpoint) startProxy(t *testing.T) *testprog.Proxy {
	t.Helper()
	p := k.start(t, testprog.ProxyOptions{User: realUser, Pass: realPass, TLS: k.tls})
	t.Logf("%s %s", p.Program, p.Version)
	return p
}

// pool builds a one-endpoint pool through p with the given credentials,
// trusting target and the proxy's test CA.
func (k realEndpoint) pool(t *testing.T, p *testprog.Proxy, user, pass string, target *tlsTarget) *egress.Pool {
	t.Helper()
	cfg := egress.Config{Endpoints: []egress.Endpoint{{ID: "real", Proxy: p.URLWith(k.url, user, pass)}}}
	if target != nil {
		cfg.TLSClientConfig = target.tls
	}
	if p.CA != nil {
		cfg.ProxyTLSConfig = p.TLSConfig()
	}
	return newPool(t, cfg)
}

// tlsTarget holds the TLS trust of the targets of a test.
type tlsTarget struct{ tls *tls.Config }

// TestRealProxyKinds sends http and https requests through every kind of
// endpoint (http, https-to-proxy, socks5, socks5h) to real proxies: each
// arrives, the proxy counts it, and the endpoint's health stays perfect.
func TestRealProxyKinds(t *testing.T) {
	for _, k := range realKinds {
		t.Run(k.name, func(t *testing.T) {
			p := k.startProxy(t)
			plain := newTarget(t, http.StatusOK, false)
			secure := newTarget(t, http.StatusOK, true)
			pool := k.pool(t, p, realUser, realPass, &tlsTarget{trustServer(secure)})
			for _, target := range []string{plain.URL, secure.URL} {
				r := fetch(context.Background(), pool, target)
				if r.err != nil || r.status != http.StatusOK || r.body != "hello from target" {
					t.Errorf("GET %s through %s = %d %q, %v; want 200", target, k.name, r.status, r.body, r.err)
				}
			}
			if p.Program != "microsocks" {
				// The plain http request went in absolute form: the proxy's Via reached the target.
				if r := fetch(context.Background(), pool, plain.URL); !strings.Contains(r.via, p.Program) {
					t.Errorf("Via seen by the target = %q, want %s's", r.via, p.Program)
				}
			}
			// squid logs a CONNECT tunnel only when it closes, and the
			// pool keeps it open: count at least the plain requests.
			if got := p.Forwarded(); got < 1 {
				t.Errorf("%s forwarded %d requests, want at least 1", p.Program, got)
			}
			if st := stateOf(t, pool, "real"); st.Score != 1 || st.Quarantined {
				t.Errorf("health after successes = %+v, want perfect", st)
			}
		})
	}
}

// TestRealAuthRefused presents no credentials and a wrong password to each
// real proxy, for http and https targets: each refusal is a *ProxyError of
// failAuth naming the cause (tinyproxy's 401 to a wrong password
// included), the endpoint is quarantined at once, the proxy forwards
// nothing, and the next request's ErrNoEndpoint names the cause.
func TestRealAuthRefused(t *testing.T) {
	for _, k := range realKinds {
		for _, creds := range []struct {
			name, user, pass string
			want             error
		}{
			{"no credentials", "", "", egress.ErrProxyAuthRequired},
			{"wrong password", realUser, "pw-Wrong-0x", egress.ErrProxyAuthRejected},
		} {
			for _, secure := range []bool{false, true} {
				name := k.name + "/" + creds.name + "/http"
				if secure {
					name += "s"
				}
				t.Run(name, func(t *testing.T) {
					p := k.startProxy(t)
					target := newTarget(t, http.StatusOK, secure)
					pool := k.pool(t, p, creds.user, creds.pass, &tlsTarget{trustServer(target)})
					r := fetch(context.Background(), pool, target.URL)
					var pe *egress.ProxyError
					if !errors.As(r.err, &pe) || pe.Kind != egress.KindAuth || !errors.Is(r.err, creds.want) {
						t.Fatalf("fetch = %d, %v; want a failAuth *ProxyError wrapping %v", r.status, r.err, creds.want)
					}
					t.Logf("%s: %v", name, r.err)
					if strings.Contains(r.err.Error(), "pw-") {
						t.Errorf("error %q contains a password", r.err)
					}
					if st := stateOf(t, pool, "real"); !st.Quarantined {
						t.Errorf("endpoint not quarantined after %v: %+v", r.err, st)
					}
					r = fetch(context.Background(), pool, target.URL)
					if !errors.Is(r.err, egress.ErrNoEndpoint) || !errors.Is(r.err, creds.want) {
						t.Errorf("second fetch = %v, want ErrNoEndpoint naming %v", r.err, creds.want)
					}
					if n := p.Forwarded(); n != 0 {
						t.Errorf("%s forwarded %d requests with bad credentials", p.Program, n)
					}
				})
			}
		}
	}
}

// TestRealDeadTarget asks each real proxy for a target whose port is
// closed: the proxy's report (squid's ERR_CONNECT_FAIL, tinyproxy's "500
// Unable to connect", SOCKS reply 5) is the target's failure, and the
// endpoint's health is untouched.
func TestRealDeadTarget(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	for _, k := range realKinds {
		for _, scheme := range []string{"http", "https"} {
			t.Run(k.name+"/"+scheme, func(t *testing.T) {
				p := k.startProxy(t)
				pool := k.pool(t, p, realUser, realPass, nil)
				for range 4 { // more than QuarantineAfter
					r := fetch(context.Background(), pool, scheme+"://"+dead+"/")
					var pe *egress.ProxyError
					switch {
					case errors.As(r.err, &pe):
						if pe.Kind != egress.KindDestination || pe.EndpointFault() {
							t.Fatalf("dead target through %s: %v (kind %q), want failDestination", k.name, r.err, pe.Kind)
						}
					case r.err != nil:
						t.Fatalf("dead target through %s: %v, want a failDestination *ProxyError or the proxy's error page", k.name, r.err)
					case r.status < 500:
						t.Fatalf("dead target through %s answered %d, want the proxy's 5xx", k.name, r.status)
					}
				}
				if st := stateOf(t, pool, "real"); st.Score != 1 || st.Quarantined || st.Degraded {
					t.Errorf("health after a dead target = %+v, want untouched", st)
				}
			})
		}
	}
}

// TestRealProxyDownAndUntrusted covers the two other causes a caller must
// be told: a proxy that is down (connection refused) and an https proxy
// whose certificate is not trusted. Both end in ErrNoEndpoint naming the
// cause.
func TestRealProxyDownAndUntrusted(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	t.Run("proxy down", func(t *testing.T) {
		p := testprog.Squid(t, testprog.ProxyOptions{User: realUser, Pass: realPass})
		pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "real", Proxy: p.URL()}}})
		p.Kill()
		var last error
		for range 4 {
			last = fetch(context.Background(), pool, target.URL).err
		}
		if !errors.Is(last, egress.ErrNoEndpoint) || !errors.Is(last, syscall.ECONNREFUSED) {
			t.Errorf("after the proxy died: %v, want ErrNoEndpoint naming connection refused", last)
		}
		var pe *egress.ProxyError
		if !errors.As(last, &pe) || pe.Kind != egress.KindDial {
			t.Errorf("cause = %v, want a failDial *ProxyError", last)
		}
	})
	t.Run("untrusted proxy certificate", func(t *testing.T) {
		p := testprog.Squid(t, testprog.ProxyOptions{User: realUser, Pass: realPass, TLS: true})
		pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "real", Proxy: p.TLSURL()}}})
		r := fetch(context.Background(), pool, target.URL)
		var ua x509.UnknownAuthorityError
		if !errors.As(r.err, &ua) {
			t.Fatalf("fetch = %v, want an unknown-authority error", r.err)
		}
		if st := stateOf(t, pool, "real"); !st.Quarantined {
			t.Errorf("endpoint not quarantined after an untrusted certificate: %+v", st)
		}
		r = fetch(context.Background(), pool, target.URL)
		if !errors.Is(r.err, egress.ErrNoEndpoint) || !errors.As(r.err, &ua) {
			t.Errorf("second fetch = %v, want ErrNoEndpoint naming the unknown authority", r.err)
		}
		if p.Forwarded() != 0 {
			t.Error("squid forwarded a request over an untrusted TLS connection")
		}
	})
}

// TestRealCloseIdleConnections crawls through squid and checks that
// Pool.CloseIdleConnections leaves no connection to the proxy.
func TestRealCloseIdleConnections(t *testing.T) {
	p := testprog.Squid(t, testprog.ProxyOptions{User: realUser, Pass: realPass})
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "real", Proxy: p.URL()}}})
	for range 3 {
		for _, target := range []string{newTarget(t, 200, false).URL, newTarget(t, 200, false).URL} {
			if r := fetch(context.Background(), pool, target); r.err != nil || r.status != 200 {
				t.Fatalf("GET %s = %d, %v", target, r.status, r.err)
			}
		}
	}
	if n := testprog.Established(t, p.Addr); n == 0 {
		t.Fatal("no idle connection to squid after the crawl: the test would prove nothing")
	}
	pool.CloseIdleConnections()
	if n := testprog.Established(t, p.Addr); n != 0 {
		t.Errorf("%d connections to squid after CloseIdleConnections, want 0", n)
	}
}

// TestRealSOCKS5HUnresolvable asks microsocks, through socks5h, for a name
// that does not resolve: microsocks answers "general failure" (reply 1),
// which for a name the proxy resolved is the target's failure, not the
// endpoint's.
func TestRealSOCKS5HUnresolvable(t *testing.T) {
	p := testprog.Microsocks(t, testprog.ProxyOptions{User: realUser, Pass: realPass})
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "real", Proxy: p.URLWith("socks5h", realUser, realPass)}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 4 {
		r := fetch(ctx, pool, "http://name-that-does-not-resolve.invalid/")
		var pe *egress.ProxyError
		if !errors.As(r.err, &pe) || pe.Kind != egress.KindDestination {
			t.Fatalf("unresolvable name through socks5h: %d, %v; want a failDestination *ProxyError", r.status, r.err)
		}
	}
	if st := stateOf(t, pool, "real"); st.Score != 1 || st.Quarantined {
		t.Errorf("health after unresolvable names = %+v, want untouched", st)
	}
}
