package prometheus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
	egressprom "github.com/egresskit/egresskit/telemetry/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// sink collects every text the crawl produced, each labelled with where it
// came from, so that a leak names its source.
type sink struct {
	mu    sync.Mutex // guards texts
	texts []sinkText
}

type sinkText struct{ where, text string }

func (s *sink) add(where string, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts = append(s.texts, sinkText{where, fmt.Sprintf(format, args...)})
}

// addJSON adds v's JSON encoding, and a note when v does not encode.
func (s *sink) addJSON(where string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.add(where, "json error: %v", err)
		return
	}
	s.add(where, "%s", b)
}

// authProxy is an HTTP forward proxy for plain-http targets that requires
// Basic credentials (407 otherwise), as commercial proxies do. It counts
// the requests it let through with the right credentials.
type authProxy struct {
	srv      *httptest.Server
	upstream *http.Transport
	want     string // the expected Proxy-Authorization value
	passed   atomic.Int64
}

func newAuthProxy(user, pass string) *authProxy {
	p := &authProxy{
		upstream: &http.Transport{},
		want:     "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)),
	}
	rp := &httputil.ReverseProxy{
		// pr.Out.URL is already the absolute target URL; ReverseProxy
		// drops Proxy-Authorization as a hop-by-hop header.
		Rewrite:   func(*httputil.ProxyRequest) {},
		Transport: p.upstream,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "absolute-form request required", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Proxy-Authorization") != p.want {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
		p.passed.Add(1)
		rp.ServeHTTP(w, r)
	}))
	return p
}

func (p *authProxy) close() {
	p.srv.Close()
	p.upstream.CloseIdleConnections()
}

// proxyURL returns the proxy's URL with credentials.
func (p *authProxy) proxyURL(user, pass string) string {
	return "http://" + user + ":" + pass + "@" + strings.TrimPrefix(p.srv.URL, "http://")
}

// closedPort returns an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCrawlLeaksNoSecret runs a crawl through the full chain whose URLs
// (userinfo and query), proxy URLs and request headers (Authorization,
// Cookie, an API key) all carry one unique secret, and checks that the
// secret appears in no slog line, event, audit line, error string,
// escalation, metric, robots decision, host state or printed form of the
// egress pool and its configuration. The crawl covers success, retries, a
// robots.txt disallow, a refusal (halt and escalation), a request to the
// halted host, attempt timeouts, a dead proxy and a proxy rejecting the
// credentials.
func TestCrawlLeaksNoSecret(t *testing.T) {
	raw := make([]byte, 8)
	rand.Read(raw)
	secret := "Zq" + hex.EncodeToString(raw) // unique, and unchanged by URL escaping
	forbidden := []string{
		secret,
		base64.StdEncoding.EncodeToString([]byte("crawler:" + secret)),
		base64.StdEncoding.EncodeToString([]byte("proxyuser:" + secret)),
		base64.StdEncoding.EncodeToString([]byte("proxyuser:" + secret + "wrong")),
	}
	out := &sink{}
	ctx := context.Background()

	// Targets. sawSecret counts requests that reached a target carrying the
	// secret, to prove that it really travelled.
	var sawSecret atomic.Int64
	stop := make(chan struct{})
	target := func(h http.HandlerFunc) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.Header.Get("Authorization"), secret) && strings.Contains(r.Header.Get("Cookie"), secret) &&
				strings.Contains(r.URL.RawQuery, secret) {
				sawSecret.Add(1)
			}
			if r.URL.Path == "/robots.txt" {
				io.WriteString(w, "User-agent: *\nDisallow: /private\n")
				return
			}
			h(w, r)
		}))
	}
	var flakyN atomic.Int64
	okSrv := target(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>ok</html>") })
	flakySrv := target(func(w http.ResponseWriter, r *http.Request) {
		if flakyN.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "<html>ok</html>")
	})
	refusedSrv := target(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html>RedactBot is not welcome here.</html>")
	})
	hangSrv := target(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	proxy := newAuthProxy("proxyuser", secret)
	defer func() {
		close(stop)
		for _, s := range []*httptest.Server{okSrv, flakySrv, refusedSrv, hangSrv} {
			s.Close()
		}
		proxy.close()
	}()

	// The egress pools: one through the proxy with the right credentials,
	// one with a dead proxy and a proxy given wrong credentials, both
	// carrying the secret in their URLs.
	goodCfg := egress.Config{Endpoints: []egress.Endpoint{
		{ID: "good", Proxy: proxy.proxyURL("proxyuser", secret), Labels: map[string]string{"kind": "test"}},
	}}
	badCfg := egress.Config{Endpoints: []egress.Endpoint{
		{ID: "dead", Proxy: "http://proxyuser:" + secret + "@" + closedPort(t)},
		{ID: "badauth", Proxy: proxy.proxyURL("proxyuser", secret+"wrong")},
	}}
	good, err := egress.New(goodCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bad, err := egress.New(badCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()

	// Every sink: slog (JSON to a buffer), an event copier, the audit log,
	// the Prometheus collector.
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logBuf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events atomic.Int64
	copier := telemetry.ObserverFunc(func(_ context.Context, e *telemetry.Event) {
		events.Add(1)
		out.add("event", "%#v", *e)
		out.addJSON("event json", e)
	})
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: auditPath})
	if err != nil {
		t.Fatal(err)
	}
	state := mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60000, Burst: 100}})
	hostKey := func(raw string) string {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		k, err := hostkey.Of(u, hostkey.ByHost)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	collector := egressprom.New(egressprom.Config{
		BreakerCounts: func() map[string]int {
			n := state.Counts()
			return map[string]int{"closed": n.Closed, "half-open": n.HalfOpen, "open": n.Open, "halted": n.Halted}
		},
		Watch: []string{hostKey(refusedSrv.URL), hostKey(okSrv.URL)},
		Endpoints: func() []egress.EndpointStatus {
			return append(good.Endpoints(), bad.Endpoints()...)
		},
	})
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(collector)

	var escalations atomic.Int64
	newChain := func(pool *egress.Pool, ignoreRobots bool) *egresskit.Transport {
		return mustChain(egresskit.Config{
			Base:         pool, // robots.txt through the proxy too
			Egress:       pool,
			IgnoreRobots: ignoreRobots,
			UserAgent:    "RedactBot/1.0 (+https://example.org/bot)",
			Retry: retry.Policy{
				MaxRetries:     1,
				BaseDelay:      10 * time.Millisecond,
				AttemptTimeout: 300 * time.Millisecond,
				Deadline:       5 * time.Second,
			},
			Store:     state,
			Observers: []telemetry.Observer{telemetry.NewSlog(logger, telemetry.SlogOptions{}), copier, audit, collector},
			OnEscalate: func(e egresskit.Escalation) {
				escalations.Add(1)
				out.add("escalation", "%#v %+v %s", e, e, e.BodyHead)
				out.addJSON("escalation json", e)
				r := classify.Result{Outcome: classify.Refused, Status: e.Status, Markers: e.Markers, Reason: e.Reason}
				if err := auditrec.Halt(audit, e.Host, r); err != nil {
					out.add("audit error", "%v", err)
				}
				if err := auditrec.Escalation(audit, e.Host, r); err != nil {
					out.add("audit error", "%v", err)
				}
			},
		})
	}
	// The failing chain skips robots.txt, which it could not fetch through
	// its broken proxies, so that its requests reach the egress layer.
	chain, failing := newChain(good, false), newChain(bad, true)

	// The crawl.
	withSecret := func(base, path string) string {
		u := strings.Replace(base, "http://", "http://crawler:"+secret+"@", 1)
		return u + path + "?token=" + secret + "&api_key=" + secret + "&page=1#access_token=" + secret
	}
	send := func(c *egresskit.Transport, ctx context.Context, base, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, withSecret(base, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Cookie", "session="+secret+"; theme=dark")
		req.Header.Set("X-Api-Key", secret)
		audit.Record("request", slog.Any("url", req.URL), slog.Any("header", req.Header))
		resp, err := (&http.Client{Transport: c}).Do(req)
		if err != nil {
			// http.Client wraps the chain's error in a *url.Error whose URL
			// is the caller's own (the standard library strips only the
			// password). The chain's error is the one inside; the whole
			// error is what a crawler logs through Redactor.RedactError.
			var uerr interface{ Unwrap() error }
			if errors.As(err, &uerr) {
				out.add("error", "%v", uerr.Unwrap())
				out.add("error %+v", "%+v", uerr.Unwrap())
			}
			out.add("redacted error", "%s", (telemetry.Redactor{}).RedactError(err))
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	expect := func(what string, resp *http.Response, err error, status int, target error) {
		t.Helper()
		switch {
		case target != nil && !errors.Is(err, target):
			t.Errorf("%s: err = %v, want %v", what, err, target)
		case target == nil && status != 0 && (err != nil || resp.StatusCode != status):
			t.Errorf("%s: %v, %v; want status %d", what, resp, err, status)
		case target == nil && status == 0 && err == nil:
			t.Errorf("%s: no error, want one", what)
		}
	}
	r, err := send(chain, ctx, okSrv.URL, "/a")
	expect("ok", r, err, 200, nil)
	r, err = send(chain, ctx, okSrv.URL, "/b;jsessionid="+secret)
	expect("ok with a path parameter", r, err, 200, nil)
	r, err = send(chain, ctx, okSrv.URL, "/private/x")
	expect("robots", r, err, 0, egresskit.ErrDisallowed)
	auditrec.Robots(audit, hostKey(okSrv.URL), "/private/x?token="+secret, false)
	r, err = send(chain, ctx, flakySrv.URL, "/item")
	expect("retried", r, err, 200, nil)
	r, err = send(chain, ctx, refusedSrv.URL, "/members")
	expect("refused", r, err, 403, nil)
	r, err = send(chain, ctx, refusedSrv.URL, "/members/2")
	expect("halted", r, err, 0, egresskit.ErrHalted)
	r, err = send(chain, ctx, hangSrv.URL, "/slow")
	expect("hang", r, err, 0, nil)
	for _, id := range []string{"dead", "badauth"} {
		auditrec.ForcedEgress(audit, hostKey(okSrv.URL), id, "test of "+id)
		r, err = send(failing, egress.WithForced(ctx, id), okSrv.URL, "/c")
		expect("egress "+id, r, err, 0, nil)
		var pe *egress.ProxyError
		if !errors.As(err, &pe) || pe.EndpointID != id {
			t.Errorf("egress %s: err = %v, want a *egress.ProxyError for %s", id, err, id)
		}
	}
	if err := chain.Resume(ctx, hostKey(refusedSrv.URL)); err != nil {
		t.Fatal(err)
	}
	auditrec.Resume(audit, hostKey(refusedSrv.URL), "operator")

	// Everything else that prints: host states, the pools and their
	// configuration, configuration errors, the metrics.
	for _, srv := range []*httptest.Server{okSrv, flakySrv, refusedSrv, hangSrv} {
		st, err := chain.Status(ctx, hostKey(srv.URL))
		out.add("host state", "%+v %v", st, err)
	}
	for name, p := range map[string]*egress.Pool{"good": good, "bad": bad} {
		eps := p.Endpoints()
		out.add("pool "+name+" endpoints", "%v %+v %#v", eps, eps, eps)
		out.addJSON("pool "+name+" endpoints json", eps)
	}
	for _, cfg := range []egress.Config{goodCfg, badCfg} {
		out.add("pool config", "%v %+v %#v", cfg, cfg, cfg)
		for _, e := range cfg.Endpoints {
			out.add("endpoint", "%s %v %+v %#v %s", e.String(), e, e, e, e.GoString())
			out.addJSON("endpoint json", e)
			logger.Info("endpoint", "endpoint", e)
		}
	}
	for _, proxyURL := range []string{
		"ftp://proxyuser:" + secret + "@127.0.0.1:1",
		"http://proxyuser:" + secret + "@127.0.0.1:99999",
		"http://proxyuser:" + secret + "@[::1",
		"socks5://proxyuser:" + secret + "@",
	} {
		_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "x", Proxy: proxyURL}}})
		if err == nil {
			t.Errorf("egress.New(bad proxy) = nil error")
			continue
		}
		out.add("config error", "%v %+v", err, err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out.add("scrape", "%s", rec.Body.String())
	mfs, err := reg.Gather()
	if err != nil {
		t.Errorf("Gather: %v", err)
	}
	for _, mf := range mfs {
		out.add("gathered", "%v", mf)
	}
	if err := audit.Close(); err != nil {
		t.Errorf("audit: %v", err)
	}
	if _, err := (telemetry.Verifier{}).VerifyFiles(auditPath); err != nil {
		t.Errorf("audit log does not verify: %v", err)
	}
	auditText, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	out.add("audit", "%s", auditText)
	logMu.Lock()
	out.add("slog", "%s", logBuf.String())
	logMu.Unlock()

	// The crawl did what it should, and the secret really travelled.
	if sawSecret.Load() < 4 {
		t.Errorf("targets saw the secret on %d requests, want at least 4: the test proves nothing", sawSecret.Load())
	}
	if proxy.passed.Load() == 0 {
		t.Error("no request passed the proxy's credential check")
	}
	if escalations.Load() != 1 {
		t.Errorf("escalations = %d, want 1", escalations.Load())
	}
	if n := events.Load(); n < 10 {
		t.Errorf("events = %d, want at least 10", n)
	}
	if n := strings.Count(string(auditText), `"kind":"attempt"`); n != int(events.Load()) {
		t.Errorf("audit attempt lines = %d, want one per event (%d)", n, events.Load())
	}
	if n := strings.Count(logBuf.String(), "egress attempt"); n != int(events.Load()) {
		t.Errorf("slog records = %d, want one per event (%d)", n, events.Load())
	}
	if !strings.Contains(string(auditText), telemetry.Redacted) {
		t.Error("the audit log shows no redaction: the secret never reached it")
	}

	// The secret, in any of its forms, appears nowhere.
	for _, txt := range out.texts {
		for _, f := range forbidden {
			if i := strings.Index(txt.text, f); i >= 0 {
				lo, hi := max(0, i-120), min(len(txt.text), i+len(f)+40)
				t.Errorf("%s leaks the secret: ...%s...", txt.where, txt.text[lo:hi])
				break
			}
		}
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
