package egresskit

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
)

// TestRobotsThroughEgressClosesIdle: the robots.txt transport's
// CloseIdleConnections reaches the pool, closing its idle connections.
func TestRobotsThroughEgressClosesIdle(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: *\nDisallow:\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	defer srv.Close()
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "direct", Proxy: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rt := robotsThroughEgress{pool}
	req, _ := http.NewRequest("GET", srv.URL+"/robots.txt", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case <-closed:
		t.Fatal("the connection closed before CloseIdleConnections")
	default:
	}
	rt.CloseIdleConnections()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a bound against hanging, not a timing assert
		t.Fatal("the idle connection was not closed: CloseIdleConnections did not reach the pool")
	}
}
