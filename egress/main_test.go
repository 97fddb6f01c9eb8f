package egress_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit/egress"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newPool builds a pool and closes it at the end of the test.
func newPool(t *testing.T, cfg egress.Config) *egress.Pool {
	t.Helper()
	p, err := egress.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// result is what one request through a pool produced.
type result struct {
	status int
	body   string
	via    string
	choice egress.Choice
	err    error
}

// fetch sends a GET through rt with the given context and reads the whole
// response.
func fetch(ctx context.Context, rt http.RoundTripper, url string) result {
	var r result
	ctx = egress.WithRecorder(ctx, &r.choice)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		r.err = err
		return r
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r.status, r.body, r.err = resp.StatusCode, string(b), err
	r.via = resp.Header.Get("X-Seen-Via")
	return r
}

// newTarget starts a target that answers status and echoes the Via header
// it received in X-Seen-Via, so a test sees which proxy carried the request.
func newTarget(t *testing.T, status int, tlsServer bool) *httptest.Server {
	t.Helper()
	return newTargetHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Via", r.Header.Get("Via"))
		w.WriteHeader(status)
		io.WriteString(w, "hello from target")
	}), tlsServer)
}

// newTargetHandler starts a target served by h.
func newTargetHandler(t *testing.T, h http.Handler, tlsServer bool) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

// trustServer returns a TLS configuration that trusts srv's certificate.
func trustServer(srv *httptest.Server) *tls.Config {
	if srv.Certificate() == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// stateOf returns the snapshot of endpoint id.
func stateOf(t *testing.T, p *egress.Pool, id string) egress.EndpointStatus {
	t.Helper()
	for _, s := range p.Endpoints() {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("endpoint %q not found", id)
	return egress.EndpointStatus{}
}
