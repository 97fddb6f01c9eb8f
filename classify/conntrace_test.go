package classify_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/settle"
)

type callerKey struct{}

// TestRoundTripConn: the chain's RoundTripConn reports the connection each
// attempt was sent on (the same one for requests sharing a keep-alive or
// HTTP/2 connection), attaches the Result as RoundTrip does, keeps the
// caller's context values and its own ClientTrace (called once per
// attempt, however many attempts), and leaves no trace of its own in the
// response's request.
func TestRoundTripConn(t *testing.T) {
	hooks := settle.Get[classify.Result, classify.Config]()
	for _, tc := range []struct {
		name        string
		http2       bool
		page        string
		callerTrace bool
		want        classify.Outcome
	}{
		{"http1/ok", false, "/ok", false, classify.OK},
		{"http1/challenge", false, "/challenge", false, classify.Refused},
		{"http1/missing", false, "/missing", false, classify.Permanent},
		{"http1/caller-trace", false, "/ok", true, classify.OK},
		{"http2/ok", true, "/ok", false, classify.OK},
		{"http2/throttle", true, "/throttle", false, classify.Throttled},
		{"http2/caller-trace", true, "/ok", true, classify.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newConnServer(t, tc.http2)
			base := srv.Client().Transport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			rt := hooks.NewTransport(base, classify.Config{})
			ctx := context.WithValue(context.Background(), callerKey{}, "caller")
			var callerGot atomic.Int64
			if tc.callerTrace {
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
					GotConn: func(httptrace.GotConnInfo) { callerGot.Add(1) },
				})
			}
			var conns []any
			const attempts = 3
			for i := range attempts {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+tc.page, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, conn, err := rt.RoundTripConn(req)
				if err != nil {
					t.Fatalf("attempt %d: %v", i+1, err)
				}
				if conn == nil {
					t.Fatalf("attempt %d: no connection reported", i+1)
				}
				conns = append(conns, conn)
				if want := map[bool]int{false: 1, true: 2}[tc.http2]; resp.ProtoMajor != want {
					t.Errorf("attempt %d: HTTP/%d, want HTTP/%d", i+1, resp.ProtoMajor, want)
				}
				rctx := resp.Request.Context()
				if v, _ := rctx.Value(callerKey{}).(string); v != "caller" {
					t.Errorf("attempt %d: the response's request context lost the caller's value (%q)", i+1, v)
				}
				if tr := httptrace.ContextClientTrace(rctx); tc.callerTrace != (tr != nil) {
					t.Errorf("attempt %d: trace in the response's request context = %v, want one only if the caller set it", i+1, tr)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := classify.Of(resp, nil).Outcome; got != tc.want {
					t.Errorf("attempt %d: Of = %v, want %v", i+1, got, tc.want)
				}
			}
			for i, c := range conns[1:] {
				if c != conns[0] {
					t.Errorf("attempt %d went out on %v, attempt 1 on %v: want one keep-alive connection", i+2, c, conns[0])
				}
			}
			if tc.callerTrace && callerGot.Load() != attempts {
				t.Errorf("the caller's GotConn ran %d times over %d attempts, want once each", callerGot.Load(), attempts)
			}
		})
	}
}

// TestRoundTripConnNoConnection: a next RoundTripper that reports no
// connection (an in-memory one) gives none, and an error is classified.
func TestRoundTripConnNoConnection(t *testing.T) {
	hooks := settle.Get[classify.Result, classify.Config]()
	rt := hooks.NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/fail" {
			return nil, io.ErrUnexpectedEOF
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}), classify.Config{})
	for _, tc := range []struct {
		path string
		want classify.Outcome
	}{{"/ok", classify.OK}, {"/fail", classify.Transient}} {
		req, _ := http.NewRequest(http.MethodGet, "http://mem.test"+tc.path, nil)
		resp, conn, err := rt.RoundTripConn(req)
		if conn != nil {
			t.Errorf("%s: connection %v, want none", tc.path, conn)
		}
		if got := classify.Of(resp, err).Outcome; got != tc.want {
			t.Errorf("%s: Of = %v, want %v", tc.path, got, tc.want)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}

// newConnServer starts a loopback server with the test pages, speaking
// HTTP/2 over TLS when http2 is set, else HTTP/1.1.
func newConnServer(t *testing.T, http2 bool) *httptest.Server {
	t.Helper()
	plain, _ := newServer(t, "")
	srv := httptest.NewUnstartedServer(plain.Config.Handler)
	if http2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// fakeConn is a connection a test's RoundTripper reports to GotConn.
type fakeConn struct{ net.Conn }

// TestRoundTripConnAllocates: learning the connection costs no allocation
// beyond RoundTrip's, for a page judged as it is read and for one decided
// at once, and the connection reported is the one GotConn was given.
func TestRoundTripConnAllocates(t *testing.T) {
	hooks := settle.Get[classify.Result, classify.Config]()
	conn := &fakeConn{}
	page := []byte("<html><body>" + strings.Repeat("a page ", 200) + "</body></html>")
	for _, contentType := range []string{"text/html", "text/plain"} {
		rt := hooks.NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.GotConn != nil {
				tr.GotConn(httptrace.GotConnInfo{Conn: conn})
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentType}},
				Body: io.NopCloser(bytes.NewReader(page)), Request: req}, nil
		}), classify.Config{})
		req, _ := http.NewRequest(http.MethodGet, "http://mem.test/", nil)
		var got any
		send := func(conns bool) func() {
			return func() {
				var resp *http.Response
				var err error
				if conns {
					resp, got, err = rt.RoundTripConn(req)
				} else {
					resp, err = rt.RoundTrip(req)
				}
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		plain := testing.AllocsPerRun(100, send(false))
		withConn := testing.AllocsPerRun(100, send(true))
		allowed := plain
		if raceEnabled {
			// The race detector makes sync.Pool drop a quarter of what is
			// put back: a pooled trace made again costs 2 allocations
			// (a context value and a request copy per attempt cost 4).
			allowed += 2
		}
		if withConn > allowed {
			t.Errorf("%s: RoundTripConn allocates %v times, RoundTrip %v: want no more", contentType, withConn, plain)
		}
		if got != any(conn) {
			t.Errorf("%s: RoundTripConn reported %v, want the connection GotConn was given", contentType, got)
		}
	}
}
