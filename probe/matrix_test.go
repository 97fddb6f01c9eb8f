package probe_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/probe"
)

const (
	proxyUser = "crawler"
	proxyPass = "s3cret-pass-xyzzy"
)

// newForwardProxy starts an HTTP forward proxy for http:// targets that
// demands proxyUser:proxyPass when auth is set. It returns the proxy URL,
// credentials included.
func newForwardProxy(t testing.TB, auth bool) string {
	t.Helper()
	tr := &http.Transport{}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+proxyPass))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		// As squid 5.7 answers missing or wrong credentials (compared with
		// the real program in egress TestRealAuthRefused).
		if auth && r.Header.Get("Proxy-Authorization") != want {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			http.Error(w, "auth", http.StatusProxyAuthRequired)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.Header.Del("Proxy-Authorization")
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, "upstream", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	u, _ := url.Parse(srv.URL)
	if auth {
		u.User = url.UserPassword(proxyUser, proxyPass)
	}
	return u.String()
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func hostOf(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func runMatrix(t *testing.T, targets []probe.Target, proxies []egress.Endpoint) *probe.Report {
	t.Helper()
	rep, err := probe.Run(context.Background(), targets, probe.Options{
		Matrix:   true,
		Proxies:  proxies,
		Deadline: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := len(targets) * len(proxies); len(rep.Results) != want {
		t.Fatalf("len(Results) = %d, want %d (every target through every proxy)", len(rep.Results), want)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), proxyPass) || strings.Contains(string(b), proxyUser) {
		t.Errorf("report contains proxy credentials: %s", b)
	}
	return rep
}

func TestMatrixFailingProxy(t *testing.T) {
	a, b := siteServer(t).URL, siteServer(t).URL
	proxies := []egress.Endpoint{
		{ID: "p1", Proxy: newForwardProxy(t, true)},
		{ID: "p2", Proxy: newForwardProxy(t, false)},
		{ID: "dead", Proxy: "http://" + proxyUser + ":" + proxyPass + "@" + deadAddr(t)},
	}
	targets := []probe.Target{{URL: a + "/ok/1"}, {URL: b + "/ok/2"}, {URL: b + "/ok/3"}}
	rep := runMatrix(t, targets, proxies)

	if want := []string{"dead"}; !reflect.DeepEqual(rep.FailingEgresses, want) {
		t.Errorf("FailingEgresses = %v, want %v", rep.FailingEgresses, want)
	}
	if len(rep.BlockingHosts) != 0 {
		t.Errorf("BlockingHosts = %v, want none", rep.BlockingHosts)
	}
	if want := []string{"dead"}; !reflect.DeepEqual(rep.Recommendation.AvoidEgresses, want) {
		t.Errorf("AvoidEgresses = %v, want %v", rep.Recommendation.AvoidEgresses, want)
	}
	for _, e := range rep.Egresses {
		wantOK := 3
		if e.Name == "dead" {
			wantOK = 0
		}
		if e.Total != 3 || e.Succeeded != wantOK {
			t.Errorf("egress %s: %d of %d succeeded, want %d of 3", e.Name, e.Succeeded, e.Total, wantOK)
		}
	}
	for _, r := range rep.Results {
		if r.Egress == "dead" && (r.Err == "" || r.Status != 0) {
			t.Errorf("result through the dead proxy = %+v, want a connection error", r)
		}
		if r.Egress == "p1" && r.Proxy != strings.Replace(proxies[0].Proxy, proxyUser+":"+proxyPass+"@", "", 1) {
			t.Errorf("Proxy = %q, want the proxy URL without credentials", r.Proxy)
		}
	}
}

func TestMatrixBlockingHost(t *testing.T) {
	a, b := siteServer(t).URL, siteServer(t).URL
	proxies := []egress.Endpoint{
		{ID: "p1", Proxy: newForwardProxy(t, true)},
		{ID: "p2", Proxy: newForwardProxy(t, false)},
		{ID: "p3", Proxy: newForwardProxy(t, false)},
	}
	targets := []probe.Target{{URL: a + "/ok/1"}, {URL: b + "/challenge/1"}}
	rep := runMatrix(t, targets, proxies)

	blocker := hostOf(t, b)
	if want := []string{blocker}; !reflect.DeepEqual(rep.BlockingHosts, want) {
		t.Errorf("BlockingHosts = %v, want %v", rep.BlockingHosts, want)
	}
	if len(rep.FailingEgresses) != 0 {
		t.Errorf("FailingEgresses = %v, want none", rep.FailingEgresses)
	}
	if want := []string{blocker}; !reflect.DeepEqual(rep.Recommendation.HaltHosts, want) {
		t.Errorf("HaltHosts = %v, want %v", rep.Recommendation.HaltHosts, want)
	}
	for _, h := range rep.Hosts {
		if h.Name == blocker && (h.Outcomes.Refused != 3 || h.Succeeded != 0) {
			t.Errorf("host %s: %+v, want 3 refused through 3 proxies", h.Name, h)
		}
	}
}
