package testprog_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// A test that needs a real proxy starts one with a configuration of its own
// on a free loopback port. The test is skipped when the program is not
// installed (and fails when EGRESSKIT_REQUIRE_PROGRAMS=1, as in CI); the
// program is killed when the test ends. The example needs a *testing.T, so
// it is compiled but not run; TestProxies runs the same steps.
func Example() {
	testThroughProxy := func(t *testing.T) {
		origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
		defer origin.Close()

		proxy := testprog.Tinyproxy(t, testprog.ProxyOptions{User: "alice", Pass: "s3cret"})
		proxyURL, err := url.Parse(proxy.URL())
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(httptest.NewRequest("GET", origin.URL, nil).WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || proxy.Forwarded() != 1 {
			t.Errorf("through %s %s: status %d, %d forwarded; want 200, 1", proxy.Program, proxy.Version, resp.StatusCode, proxy.Forwarded())
		}
	}
	_ = testThroughProxy
}
