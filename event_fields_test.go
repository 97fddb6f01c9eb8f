package egresskit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/egresstest"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

// eventRig is a chain over real loopback servers whose events are kept.
type eventRig struct {
	chain *egresskit.Transport
	rec   *recorder
}

// newEventRig builds a chain from cfg with a recorder among its
// observers. Unless cfg says otherwise: no retry backoff,
// pacing that never binds except for the hosts of slow (host key →
// requests per minute), and a breaker that opens after two failures.
func newEventRig(t *testing.T, cfg egresskit.Config, slow map[string]float64) *eventRig {
	t.Helper()
	r := &eventRig{rec: &recorder{}}
	cfg.Observers = append(cfg.Observers, r.rec)
	if cfg.Store == nil {
		cfg.Store = mustMemory(hoststate.Config{
			Breaker: breaker.Config{FailureThreshold: 2},
			Limit:   ratelimit.Config{PerMinute: 600000, Overrides: slow},
		})
	}
	if cfg.Retry.BaseDelay == 0 {
		cfg.Retry.BaseDelay = -1
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "FieldBot/1.0"
	}
	r.chain = mustChain(cfg)
	return r
}

// do sends req through the chain, reads and closes the body, and returns
// the error.
func (r *eventRig) do(req *http.Request) error {
	resp, err := r.chain.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func (r *eventRig) get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return r.do(req)
}

// events returns a copy of the events so far.
func (r *eventRig) events() []telemetry.Event {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	return slices.Clone(r.rec.events)
}

// last returns the latest event, failing the test when there is none.
func (r *eventRig) last(t *testing.T) telemetry.Event {
	t.Helper()
	ev := r.events()
	if len(ev) == 0 {
		t.Fatal("no event")
	}
	return ev[len(ev)-1]
}

// serveFunc starts a loopback server running h.
func serveFunc(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func okPage(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "<html>a page</html>") }

// arrivals records when a server received each request.
type arrivals struct {
	mu sync.Mutex // guards at
	at []time.Time
}

func (a *arrivals) handler(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.at = append(a.at, time.Now())
	a.mu.Unlock()
	okPage(w, r)
}

func (a *arrivals) nth(i int) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[i]
}

// hostOf is the host key of a loopback server's URL.
func hostOf(u string) string { return strings.TrimPrefix(u, "http://") }

// TestEventFieldDocs holds every field of telemetry.Event to what its doc
// comment says, one row per stated behaviour, each against a real chain
// over loopback servers, or over in-memory ones in a synctest bubble where
// a row asserts a time, which the bubble's clock makes exact. A field
// without a row fails the test.
func TestEventFieldDocs(t *testing.T) {
	rows := []struct {
		field string
		doc   string
		check func(t *testing.T)
	}{
		{"Time", "when a sent attempt was sent, after its pacing wait", func(t *testing.T) {
			// In a synctest bubble, over an in-memory server: the
			// pacing wait and the send are on the bubble's clock, so
			// Time is exactly the start plus Wait, and the arrival.
			synctest.Test(t, func(t *testing.T) {
				var a arrivals
				r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Base: egresstest.NewHandlerTransport(http.HandlerFunc(a.handler))},
					map[string]float64{"paced.test": 300}) // 200ms apart
				if err := r.get(context.Background(), "http://paced.test/1"); err != nil {
					t.Fatal(err)
				}
				before := time.Now()
				if err := r.get(context.Background(), "http://paced.test/2"); err != nil {
					t.Fatal(err)
				}
				e := r.last(t)
				if e.Wait <= 0 {
					t.Fatalf("second request to a paced host: Wait %v, want > 0", e.Wait)
				}
				if !e.Time.Equal(before.Add(e.Wait)) || !e.Time.Equal(a.nth(1)) {
					t.Errorf("Time = %v, want the start %v plus Wait %v, the arrival %v", e.Time, before, e.Wait, a.nth(1))
				}
			})
		}},
		{"Time", "for an attempt not sent, when the chain began handling it", func(t *testing.T) {
			r := newEventRig(t, egresskit.Config{Scope: egresskit.Scope{Deny: []string{"denied.test"}}}, nil)
			before := time.Now()
			r.get(context.Background(), "http://denied.test/")
			after := time.Now()
			if e := r.last(t); e.Time.Before(before) || e.Time.After(after) {
				t.Errorf("Time = %v, want within the RoundTrip [%v, %v]", e.Time, before, after)
			}
		}},
		{"Host", "the host key: lower case, without userinfo, without the scheme's default port", func(t *testing.T) {
			srv := serveFunc(t, okPage)
			base := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, srv.Listener.Addr().String())
			}}
			t.Cleanup(base.CloseIdleConnections)
			r := newEventRig(t, egresskit.Config{Base: base, IgnoreRobots: true}, nil)
			if err := r.get(context.Background(), "http://crawler:pw@WWW.Example.TEST:80/p"); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Host != "www.example.test" {
				t.Errorf("Host = %q, want www.example.test", e.Host)
			}
			if err := r.get(context.Background(), "http://www.example.test:8080/p"); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Host != "www.example.test:8080" {
				t.Errorf("Host = %q, want www.example.test:8080", e.Host)
			}
		}},
		{"Method", "the HTTP method", func(t *testing.T) {
			srv := serveFunc(t, okPage)
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true}, nil)
			req, _ := http.NewRequest(http.MethodHead, srv.URL+"/", nil)
			if err := r.do(req); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Method != http.MethodHead {
				t.Errorf("Method = %q, want HEAD", e.Method)
			}
		}},
		{"URL", "the redacted target URL", func(t *testing.T) {
			srv := serveFunc(t, okPage)
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true}, nil)
			u := strings.Replace(srv.URL, "http://", "http://crawler:pw-Zq81@", 1) + "/path?api_key=s3cr3tV4lue&page=2"
			if err := r.get(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			e := r.last(t)
			if strings.Contains(e.URL, "s3cr3tV4lue") || strings.Contains(e.URL, "pw-Zq81") ||
				!strings.HasPrefix(e.URL, srv.URL+"/path?") || !strings.Contains(e.URL, "page=2") {
				t.Errorf("URL = %q, want %s/path with page=2, without the key or the password", e.URL, srv.URL)
			}
		}},
		{"Attempt, Retries, Final", "attempts numbered from 1; Retries = Attempt-1; Final on the request's last", func(t *testing.T) {
			n := 0
			var mu sync.Mutex
			srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n++
				first := n == 1
				mu.Unlock()
				if first {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				okPage(w, r)
			})
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true}, nil)
			if err := r.get(context.Background(), srv.URL+"/"); err != nil {
				t.Fatal(err)
			}
			ev := r.events()
			if len(ev) != 2 {
				t.Fatalf("%d events, want 2", len(ev))
			}
			for i, e := range ev {
				if e.Attempt != i+1 || e.Retries != i || e.Final != (i == 1) {
					t.Errorf("event %d: Attempt %d Retries %d Final %v, want %d %d %v", i, e.Attempt, e.Retries, e.Final, i+1, i, i == 1)
				}
			}
		}},
		{"Final", "an unsent event is always final", func(t *testing.T) {
			srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Retry: retry.Policy{MaxRetries: 3, BaseDelay: -1}}, nil)
			r.get(context.Background(), srv.URL+"/") // the second failure opens the breaker; the third attempt is refused
			ev := r.events()
			if len(ev) != 3 {
				t.Fatalf("%d events, want 3: %+v", len(ev), ev)
			}
			if e := ev[2]; e.Unsent != "open" || !e.Final || e.Attempt != 3 {
				t.Errorf("third attempt: Unsent %q Final %v Attempt %d, want open, true, 3", e.Unsent, e.Final, e.Attempt)
			}
		}},
		{"Status", "the status code, 0 when no response arrived", func(t *testing.T) {
			srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
			closed := httptest.NewServer(http.HandlerFunc(okPage))
			closed.Close()
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Retry: retry.Policy{MaxRetries: -1}}, nil)
			r.get(context.Background(), srv.URL+"/")
			if e := r.last(t); e.Status != http.StatusNotFound {
				t.Errorf("Status = %d, want 404", e.Status)
			}
			r.get(context.Background(), closed.URL+"/")
			if e := r.last(t); e.Status != 0 || e.Err == "" {
				t.Errorf("no response: Status %d Err %q, want 0 and an error", e.Status, e.Err)
			}
		}},
		{"Outcome", "the attempt's classification; unsent: Permanent, or Canceled when the caller's context ended", func(t *testing.T) {
			var a arrivals
			srv := serveFunc(t, a.handler)
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Scope: egresskit.Scope{Deny: []string{"denied.test"}}, MaxWait: -1},
				map[string]float64{hostOf(srv.URL): 1})
			if err := r.get(context.Background(), srv.URL+"/"); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Outcome != classify.OK {
				t.Errorf("200: Outcome %v, want ok", e.Outcome)
			}
			r.get(context.Background(), "http://denied.test/")
			if e := r.last(t); e.Outcome != classify.Permanent || e.Unsent != "out_of_scope" {
				t.Errorf("out of scope: Outcome %v Unsent %q, want permanent, out_of_scope", e.Outcome, e.Unsent)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel) // during the minute's pacing wait
			r.get(ctx, srv.URL+"/again")
			if e := r.last(t); e.Outcome != classify.Canceled || e.Unsent != "canceled" {
				t.Errorf("canceled while waiting: Outcome %v Unsent %q, want canceled, canceled", e.Outcome, e.Unsent)
			}
		}},
		{"Markers", "the challenge markers that matched", func(t *testing.T) {
			srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/challenge" {
					w.Header().Set("Cf-Mitigated", "challenge")
					w.WriteHeader(http.StatusForbidden)
					return
				}
				okPage(w, r)
			})
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Retry: retry.Policy{MaxRetries: -1}}, nil)
			r.get(context.Background(), srv.URL+"/")
			if e := r.last(t); len(e.Markers) != 0 {
				t.Errorf("plain page: Markers %q, want none", e.Markers)
			}
			r.get(context.Background(), srv.URL+"/challenge")
			if e := r.last(t); !slices.Equal(e.Markers, []string{"cloudflare"}) {
				t.Errorf("challenge: Markers %q, want [cloudflare]", e.Markers)
			}
		}},
		{"Egress, EgressReason, EgressRule", "the endpoint used, why, and the rule governing the host; \"\" when none", func(t *testing.T) {
			srv := serveFunc(t, okPage)
			pool, err := egress.New(egress.Config{
				Endpoints: []egress.Endpoint{{ID: "eu-1", Proxy: "direct", Labels: map[string]string{"region": "eu"}}},
				Rules:     []egress.Rule{{Name: "eu-only", Hosts: []string{"127.0.0.1"}, Labels: map[string]string{"region": "eu"}}},
				DNS:       egress.DNSConfig{Disabled: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			r := newEventRig(t, egresskit.Config{Egress: pool, IgnoreRobots: true}, nil)
			if err := r.get(context.Background(), srv.URL+"/"); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Egress != "eu-1" || e.EgressReason != "affinity" || e.EgressRule != "eu-only" {
				t.Errorf("through the pool: Egress %q EgressReason %q EgressRule %q, want eu-1, affinity, eu-only", e.Egress, e.EgressReason, e.EgressRule)
			}
			plain := newEventRig(t, egresskit.Config{IgnoreRobots: true}, nil)
			if err := plain.get(context.Background(), srv.URL+"/"); err != nil {
				t.Fatal(err)
			}
			if e := plain.last(t); e.Egress != "" || e.EgressReason != "" || e.EgressRule != "" {
				t.Errorf("without a pool: Egress %q EgressReason %q EgressRule %q, want all empty", e.Egress, e.EgressReason, e.EgressRule)
			}
		}},
		{"Breaker", "the state after the attempt: the attempt that opens it reports open; refused attempts report the state that refused them", func(t *testing.T) {
			srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Retry: retry.Policy{MaxRetries: -1}}, nil)
			var got []string
			for range 3 {
				r.get(context.Background(), srv.URL+"/")
				got = append(got, r.last(t).Breaker)
			}
			if want := []string{"closed", "open", "open"}; !slices.Equal(got, want) {
				t.Errorf("Breaker over three failing requests = %q, want %q (the second opens it, the third is refused)", got, want)
			}
			if e := r.last(t); e.Unsent != "open" {
				t.Errorf("third request: Unsent %q, want open", e.Unsent)
			}
		}},
		{"Breaker", "the attempt whose result halts the host reports halted, as do those refused for it; \"\" for a request refused before any attempt", func(t *testing.T) {
			srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, "<html>FieldBot is blocked here.</html>")
			})
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Scope: egresskit.Scope{Deny: []string{"denied.test"}}}, nil)
			r.get(context.Background(), srv.URL+"/")
			if e := r.last(t); e.Breaker != "halted" || e.Outcome != classify.Refused || e.Unsent != "" {
				t.Errorf("refusal: Breaker %q Outcome %v Unsent %q, want halted, refused, sent", e.Breaker, e.Outcome, e.Unsent)
			}
			r.get(context.Background(), srv.URL+"/again")
			if e := r.last(t); e.Breaker != "halted" || e.Unsent != "halted" {
				t.Errorf("after the halt: Breaker %q Unsent %q, want halted, halted", e.Breaker, e.Unsent)
			}
			r.get(context.Background(), "http://denied.test/")
			if e := r.last(t); e.Breaker != "" {
				t.Errorf("out of scope: Breaker %q, want \"\"", e.Breaker)
			}
		}},
		{"Wait", "the wait given: served by a sent attempt; an unsent one reports it unserved when past the deadline, 0 when none", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Base: egresstest.NewHandlerTransport(http.HandlerFunc(okPage))},
					map[string]float64{"paced.test": 1})
				if err := r.get(context.Background(), "http://paced.test/"); err != nil {
					t.Fatal(err)
				}
				if e := r.last(t); e.Wait != 0 {
					t.Errorf("first request: Wait %v, want 0", e.Wait)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				start := time.Now()
				err := r.get(ctx, "http://paced.test/next")
				took := time.Since(start) // on the bubble's clock
				e := r.last(t)
				if !errors.Is(err, context.DeadlineExceeded) || e.Unsent != "deadline" {
					t.Fatalf("second request within a minute: %v, Unsent %q; want the deadline", err, e.Unsent)
				}
				if e.Wait < 30*time.Second || took != 0 {
					t.Errorf("Wait %v after %v, want the unserved wait of about a minute, reported at once", e.Wait, took)
				}
			})
		}},
		{"Duration", "the round trip, from the send to the headers, excluding Wait; 0 when not sent", func(t *testing.T) {
			// In a synctest bubble, the server's 50ms is exact.
			synctest.Test(t, func(t *testing.T) {
				base := egresstest.NewHandlerTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					time.Sleep(50 * time.Millisecond)
					okPage(w, r)
				}))
				r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Base: base, Scope: egresskit.Scope{Deny: []string{"denied.test"}}}, nil)
				if err := r.get(context.Background(), "http://slow.test/"); err != nil {
					t.Fatal(err)
				}
				if e := r.last(t); e.Duration != 50*time.Millisecond {
					t.Errorf("Duration %v, want the server's 50ms", e.Duration)
				}
				r.get(context.Background(), "http://denied.test/")
				if e := r.last(t); e.Duration != 0 {
					t.Errorf("unsent: Duration %v, want 0", e.Duration)
				}
			})
		}},
		{"Err", "the redacted error text, \"\" when none", func(t *testing.T) {
			srv := serveFunc(t, okPage)
			closed := httptest.NewServer(http.HandlerFunc(okPage))
			closed.Close()
			r := newEventRig(t, egresskit.Config{IgnoreRobots: true, Retry: retry.Policy{MaxRetries: -1}}, nil)
			if err := r.get(context.Background(), srv.URL+"/"); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Err != "" {
				t.Errorf("200: Err %q, want \"\"", e.Err)
			}
			u := strings.Replace(closed.URL, "http://", "http://crawler:pw-Zq81@", 1) + "/?token=s3cr3tV4lue"
			r.get(context.Background(), u)
			e := r.last(t)
			if e.Err == "" || strings.Contains(e.Err, "s3cr3tV4lue") || strings.Contains(e.Err, "pw-Zq81") {
				t.Errorf("connection refused: Err %q, want the error without the token or the password", e.Err)
			}
		}},
		{"Unsent", "\"\" when sent, else the reason: halted, open, disallowed, out_of_scope, deadline, canceled", func(t *testing.T) {
			page := serveFunc(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					io.WriteString(w, "User-agent: *\nDisallow: /private\n")
					return
				}
				okPage(w, r)
			})
			r := newEventRig(t, egresskit.Config{Scope: egresskit.Scope{Deny: []string{"denied.test"}}}, map[string]float64{hostOf(page.URL): 1})
			if err := r.get(context.Background(), page.URL+"/public"); err != nil {
				t.Fatal(err)
			}
			if e := r.last(t); e.Unsent != "" || e.Status != 200 {
				t.Errorf("sent: Unsent %q, Status %d, want \"\" and 200", e.Unsent, e.Status)
			}
			r.get(context.Background(), page.URL+"/private/x")
			if e := r.last(t); e.Unsent != "disallowed" {
				t.Errorf("robots.txt: Unsent %q, want disallowed", e.Unsent)
			}
			r.get(context.Background(), "http://denied.test/")
			if e := r.last(t); e.Unsent != "out_of_scope" {
				t.Errorf("scope: Unsent %q, want out_of_scope", e.Unsent)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			r.get(ctx, page.URL+"/soon")
			if e := r.last(t); e.Unsent != "deadline" {
				t.Errorf("pacing past the deadline: Unsent %q, want deadline", e.Unsent)
			}
			// halted, open and canceled: see the Breaker and Outcome rows.
		}},
	}

	covered := map[string]bool{}
	for _, row := range rows {
		for f := range strings.SplitSeq(row.field, ", ") {
			covered[f] = true
		}
		t.Run(strings.ReplaceAll(row.field, ", ", "_")+"/"+row.doc, row.check)
	}
	for f := range reflect.TypeFor[telemetry.Event]().Fields() {
		if !covered[f.Name] {
			t.Errorf("telemetry.Event.%s: no row asserts its doc", f.Name)
		}
	}
}
