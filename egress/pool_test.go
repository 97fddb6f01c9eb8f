package egress_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
)

func TestNewRejectsBadInput(t *testing.T) {
	const secret = "SECRET-pw-71kq"
	tests := []struct {
		name    string
		cfg     egress.Config
		wantID  string
		wantErr error
	}{
		{"unknown scheme", egress.Config{Endpoints: []egress.Endpoint{{ID: "ftp-1", Proxy: "ftp://u:" + secret + "@proxy.example:21"}}}, "ftp-1", egress.ErrUnknownScheme},
		{"bare userinfo", egress.Config{Endpoints: []egress.Endpoint{{ID: "bare", Proxy: "u:" + secret + "@proxy.example:3128"}}}, "bare", egress.ErrMalformedProxy},
		{"no scheme", egress.Config{Endpoints: []egress.Endpoint{{ID: "noscheme", Proxy: "proxy.example:3128"}}}, "noscheme", egress.ErrMalformedProxy},
		{"no host", egress.Config{Endpoints: []egress.Endpoint{{ID: "nohost", Proxy: "http://u:" + secret + "@:3128"}}}, "nohost", egress.ErrNoHost},
		{"no host at all", egress.Config{Endpoints: []egress.Endpoint{{ID: "nohost2", Proxy: "socks5://"}}}, "nohost2", egress.ErrNoHost},
		{"port above range", egress.Config{Endpoints: []egress.Endpoint{{ID: "port-hi", Proxy: "http://u:" + secret + "@proxy.example:99999"}}}, "port-hi", egress.ErrBadPort},
		{"port zero", egress.Config{Endpoints: []egress.Endpoint{{ID: "port-0", Proxy: "socks5h://u:" + secret + "@proxy.example:0"}}}, "port-0", egress.ErrBadPort},
		{"port not a number", egress.Config{Endpoints: []egress.Endpoint{{ID: "port-x", Proxy: "http://u:" + secret + "@proxy.example:x1"}}}, "port-x", egress.ErrMalformedProxy},
		{"malformed userinfo", egress.Config{Endpoints: []egress.Endpoint{{ID: "bad-ui", Proxy: "http://u:" + secret + " x@proxy.example"}}}, "bad-ui", egress.ErrMalformedProxy},
		{"socks without username", egress.Config{Endpoints: []egress.Endpoint{{ID: "socks-nouser", Proxy: "socks5://:" + secret + "@proxy.example"}}}, "socks-nouser", egress.ErrMalformedProxy},
		{"path", egress.Config{Endpoints: []egress.Endpoint{{ID: "path", Proxy: "http://u:" + secret + "@proxy.example:3128/proxy"}}}, "path", egress.ErrMalformedProxy},
		{"query", egress.Config{Endpoints: []egress.Endpoint{{ID: "query", Proxy: "http://u:" + secret + "@proxy.example:3128?x=1"}}}, "query", egress.ErrMalformedProxy},
		{"empty query", egress.Config{Endpoints: []egress.Endpoint{{ID: "query0", Proxy: "http://proxy.example:3128?"}}}, "query0", egress.ErrMalformedProxy},
		{"fragment", egress.Config{Endpoints: []egress.Endpoint{{ID: "frag", Proxy: "http://proxy.example:3128#x"}}}, "frag", egress.ErrMalformedProxy},
		{"surrounding spaces", egress.Config{Endpoints: []egress.Endpoint{{ID: "spaces", Proxy: " http://u:" + secret + "@proxy.example:3128 "}}}, "spaces", egress.ErrMalformedProxy},
		{"spaces around direct", egress.Config{Endpoints: []egress.Endpoint{{ID: "spaces-d", Proxy: " direct"}}}, "spaces-d", egress.ErrMalformedProxy},
		{"unencoded slash in password", egress.Config{Endpoints: []egress.Endpoint{{ID: "slash", Proxy: "http://u:" + secret + "/x@proxy.example:3128"}}}, "slash", egress.ErrMalformedProxy},
		{"unencoded slash after digits", egress.Config{Endpoints: []egress.Endpoint{{ID: "slash2", Proxy: "http://u:12/" + secret + "@proxy.example:3128"}}}, "slash2", egress.ErrMalformedProxy},
		{"unencoded question mark", egress.Config{Endpoints: []egress.Endpoint{{ID: "qm", Proxy: "socks5://u:99?" + secret + "@proxy.example:1080"}}}, "qm", egress.ErrMalformedProxy},
		{"negative capacity", egress.Config{Endpoints: []egress.Endpoint{{ID: "neg", Proxy: "direct", Capacity: -1}}}, "neg", egress.ErrBadCapacity},
		{"duplicate ID", egress.Config{Endpoints: []egress.Endpoint{{ID: "dup", Proxy: "direct"}, {ID: "dup", Proxy: "http://u:" + secret + "@proxy.example"}}}, "dup", egress.ErrDuplicateID},
		{"empty ID", egress.Config{Endpoints: []egress.Endpoint{{Proxy: "http://u:" + secret + "@proxy.example"}}}, "", egress.ErrEmptyID},
		{"empty pool", egress.Config{}, "", egress.ErrEmptyPool},
		{"negative subset", egress.Config{Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}}, SubsetSize: -1}, "", egress.ErrBadSetting},
		{"smoothing out of range", egress.Config{Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}}, Health: egress.HealthConfig{Smoothing: 2}}, "", egress.ErrBadSetting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := egress.New(tt.cfg)
			if err == nil {
				p.Close()
				t.Fatalf("New(%s) = nil error, want %v", tt.name, tt.wantErr)
			}
			var ce *egress.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New(%s) = %T %v, want *ConfigError", tt.name, err, err)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("New(%s) = %v, want errors.Is %v", tt.name, err, tt.wantErr)
			}
			if ce.EndpointID != tt.wantID {
				t.Errorf("New(%s).EndpointID = %q, want %q", tt.name, ce.EndpointID, tt.wantID)
			}
			if tt.wantID != "" && !strings.Contains(err.Error(), `"`+tt.wantID+`"`) {
				t.Errorf("New(%s) = %q, want the endpoint ID named", tt.name, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("New(%s) = %q: contains the password", tt.name, err)
			}
		})
	}
}

// TestTargetRefusalsLeaveHealthUntouched sends many requests to a target
// that answers 403 and 429 to everything: every endpoint's score stays
// perfect and the host's endpoint never changes.
func TestTargetRefusalsLeaveHealthUntouched(t *testing.T) {
	var n atomic.Int64
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		http.Error(w, "go away, crawler", http.StatusForbidden)
	})
	for _, tlsTarget := range []bool{false, true} {
		name := map[bool]string{false: "absolute-form", true: "CONNECT"}[tlsTarget]
		t.Run(name, func(t *testing.T) {
			target := newTargetHandler(t, refuse, tlsTarget)
			proxies := []*httpProxy{newHTTPProxy(t, "p0"), newHTTPProxy(t, "p1"), newHTTPProxy(t, "p2")}
			var eps []egress.Endpoint
			for i, p := range proxies {
				eps = append(eps, egress.Endpoint{ID: []string{"e0", "e1", "e2"}[i], Proxy: p.URL("")})
			}
			clock := newFakeClock()
			pool := newPool(t, egress.Config{Endpoints: eps, TLSClientConfig: trustServer(target), Now: clock.Now})
			first, err := pool.Select(context.Background(), "127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				r := fetch(context.Background(), pool, target.URL)
				if r.err != nil {
					t.Fatalf("request %d: %v", i, r.err)
				}
				if r.status != http.StatusForbidden && r.status != http.StatusTooManyRequests {
					t.Fatalf("request %d status = %d, want 403 or 429", i, r.status)
				}
				if r.choice != first {
					t.Fatalf("request %d choice = %v, want %v every time", i, r.choice, first)
				}
				clock.Advance(time.Second)
			}
			for _, st := range pool.Endpoints() {
				if st.Score != 1 || st.Degraded || st.Quarantined {
					t.Errorf("endpoint %s: score %v degraded %v quarantined %v, want untouched", st.ID, st.Score, st.Degraded, st.Quarantined)
				}
			}
		})
	}
}

// TestDeadProxyQuarantinedAndRecovers kills the proxy of a host's first
// endpoint: traffic moves to its subset peer, the endpoint is quarantined
// on a growing schedule (5s, 10s, ...), and after the proxy recovers one
// probe readmits it and the host returns to it.
func TestDeadProxyQuarantinedAndRecovers(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	pa, pb := newHTTPProxy(t, "pa"), newHTTPProxy(t, "pb")
	clock := newFakeClock()
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "a", Proxy: pa.URL("")}, {ID: "b", Proxy: pb.URL("")}},
		Now:       clock.Now,
	})
	first, err := pool.Select(context.Background(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dead, peer := pa, "b"
	if first.EndpointID == "b" {
		dead, peer = pb, "a"
	}
	want := func(step string, r result, id string, reason string) {
		t.Helper()
		if r.err != nil {
			t.Fatalf("%s: %v", step, r.err)
		}
		if r.choice.EndpointID != id || r.choice.Reason != reason {
			t.Fatalf("%s: choice %v, want %s (%s)", step, r.choice, id, reason)
		}
	}
	wantDial := func(step string, r result) {
		t.Helper()
		var pe *egress.ProxyError
		if !errors.As(r.err, &pe) || pe.Kind != egress.KindDial || pe.EndpointID != first.EndpointID {
			t.Fatalf("%s: %v, want a dial *ProxyError from %s", step, r.err, first.EndpointID)
		}
	}
	ctx := context.Background()
	want("healthy", fetch(ctx, pool, target.URL), first.EndpointID, egress.ReasonAffinity)

	dead.Kill()
	wantDial("first failure", fetch(ctx, pool, target.URL))
	// Degraded at once: the host's traffic (and a retry) moves to the peer.
	want("after one failure", fetch(ctx, pool, target.URL), peer, egress.ReasonAffinity)

	// Sparse traffic: the penalty fades, the dead endpoint is tried again,
	// and the third failure in a row quarantines it.
	for i := range 2 {
		clock.Advance(2 * time.Minute)
		wantDial("failure after fading", fetch(ctx, pool, target.URL))
		if st := stateOf(t, pool, first.EndpointID); st.Quarantined != (i == 1) {
			t.Fatalf("after %d failures quarantined = %v", i+2, st.Quarantined)
		}
	}
	st := stateOf(t, pool, first.EndpointID)
	if want := clock.Now().Add(5 * time.Second); !st.QuarantinedUntil.Equal(want) {
		t.Errorf("QuarantinedUntil = %v, want %v", st.QuarantinedUntil, want)
	}
	for range 5 {
		want("quarantined", fetch(ctx, pool, target.URL), peer, egress.ReasonAffinity)
	}

	// The quarantine ends; the probe fails; the next quarantine is twice as long.
	clock.Advance(5 * time.Second)
	if c, _ := pool.Select(ctx, "127.0.0.1"); c != (egress.Choice{EndpointID: first.EndpointID, Reason: egress.ReasonProbe}) {
		t.Fatalf("Select after the quarantine = %v, want a probe of %s", c, first.EndpointID)
	}
	wantDial("failed probe", fetch(ctx, pool, target.URL))
	st = stateOf(t, pool, first.EndpointID)
	if want := clock.Now().Add(10 * time.Second); !st.Quarantined || !st.QuarantinedUntil.Equal(want) {
		t.Fatalf("after a failed probe: quarantined %v until %v, want until %v", st.Quarantined, st.QuarantinedUntil, want)
	}

	// The proxy recovers: one probe readmits the endpoint to the healthy
	// tier, and the host returns to it at once.
	dead.Revive(t)
	clock.Advance(10 * time.Second)
	want("probe", fetch(ctx, pool, target.URL), first.EndpointID, egress.ReasonProbe)
	if st := stateOf(t, pool, first.EndpointID); st.Quarantined || st.Degraded {
		t.Fatalf("after a successful probe: quarantined %v degraded %v, want readmitted, healthy", st.Quarantined, st.Degraded)
	}
	want("readmitted", fetch(ctx, pool, target.URL), first.EndpointID, egress.ReasonAffinity)
}

// TestAffinityUnhealthy quarantines the only endpoint of a host's subset:
// the host goes outside its subset.
func TestAffinityUnhealthy(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	pa, pb, pc := newHTTPProxy(t, "pa"), newHTTPProxy(t, "pb"), newHTTPProxy(t, "pc")
	byID := map[string]*httpProxy{"a": pa, "b": pb, "c": pc}
	clock := newFakeClock()
	pool := newPool(t, egress.Config{
		Endpoints:  []egress.Endpoint{{ID: "a", Proxy: pa.URL("")}, {ID: "b", Proxy: pb.URL("")}, {ID: "c", Proxy: pc.URL("")}},
		SubsetSize: 1,
		Now:        clock.Now,
	})
	ctx := context.Background()
	first, _ := pool.Select(ctx, "127.0.0.1")
	byID[first.EndpointID].Kill()
	forced := egress.WithForced(ctx, first.EndpointID)
	for range 3 {
		if r := fetch(forced, pool, target.URL); r.err == nil || r.choice.Reason != egress.ReasonForced {
			t.Fatalf("forced request through a dead proxy = %v %v, want a failure (forced)", r.choice, r.err)
		}
	}
	if !stateOf(t, pool, first.EndpointID).Quarantined {
		t.Fatalf("%s not quarantined after 3 forced failures", first.EndpointID)
	}
	r := fetch(ctx, pool, target.URL)
	if r.err != nil || r.choice.EndpointID == first.EndpointID || r.choice.Reason != egress.ReasonAffinityUnhealthy {
		t.Fatalf("fetch = %v %v, want another endpoint (affinity_unhealthy)", r.choice, r.err)
	}
	if got := byID[r.choice.EndpointID].carried(); got != 1 {
		t.Errorf("the fallback's proxy carried %d requests, want 1", got)
	}
}

// TestNilPool calls every method of a nil *Pool: none panics, and each
// reports an empty, closed pool.
func TestNilPool(t *testing.T) {
	var p *egress.Pool
	if got := p.Endpoints(); got != nil {
		t.Errorf("nil Pool.Endpoints() = %v, want nil", got)
	}
	if _, ok := p.Transport("a"); ok {
		t.Error("nil Pool.Transport reported an endpoint")
	}
	if _, err := p.Select(t.Context(), "example.com"); !errors.Is(err, egress.ErrClosed) {
		t.Errorf("nil Pool.Select = %v, want ErrClosed", err)
	}
	if err := p.Add(egress.Endpoint{ID: "d", Proxy: "direct"}); !errors.Is(err, egress.ErrClosed) {
		t.Errorf("nil Pool.Add = %v, want ErrClosed", err)
	}
	if err := p.Drain("a"); !errors.Is(err, egress.ErrUnknownEndpoint) {
		t.Errorf("nil Pool.Drain = %v, want ErrUnknownEndpoint", err)
	}
	if err := p.Remove("a"); !errors.Is(err, egress.ErrUnknownEndpoint) {
		t.Errorf("nil Pool.Remove = %v, want ErrUnknownEndpoint", err)
	}
	req := httptest.NewRequest("GET", "http://example.com/", nil)
	if _, err := p.RoundTrip(req); !errors.Is(err, egress.ErrClosed) {
		t.Errorf("nil Pool.RoundTrip = %v, want ErrClosed", err)
	}
	p.CloseIdleConnections()
	p.Close()
}

// TestReadmissionTrial runs the short schedule on a fake clock: an
// endpoint that failed once is skipped for ProbeAfter (2s), then its
// host's next request tries it, and that success brings the host back.
func TestReadmissionTrial(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	pa, pb := newHTTPProxy(t, "pa"), newHTTPProxy(t, "pb")
	clock := newFakeClock()
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "a", Proxy: pa.URL("")}, {ID: "b", Proxy: pb.URL("")}},
		Now:       clock.Now,
	})
	ctx := context.Background()
	first, err := pool.Select(ctx, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	flaky, peer := pa, "b"
	if first.EndpointID == "b" {
		flaky, peer = pb, "a"
	}
	flaky.Kill()
	if r := fetch(ctx, pool, target.URL); r.err == nil {
		t.Fatal("request through a dead proxy succeeded")
	}
	flaky.Revive(t)
	for _, step := range []struct {
		advance time.Duration
		want    string
	}{
		{0, peer},
		{time.Second, peer},
		{time.Second - time.Millisecond, peer},
		{time.Millisecond, first.EndpointID}, // 2s after the failure: the trial
		{0, first.EndpointID},                // readmitted
		{time.Hour, first.EndpointID},
	} {
		clock.Advance(step.advance)
		r := fetch(ctx, pool, target.URL)
		if r.err != nil || r.choice.EndpointID != step.want {
			t.Fatalf("at +%v: %v %v, want %s", step.advance, r.choice, r.err, step.want)
		}
	}
	if st := stateOf(t, pool, first.EndpointID); st.Degraded || st.Quarantined {
		t.Errorf("after the trial: %+v, want healthy", st)
	}
}

// TestHealthyPoolReadsNoClock checks that requests through an endpoint in
// full health read no clock (Config.Now): neither to select it nor to
// record their success.
func TestHealthyPoolReadsNoClock(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	var reads atomic.Int64
	pool := newPool(t, egress.Config{
		Endpoints: []egress.Endpoint{{ID: "only", Proxy: "direct"}},
		Now:       func() time.Time { reads.Add(1); return time.Now() },
	})
	ctx := guard(t)
	if r := fetch(ctx, pool, target.URL); r.err != nil { // dials
		t.Fatal(r.err)
	}
	before := reads.Load()
	for range 5 {
		if r := fetch(ctx, pool, target.URL); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("fetch = %d, %v", r.status, r.err)
		}
	}
	if n := reads.Load() - before; n != 0 {
		t.Errorf("5 requests through a healthy endpoint read the clock %d times, want 0", n)
	}
}
