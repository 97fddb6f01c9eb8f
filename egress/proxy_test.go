package egress_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
)

// carrier is a test proxy that can tell how many requests it carried.
type carrier interface {
	carried() int
}

func (p *httpProxy) carried() int {
	_, fwd, tun, _ := p.counts()
	return fwd + tun
}

func (p *socksProxy) carried() int {
	n, _, _ := p.seen()
	return n
}

const (
	testUser = "crawler"
	testPass = "pw-Zq81xK-unique"
)

// TestRequestsLeaveThroughChosenEndpoint sends requests through two proxy
// endpoints of each kind and checks that the proxy of the recorded Choice,
// and only that one, carried them; for absolute-form requests the target
// sees that proxy's Via marker.
func TestRequestsLeaveThroughChosenEndpoint(t *testing.T) {
	type setup struct {
		urls     [2]string
		carriers [2]carrier
		via      [2]string // expected Via at the target, "" when tunnelled
		proxyTLS *tls.Config
	}
	httpProxies := func(t *testing.T, userinfo string, opts ...proxyOption) setup {
		a, b := newHTTPProxy(t, "proxy-a", opts...), newHTTPProxy(t, "proxy-b", opts...)
		return setup{
			urls:     [2]string{a.URL(userinfo), b.URL(userinfo)},
			carriers: [2]carrier{a, b},
			via:      [2]string{"1.1 proxy-a", "1.1 proxy-b"},
			proxyTLS: trustServer(a.srv), // httptest servers share one certificate
		}
	}
	socksProxies := func(t *testing.T, scheme, user, pass string) setup {
		a, b := newSOCKSProxy(t, "socks-a", user, pass), newSOCKSProxy(t, "socks-b", user, pass)
		userinfo := ""
		if user != "" {
			userinfo = url.UserPassword(user, pass).String()
		}
		return setup{
			urls:     [2]string{a.URL(scheme, userinfo), b.URL(scheme, userinfo)},
			carriers: [2]carrier{a, b},
		}
	}
	creds := url.UserPassword(testUser, testPass).String()
	tests := []struct {
		name      string
		targetTLS bool
		setup     func(t *testing.T) setup
	}{
		{"http proxy, http target", false, func(t *testing.T) setup { return httpProxies(t, "") }},
		{"http proxy with credentials, http target", false, func(t *testing.T) setup {
			return httpProxies(t, creds, withCredentials(testUser, testPass))
		}},
		{"http proxy, https target (CONNECT)", true, func(t *testing.T) setup { return httpProxies(t, "") }},
		{"http proxy with credentials, https target (CONNECT)", true, func(t *testing.T) setup {
			return httpProxies(t, creds, withCredentials(testUser, testPass))
		}},
		{"https proxy, http target", false, func(t *testing.T) setup { return httpProxies(t, "", withTLS()) }},
		{"https proxy with credentials, https target", true, func(t *testing.T) setup {
			return httpProxies(t, creds, withTLS(), withCredentials(testUser, testPass))
		}},
		{"socks5", true, func(t *testing.T) setup { return socksProxies(t, "socks5", "", "") }},
		{"socks5 with credentials", false, func(t *testing.T) setup { return socksProxies(t, "socks5", testUser, testPass) }},
		{"socks5h", false, func(t *testing.T) setup { return socksProxies(t, "socks5h", "", "") }},
		{"socks5h with credentials", true, func(t *testing.T) setup { return socksProxies(t, "socks5h", testUser, testPass) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.setup(t)
			target := newTarget(t, http.StatusOK, tt.targetTLS)
			cfg := egress.Config{Endpoints: []egress.Endpoint{
				{ID: "a", Proxy: s.urls[0]},
				{ID: "b", Proxy: s.urls[1]},
			}}
			cfg.TLSClientConfig = trustServer(target)
			cfg.ProxyTLSConfig = s.proxyTLS
			pool := newPool(t, cfg)
			for i := range 3 {
				r := fetch(context.Background(), pool, target.URL+"/page")
				if r.err != nil {
					t.Fatalf("request %d: %v", i, r.err)
				}
				if r.status != http.StatusOK || r.body != "hello from target" {
					t.Fatalf("request %d = %d %q, want 200 from the target", i, r.status, r.body)
				}
				if r.choice.Reason != egress.ReasonAffinity {
					t.Errorf("request %d reason = %q, want %q", i, r.choice.Reason, egress.ReasonAffinity)
				}
				chosen := map[string]int{"a": 0, "b": 1}[r.choice.EndpointID]
				if !tt.targetTLS && s.via[chosen] != "" && r.via != s.via[chosen] {
					t.Errorf("target saw Via %q, want %q (endpoint %s)", r.via, s.via[chosen], r.choice.EndpointID)
				}
				if got := s.carriers[chosen].carried(); got == 0 {
					t.Errorf("chosen endpoint %s's proxy carried nothing", r.choice.EndpointID)
				}
				if got := s.carriers[1-chosen].carried(); got != 0 {
					t.Errorf("the other proxy carried %d requests, want 0", got)
				}
			}
			for _, st := range pool.Endpoints() {
				if st.Score != 1 || st.Quarantined {
					t.Errorf("endpoint %s: score %v quarantined %v, want 1, false", st.ID, st.Score, st.Quarantined)
				}
			}
		})
	}
}

// TestSOCKSNameResolution checks that socks5 resolves the target's name
// locally and sends the proxy an address, while socks5h sends the name.
func TestSOCKSNameResolution(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	port := target.URL[strings.LastIndexByte(target.URL, ':')+1:]
	tests := []struct {
		scheme   string
		wantATYP byte
		wantHost string
	}{
		{"socks5", 1, "127.0.0.1"},
		{"socks5h", 3, "localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.scheme, func(t *testing.T) {
			sp := newSOCKSProxy(t, "socks", "", "")
			pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "s", Proxy: sp.URL(tt.scheme, "")}}})
			r := fetch(context.Background(), pool, "http://localhost:"+port+"/")
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("fetch = %d, %v; want 200", r.status, r.err)
			}
			_, atyp, host := sp.seen()
			if atyp != tt.wantATYP || host != tt.wantHost {
				t.Errorf("proxy saw address type %d host %q, want %d %q", atyp, host, tt.wantATYP, tt.wantHost)
			}
		})
	}
}

// TestWrongCredentialsQuarantine checks that a proxy refusing our
// credentials yields a *ProxyError of failAuth naming the cause, never the
// proxy's response, and quarantines the endpoint at once; the next
// request's ErrNoEndpoint names the same cause.
func TestWrongCredentialsQuarantine(t *testing.T) {
	const wrong = "pw-wrong-Qm27"
	tests := []struct {
		name      string
		targetTLS bool
		proxy     func(t *testing.T) string
		status    int
	}{
		{"http 407, absolute-form", false, func(t *testing.T) string {
			return newHTTPProxy(t, "p", withCredentials(testUser, testPass)).URL(testUser + ":" + wrong)
		}, 407},
		{"http 407, CONNECT", true, func(t *testing.T) string {
			return newHTTPProxy(t, "p", withCredentials(testUser, testPass)).URL(testUser + ":" + wrong)
		}, 407},
		{"http no credentials given, CONNECT", true, func(t *testing.T) string {
			return newHTTPProxy(t, "p", withCredentials(testUser, testPass)).URL("")
		}, 407},
		{"tinyproxy-style 401, CONNECT", true, func(t *testing.T) string {
			return newHTTPProxy(t, "p", withCredentials(testUser, testPass), withAuthStatus(401)).URL(testUser + ":" + wrong)
		}, 401},
		{"tinyproxy-style 401, absolute-form", false, func(t *testing.T) string {
			return newHTTPProxy(t, "p", withCredentials(testUser, testPass), withAuthStatus(401)).URL(testUser + ":" + wrong)
		}, 401},
		{"socks5 wrong password", false, func(t *testing.T) string {
			return newSOCKSProxy(t, "s", testUser, testPass).URL("socks5", testUser+":"+wrong)
		}, 0},
		{"socks5h no credentials given", true, func(t *testing.T) string {
			return newSOCKSProxy(t, "s", testUser, testPass).URL("socks5h", "")
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := newTarget(t, http.StatusOK, tt.targetTLS)
			pool := newPool(t, egress.Config{
				Endpoints:       []egress.Endpoint{{ID: "bad-creds", Proxy: tt.proxy(t)}},
				TLSClientConfig: trustServer(target),
			})
			r := fetch(context.Background(), pool, target.URL)
			var pe *egress.ProxyError
			if !errors.As(r.err, &pe) {
				t.Fatalf("fetch = %d, %v; want a *ProxyError", r.status, r.err)
			}
			if pe.Kind != egress.KindAuth || pe.EndpointID != "bad-creds" || pe.Status != tt.status {
				t.Errorf("ProxyError = {%q %q %d}, want {bad-creds auth %d}", pe.EndpointID, pe.Kind, pe.Status, tt.status)
			}
			if strings.Contains(r.err.Error(), wrong) || strings.Contains(r.err.Error(), testPass) {
				t.Errorf("error %q contains a password", r.err)
			}
			wantCause := egress.ErrProxyAuthRejected
			if strings.Contains(tt.name, "no credentials") {
				wantCause = egress.ErrProxyAuthRequired
			}
			if !errors.Is(r.err, wantCause) {
				t.Errorf("fetch error %v, want errors.Is %v", r.err, wantCause)
			}
			if st := stateOf(t, pool, "bad-creds"); st.Score >= 1 || !st.Quarantined {
				t.Errorf("score after an auth failure = %v (quarantined %v), want < 1 and quarantined at once", st.Score, st.Quarantined)
			}
			r = fetch(context.Background(), pool, target.URL)
			if !errors.Is(r.err, egress.ErrNoEndpoint) || !errors.Is(r.err, wantCause) || !errors.As(r.err, &pe) {
				t.Errorf("second fetch error %v, want ErrNoEndpoint naming the cause %v", r.err, wantCause)
			}
		})
	}
}

// TestProxyErrorsToldApart checks that a proxy's own errors count against
// the endpoint, while its reports about the target do not.
func TestProxyErrorsToldApart(t *testing.T) {
	tests := []struct {
		name        string
		targetTLS   bool
		status      int
		proxyStatus string
		socksReply  byte
		wantKind    string // "" = the response comes back
		wantScore1  bool
	}{
		{"absolute-form, Proxy-Status dns_timeout", false, 502, "dns_timeout", 0, egress.KindProxy, false},
		{"absolute-form, Proxy-Status proxy_internal_error", false, 500, "proxy_internal_error", 0, egress.KindProxy, false},
		{"absolute-form, Proxy-Status connection_refused", false, 502, "connection_refused", 0, "", true},
		{"absolute-form, 503 without Proxy-Status", false, 503, "", 0, "", true},
		{"CONNECT, Proxy-Status dns_timeout", true, 502, "dns_timeout", 0, egress.KindProxy, false},
		{"CONNECT, Proxy-Status destination_unavailable", true, 502, "destination_unavailable", 0, egress.KindDestination, true},
		{"CONNECT, 403 without Proxy-Status", true, 403, "", 0, egress.KindProxy, false},
		{"CONNECT, squid ERR_CONNECT_FAIL", true, 503, "", 0, egress.KindDestination, true},
		{"CONNECT, squid ERR_ACCESS_DENIED", true, 403, "", 0, egress.KindProxy, false},
		{"CONNECT, tinyproxy Unable to connect", true, 500, "", 0, egress.KindDestination, true},
		{"absolute-form, squid ERR_CONNECT_FAIL", false, 503, "", 0, "", true},
		{"absolute-form, squid ERR_ACCESS_DENIED", false, 403, "", 0, egress.KindProxy, false},
		{"absolute-form, tinyproxy Unable to connect", false, 500, "", 0, "", true},
		{"SOCKS general failure", false, 0, "", 1, egress.KindProxy, false},
		{"SOCKS connection refused", true, 0, "", 5, egress.KindDestination, true},
		{"SOCKS host unreachable", false, 0, "", 4, egress.KindDestination, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := newTarget(t, http.StatusOK, tt.targetTLS)
			var proxyURL string
			if tt.socksReply != 0 {
				sp := newSOCKSProxy(t, "s", "", "")
				sp.script(tt.socksReply, nil)
				proxyURL = sp.URL("socks5h", "")
			} else {
				hp := newHTTPProxy(t, "p")
				switch {
				case strings.Contains(tt.name, "squid"):
					code := tt.name[strings.Index(tt.name, "ERR_"):]
					hp.failRaw(fmt.Sprintf("HTTP/1.1 %d %s\r\nServer: squid/5.7\r\nX-Squid-Error: %s 0\r\nVia: 1.1 vm (squid/5.7)\r\nContent-Length: 0\r\n\r\n",
						tt.status, http.StatusText(tt.status), code))
				case strings.Contains(tt.name, "tinyproxy"):
					hp.failRaw("HTTP/1.1 500 Unable to connect\r\nServer: tinyproxy/1.11.1\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n")
				default:
					hp.fail(tt.status, tt.proxyStatus)
				}
				proxyURL = hp.URL("")
			}
			pool := newPool(t, egress.Config{
				Endpoints:       []egress.Endpoint{{ID: "e", Proxy: proxyURL}},
				TLSClientConfig: trustServer(target),
			})
			r := fetch(context.Background(), pool, target.URL)
			if tt.wantKind == "" {
				if r.err != nil || r.status != tt.status {
					t.Fatalf("fetch = %d, %v; want the %d response", r.status, r.err, tt.status)
				}
			} else {
				var pe *egress.ProxyError
				if !errors.As(r.err, &pe) {
					t.Fatalf("fetch = %d, %v; want a *ProxyError", r.status, r.err)
				}
				if pe.Kind != tt.wantKind || pe.ProxyStatus != tt.proxyStatus {
					t.Errorf("ProxyError kind %q Proxy-Status %q, want %q %q", pe.Kind, pe.ProxyStatus, tt.wantKind, tt.proxyStatus)
				}
			}
			if got := stateOf(t, pool, "e").Score; (got == 1) != tt.wantScore1 {
				t.Errorf("score = %v, want untouched: %v", got, tt.wantScore1)
			}
		})
	}
}

// TestSlowProxyLosesScore makes one SOCKS proxy take 8s (on the fake
// clock) to set up each connection: its successes count for less, it is
// degraded, and the host's requests go to the fast endpoint.
func TestSlowProxyLosesScore(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	clock := newFakeClock()
	fast, slow := newSOCKSProxy(t, "fast", "", ""), newSOCKSProxy(t, "slow", "", "")
	slow.script(0, func() { clock.Advance(8 * time.Second) })
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "fast", Proxy: fast.URL("socks5h", "")}, {ID: "slow", Proxy: slow.URL("socks5h", "")}},
		Now:       clock.Now,
	})
	ctx := context.Background()
	for i := range 3 {
		req, _ := http.NewRequestWithContext(egress.WithForced(ctx, "slow"), http.MethodGet, target.URL, nil)
		req.Close = true // a new connection, so a new setup, each time
		resp, err := pool.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d through the slow proxy: %v", i, err)
		}
		resp.Body.Close()
	}
	st := stateOf(t, pool, "slow")
	if !st.Degraded || st.Quarantined || st.Score > 0.6 {
		t.Errorf("slow endpoint: score %v degraded %v quarantined %v, want ≤ 0.6, degraded, not quarantined", st.Score, st.Degraded, st.Quarantined)
	}
	if st := stateOf(t, pool, "fast"); st.Score != 1 {
		t.Errorf("fast endpoint score = %v, want 1", st.Score)
	}
	for _, h := range []string{"a.example", "b.example", "c.example", "d.example"} {
		if c, err := pool.Select(ctx, h); err != nil || c.EndpointID != "fast" {
			t.Errorf("Select(%q) = %v, %v; want the fast endpoint", h, c, err)
		}
	}
}
