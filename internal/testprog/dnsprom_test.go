package testprog_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/testprog"
)

// TestDnsmasq resolves through a started dnsmasq with Go's resolver: a
// configured name answers 127.0.0.1 and is counted, another name of the
// same domain does not exist, and a killed dnsmasq answers nothing.
func TestDnsmasq(t *testing.T) {
	ns := testprog.Dnsmasq(t, testprog.DNSOptions{Names: []string{"origin.test"}, TTL: 5})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, ns.Addr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, "origin.test")
	if err != nil || len(addrs) != 1 || addrs[0] != "127.0.0.1" {
		t.Fatalf("dnsmasq %s: origin.test = %v, %v; want [127.0.0.1]", ns.Version, addrs, err)
	}
	if got := ns.Queries("origin.test", "A"); got != 1 {
		t.Errorf("Queries(origin.test, A) = %d, want 1", got)
	}
	_, err = r.LookupHost(ctx, "missing.test")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("missing.test: %v, want not found", err)
	}
	ns.Kill()
	short, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if _, err := r.LookupHost(short, "origin.test"); err == nil {
		t.Error("a killed dnsmasq still answered")
	}
}

// TestCheckMetrics: promtool reports nothing for a clean exposition and
// names the problems of a bad one, so that a test asserting a clean
// result asserts something.
func TestCheckMetrics(t *testing.T) {
	clean := "# HELP egresskit_x_total Things.\n# TYPE egresskit_x_total counter\negresskit_x_total 1\n"
	if out := testprog.CheckMetrics(t, []byte(clean)); out != "" {
		t.Errorf("clean exposition: promtool said %q, want nothing", out)
	}
	bad := "# TYPE egresskit_x counter\negresskit_x 1\n"
	if out := testprog.CheckMetrics(t, []byte(bad)); !strings.Contains(out, "no help text") || !strings.Contains(out, "_total") {
		t.Errorf("counter without help or _total: promtool said %q, want both problems named", out)
	}
}

// TestStartPrometheus scrapes a static exposition with a started
// Prometheus and reads it back through its query API.
func TestStartPrometheus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveText(ln, "# HELP egresskit_x_total Things.\n# TYPE egresskit_x_total counter\negresskit_x_total{kind=\"a\"} 7\n")
	defer srv.Close()
	p := testprog.StartPrometheus(t, ln.Addr().String(), 200*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := p.Query("sum by (kind) (egresskit_x_total)")
		if err == nil && got["kind=a"] == 7 && len(got) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus %s: query = %v, %v; want kind=a: 7", p.Version, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serveText serves body as the Prometheus text format on ln.
func serveText(ln net.Listener, body string) *http.Server {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	return srv
}
