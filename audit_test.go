package egresskit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/telemetry"
)

// TestAuditRecordsCompliance crawls a real loopback server through an egress
// pool with an audit log and checks the log holds the robots.txt decisions,
// the attempts, the halt, the escalation, the resume and the forced egress —
// and that it verifies.
func TestAuditRecordsCompliance(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			io.WriteString(w, "User-agent: *\nDisallow: /private\n")
		case "/blocked":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "AuditBot is not welcome")
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "direct-1", Proxy: "direct"}, {ID: "direct-2", Proxy: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	chain := mustChain(egresskit.Config{
		Egress:     pool,
		UserAgent:  "AuditBot/1.0",
		Audit:      audit,
		Store:      mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000, Burst: 10}}),
		OnEscalate: func(egresskit.Escalation) {},
	})
	c := &http.Client{Transport: chain}
	get(c, srv.URL+"/public")
	get(c, srv.URL+"/private/x")
	req, _ := http.NewRequestWithContext(egress.WithForced(context.Background(), "direct-2"), "GET", srv.URL+"/forced", nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
	get(c, srv.URL+"/blocked")
	host, _ := chain.HostKey(srv.URL)
	if err := chain.Resume(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}

	kinds, unsent := map[string]int{}, map[string]int{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		kinds[line.Kind]++
		var rec struct {
			Path         string `json:"path"`
			Allowed      bool   `json:"allowed"`
			Egress       string `json:"egress"`
			EgressReason string `json:"egress_reason"`
			Unsent       string `json:"unsent"`
		}
		json.Unmarshal(sc.Bytes(), &rec)
		switch line.Kind {
		case "robots":
			if want := rec.Path != "/private/x"; rec.Allowed != want {
				t.Errorf("robots line for %s: allowed %v, want %v", rec.Path, rec.Allowed, want)
			}
		case "attempt":
			// Each attempt sent names the endpoint it left through and
			// why; the request robots.txt disallowed was not sent.
			switch {
			case rec.Unsent != "":
				unsent[rec.Unsent]++
				if rec.Egress != "" {
					t.Errorf("unsent attempt line with an egress: %s", sc.Text())
				}
			case rec.Egress == "" || rec.EgressReason == "":
				t.Errorf("attempt line without its egress: %s", sc.Text())
			}
		}
	}
	for kind, want := range map[string]int{"robots": 4, "halt": 1, "escalation": 1, "resume": 1, "forced_egress": 1} {
		if kinds[kind] != want {
			t.Errorf("audit has %d %q lines, want %d (all: %v)", kinds[kind], kind, want, kinds)
		}
	}
	if kinds["attempt"] != 4 || len(unsent) != 1 || unsent["disallowed"] != 1 {
		t.Errorf("audit has %d attempt lines, unsent %v; want 4, one of them unsent (disallowed) (all: %v)", kinds["attempt"], unsent, kinds)
	}
	if _, err := (telemetry.Verifier{}).VerifyFiles(path); err != nil {
		t.Errorf("VerifyFiles: %v", err)
	}
}

// TestEgressRefusalIsNotAHostFailure: a request egress will not send (its
// session's endpoint is gone) is not retried and does not count against the
// host, which was never asked.
func TestEgressRefusalIsNotAHostFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "only", Proxy: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	chain := mustChain(egresskit.Config{Egress: pool, IgnoreRobots: true,
		Store: mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000, Burst: 10}})})
	req, _ := http.NewRequestWithContext(egress.WithBinding(context.Background(), "gone"), "GET", srv.URL+"/", nil)
	_, err = (&http.Client{Transport: chain}).Do(req)
	if !errors.Is(err, egress.ErrBindingUnavailable) {
		t.Fatalf("err = %v, want ErrBindingUnavailable", err)
	}
	host, _ := chain.HostKey(srv.URL)
	st, _ := chain.Status(context.Background(), host)
	if st.ConsecutiveFailures != 0 || st.Recent.Transient != 0 || st.Recent.Permanent != 1 {
		t.Errorf("host state after an unsent request: %+v; want no failure and one attempt", st)
	}
}
