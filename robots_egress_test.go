package egresskit_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

// TestRobotsUsesPoolTLS fetches pages of an https site whose certificate
// only the pool's TLSClientConfig trusts: robots.txt goes through the
// pool too, so it is read (and obeyed) rather than found unreachable.
func TestRobotsUsesPoolTLS(t *testing.T) {
	var robotsHits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robotsHits.Add(1)
			io.WriteString(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		io.WriteString(w, "page")
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	pool, err := egress.New(egress.Config{
		Endpoints:       []egress.Endpoint{{ID: "direct", Proxy: "direct"}},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client := &http.Client{Transport: mustChain(chainConfig(pool))}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL + "/public")
	if err != nil {
		t.Fatalf("GET /public: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /public = %d, want 200", resp.StatusCode)
	}
	if _, err := client.Get(srv.URL + "/private/x"); err == nil {
		t.Error("GET /private/x succeeded; robots.txt disallows it")
	}
	if n := robotsHits.Load(); n != 1 {
		t.Errorf("robots.txt fetched %d times, want 1", n)
	}
}
