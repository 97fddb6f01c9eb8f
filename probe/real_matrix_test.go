package probe_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/testprog"
	"github.com/egresskit/egresskit/probe"
)

// TestRealMatrixProxyAuthFailure runs the matrix through real proxies:
// squid 5.7, microsocks 1.0.3 and tinyproxy 1.11.1 with a wrong password,
// which answers 401. The tinyproxy rows report a proxy authentication
// failure of that egress (stage "proxy", reason and egress_failure say
// so), tinyproxy is the failing egress, and the per-host breakdowns count
// nothing against the hosts.
func TestRealMatrixProxyAuthFailure(t *testing.T) {
	squid := testprog.Squid(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	socks := testprog.Microsocks(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	tiny := testprog.Tinyproxy(t, testprog.ProxyOptions{User: proxyUser, Pass: proxyPass})
	t.Logf("squid %s, microsocks %s, tinyproxy %s", squid.Version, socks.Version, tiny.Version)
	site := func() string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				io.WriteString(w, "User-agent: *\nAllow: /\n")
				return
			}
			io.WriteString(w, "<html><body>ok</body></html>")
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a, b := site(), site()
	targets := []probe.Target{{URL: a + "/1"}, {URL: b + "/2"}, {URL: b + "/3"}}
	proxies := []egress.Endpoint{
		{ID: "squid", Proxy: squid.URL()},
		{ID: "microsocks", Proxy: socks.URL()},
		{ID: "tinyproxy", Proxy: tiny.URLWith("http", proxyUser, "wrong-pass-qq")},
	}
	rep, err := probe.Run(context.Background(), targets, probe.Options{Matrix: true, Proxies: proxies, Deadline: 20 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Results) != 9 {
		t.Fatalf("len(Results) = %d, want 9", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Egress == "tinyproxy" {
			if r.Stage != probe.StageProxy || r.EgressFailure != "auth" || r.Reason != "proxy authentication failed" || r.Status != 0 {
				t.Errorf("tinyproxy row %s: stage %v, egress failure %q, reason %q, status %d; want proxy, auth, proxy authentication failed, 0",
					r.URL, r.Stage, r.EgressFailure, r.Reason, r.Status)
			}
			continue
		}
		if !r.Success() || r.EgressFailure != "" {
			t.Errorf("%s row %s: %+v, want a success", r.Egress, r.URL, r)
		}
	}
	if want := []string{"tinyproxy"}; !reflect.DeepEqual(rep.FailingEgresses, want) {
		t.Errorf("FailingEgresses = %v, want %v", rep.FailingEgresses, want)
	}
	if len(rep.BlockingHosts) != 0 {
		t.Errorf("BlockingHosts = %v, want none", rep.BlockingHosts)
	}
	for _, h := range rep.Hosts {
		if h.Succeeded != h.Total || h.Blocked != 0 || h.Outcomes.Transient != 0 {
			t.Errorf("host %s: %d of %d succeeded, %d blocked, %d transient; want nothing counted against it",
				h.Name, h.Succeeded, h.Total, h.Blocked, h.Outcomes.Transient)
		}
	}
}
