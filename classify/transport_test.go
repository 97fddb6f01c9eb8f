package classify_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit/classify"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newServer starts a loopback server with the test pages and counts the
// connections it accepts.
func newServer(t *testing.T, bigBody string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Server", "cloudflare")
		io.WriteString(w, plainPage)
	})
	mux.HandleFunc("/challenge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cf-Mitigated", "challenge")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, cloudflarePage)
	})
	mux.HandleFunc("/f5", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, f5Page)
	})
	mux.HandleFunc("/agent", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, agentPage)
	})
	mux.HandleFunc("/throttle", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, bigBody)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/redirect", http.StatusFound)
	})
	srv := httptest.NewUnstartedServer(mux)
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestTransport(t *testing.T) {
	big := "<html>" + randomBody(3<<20, 7)
	srv, conns := newServer(t, big)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: classify.NewTransport(tr, classify.New(classify.Config{AgentToken: agent}))}
	tests := []struct {
		path   string
		want   classify.Outcome
		status int
		body   string
	}{
		{"/ok", classify.OK, 200, plainPage},
		{"/challenge", classify.Refused, 403, cloudflarePage},
		{"/f5", classify.Refused, 200, f5Page},
		{"/agent", classify.Refused, 403, agentPage},
		{"/throttle", classify.Throttled, 429, ""},
		{"/big", classify.OK, 200, big},
		{"/missing", classify.Permanent, 404, "404 page not found\n"},
		{"/ok", classify.OK, 200, plainPage},
	}
	for _, tc := range tests {
		resp, err := client.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		got := classify.Of(resp, nil)
		if got.Outcome != tc.want || got.Status != tc.status {
			t.Errorf("Of(GET %s) = %v %d, want %v %d", tc.path, got.Outcome, got.Status, tc.want, tc.status)
		}
		h := sha256.New()
		if _, err := io.Copy(h, resp.Body); err != nil {
			t.Errorf("GET %s: reading body: %v", tc.path, err)
		}
		resp.Body.Close()
		if [32]byte(h.Sum(nil)) != sha256.Sum256([]byte(tc.body)) {
			t.Errorf("GET %s: body differs from the one served", tc.path)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("server accepted %d connections, want 1 (connection reuse)", n)
	}

	// Too many redirects: the client's error classifies as Permanent.
	resp, err := client.Get(srv.URL + "/redirect")
	if resp != nil {
		resp.Body.Close()
	}
	if got := classify.Of(resp, err); got.Outcome != classify.Permanent || got.Reason != "too many redirects" {
		t.Errorf("Of(redirect loop) = %v %q, want permanent %q", got.Outcome, got.Reason, "too many redirects")
	}
}

func TestTransportErrors(t *testing.T) {
	// A closed listener: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: classify.NewTransport(tr, nil)}
	_, err = client.Get("http://" + addr + "/")
	var ce *classify.Error
	if !errors.As(err, &ce) {
		t.Fatalf("Get(closed port) error %v is not a *classify.Error", err)
	}
	if got := classify.Of(nil, err); got.Outcome != classify.Transient || got.Reason != "network error" {
		t.Errorf("Of(refused) = %v %q, want transient %q", got.Outcome, got.Reason, "network error")
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("Get(closed port) error %v does not unwrap to *net.OpError", err)
	}
	if ce.Error() != ce.Err.Error() {
		t.Errorf("Error() = %q, want the underlying %q", ce.Error(), ce.Err.Error())
	}

	// Timeouts stay visible through url.Error.
	timeout := classify.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	}), nil)
	_, err = (&http.Client{Transport: timeout}).Get("http://127.0.0.1/")
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() {
		t.Errorf("url.Error.Timeout() = false for a dial timeout (%v)", err)
	}

	// Bad input.
	var zero classify.Transport
	if _, err := zero.RoundTrip(nil); !errors.Is(err, classify.ErrNilRequest) || classify.Of(nil, err).Outcome != classify.Permanent {
		t.Errorf("RoundTrip(nil) = %v, want ErrNilRequest classified permanent", err)
	}
	if _, err := zero.RoundTrip(&http.Request{Body: io.NopCloser(strings.NewReader("x"))}); !errors.Is(err, classify.ErrNilRequest) {
		t.Errorf("RoundTrip(no URL) = %v, want ErrNilRequest", err)
	}
	silent := classify.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }), nil)
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	if _, err := silent.RoundTrip(req); !errors.Is(err, classify.ErrNoResponse) || classify.Of(nil, err).Reason != "no response" {
		t.Errorf("RoundTrip(nil, nil from next) = %v, want ErrNoResponse", err)
	}
	// A response and an error together: the response body is closed.
	var closed atomic.Bool
	both := classify.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: closeFunc(func() { closed.Store(true) })}, io.ErrUnexpectedEOF
	}), nil)
	if _, err := both.RoundTrip(req); !errors.Is(err, io.ErrUnexpectedEOF) || !closed.Load() {
		t.Errorf("RoundTrip(resp and error) = %v, body closed %v; want the error and a closed body", err, closed.Load())
	}
}

type closeFunc func()

func (f closeFunc) Read([]byte) (int, error) { return 0, io.EOF }
func (f closeFunc) Close() error             { f(); return nil }

// TestTransportClassifiesOnce: a response already classified by an inner
// Transport keeps its Result.
func TestTransportClassifiesOnce(t *testing.T) {
	var calls atomic.Int64
	inner := classify.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return &http.Response{StatusCode: 403, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(agentPage)), Request: r}, nil
	}), classify.New(classify.Config{AgentToken: agent}))
	outer := classify.NewTransport(inner, nil) // would say Permanent: no token
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	resp, err := outer.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := classify.Of(resp, nil); got.Outcome != classify.Refused {
		t.Errorf("Of = %v, want the inner refused", got.Outcome)
	}
}

// TestTransportTrickleCutByContext: a refusal whose body trickles and then
// stalls holds RoundTrip only until the request's context ends. (A 2xx
// answer does not hold RoundTrip at all: see TestLazyRoundTripDoesNotWait.)
func TestTransportTrickleCutByContext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cause  error
		want   classify.Outcome
		reason string
	}{
		{"caller canceled", context.Canceled, classify.Canceled, "canceled"},
		{"attempt timeout", classify.ErrAttemptTimeout, classify.Transient, "attempt timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, "<html><head>")
				w.(http.Flusher).Flush()
				select { // stall until the client goes away
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)
			base := &http.Transport{}
			defer base.CloseIdleConnections()

			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			headers := make(chan struct{})
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := base.RoundTrip(r)
				close(headers) // the peek starts after this returns
				return resp, err
			})
			var wg sync.WaitGroup
			wg.Go(func() {
				<-headers
				cancel(tc.cause)
			})
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err := classify.NewTransport(next, nil).RoundTrip(req)
			wg.Wait()
			if err != nil {
				t.Fatalf("RoundTrip = %v, want the response", err)
			}
			got := classify.Of(resp, nil)
			if got.Outcome != tc.want || got.Reason != tc.reason || got.Status != 403 {
				t.Errorf("Of = %v %q %d, want %v %q 403", got.Outcome, got.Reason, got.Status, tc.want, tc.reason)
			}
			b, err := io.ReadAll(resp.Body)
			if err == nil || !strings.HasPrefix("<html><head>", string(b)) {
				t.Errorf("ReadAll = %q, %v; want a prefix of the trickle and an error", b, err)
			}
			resp.Body.Close()
		})
	}
}

// stallBody blocks in Read until closed, ignoring every context, as a
// careless in-memory transport might.
type stallBody struct {
	entered   chan struct{}
	closed    chan struct{}
	enterOnce sync.Once
	closeOnce sync.Once
}

func (s *stallBody) Read([]byte) (int, error) {
	s.enterOnce.Do(func() { close(s.entered) })
	<-s.closed
	return 0, errors.New("read on closed stall body")
}

func (s *stallBody) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// TestPeekGuard: a body that ignores the context is closed when the
// request's context ends, so the peek cannot hold the caller.
func TestPeekGuard(t *testing.T) {
	body := &stallBody{entered: make(chan struct{}), closed: make(chan struct{})}
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 403, Header: http.Header{}, ContentLength: -1, Body: body, Request: r}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		<-body.entered
		cancel()
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/", nil)
	resp, err := classify.NewTransport(next, nil).RoundTrip(req)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := classify.Of(resp, nil); got.Outcome != classify.Canceled {
		t.Errorf("Of = %v, want canceled", got.Outcome)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAll error = %v, want context.Canceled", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

// TestTransportPeekCutByBudget: with no deadline at all, a page whose body
// stalls after a few bytes is classified on the bytes that arrived within
// PeekTimeout, says so, and the caller then reads the whole page. A
// refusal status is peeked in RoundTrip, which returns once PeekTimeout
// has passed, while the server is still holding the rest back; a 2xx
// answer is returned at once and judged when it is read, so the budget
// applies only to a caller that asks Of before reading (which settles it
// with the same time-bounded peek). Closing the body while the peek's last
// read is in flight leaks nothing.
func TestTransportPeekCutByBudget(t *testing.T) {
	const rest = "<body>the rest</body></html>"
	for _, tc := range []struct {
		status int
		want   classify.Outcome
	}{
		{403, classify.Permanent},
		{200, classify.OK},
	} {
		for _, mode := range []string{"Read", "WriteTo", "Close"} {
			release := make(chan struct{})
			var gaveUp atomic.Bool // the server stopped holding back on its own
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(tc.status)
				io.WriteString(w, "<html><head>")
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-time.After(time.Minute): // an unbounded peek would wait for this
					gaveUp.Store(true)
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, rest)
			}))
			base := &http.Transport{}
			c := classify.New(classify.Config{PeekTimeout: 50 * time.Millisecond})
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := classify.NewTransport(base, c).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got := classify.Of(resp, nil) // before the server sends the rest
			if gaveUp.Load() {
				t.Errorf("%d: RoundTrip or Of waited for the server to send the rest", tc.status)
			}
			close(release)
			if got.Outcome != tc.want || !got.PeekCut {
				t.Errorf("%d: Of = %v (PeekCut %v), want %v, PeekCut", tc.status, got.Outcome, got.PeekCut, tc.want)
			}
			switch mode {
			case "Read":
				b, err := io.ReadAll(struct{ io.Reader }{resp.Body}) // Read only
				if err != nil || string(b) != "<html><head>"+rest {
					t.Errorf("%d: ReadAll = %q, %v; want the whole page", tc.status, b, err)
				}
			case "WriteTo":
				var b strings.Builder
				if _, err := io.Copy(&b, resp.Body); err != nil || b.String() != "<html><head>"+rest {
					t.Errorf("%d: io.Copy = %q, %v; want the whole page", tc.status, b.String(), err)
				}
			}
			resp.Body.Close()
			base.CloseIdleConnections()
			srv.Close()
		}
	}
}
