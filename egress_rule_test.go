package egresskit_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/telemetry"
)

// TestEventNamesEgressRule checks that the rule which decided a host's
// eligible endpoints reaches the event and the audit log, and that a rule
// with no usable endpoint fails the request unsent, naming the rule.
func TestEventNamesEgressRule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	pool, err := egress.New(egress.Config{
		Endpoints: []egress.Endpoint{
			{ID: "eu-1", Proxy: "direct", Labels: map[string]string{"region": "eu"}},
			{ID: "us-1", Proxy: "direct", Labels: map[string]string{"region": "us"}},
		},
		Rules: []egress.Rule{{Name: "eu-only", Hosts: []string{"127.0.0.1"}, Labels: map[string]string{"region": "eu"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	chain := mustChain(egresskit.Config{
		Egress: pool, IgnoreRobots: true, Audit: audit,
		Observers: []telemetry.Observer{rec},
		Store:     mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000, Burst: 10}}),
	})
	c := &http.Client{Transport: chain}
	if status, err := get(c, srv.URL+"/"); err != nil || status != 200 {
		t.Fatalf("get = %d, %v", status, err)
	}
	unruled := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if status, err := get(c, unruled+"/"); err != nil || status != 200 {
		t.Fatalf("get localhost = %d, %v", status, err)
	}
	if err := pool.Drain("eu-1"); err != nil {
		t.Fatal(err)
	}
	_, err = get(c, srv.URL+"/again")
	var re *egress.RuleError
	if !errors.As(err, &re) || re.Rule != "eu-only" {
		t.Fatalf("get with eu drained = %v, want a *egress.RuleError for eu-only", err)
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	events := append([]telemetry.Event(nil), rec.events...)
	rec.mu.Unlock()
	if len(events) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(events), events)
	}
	if e := events[0]; e.Egress != "eu-1" || e.EgressRule != "eu-only" || e.EgressReason != "affinity" {
		t.Errorf("ruled event: egress %q reason %q rule %q, want eu-1 affinity eu-only", e.Egress, e.EgressReason, e.EgressRule)
	}
	if e := events[1]; e.EgressRule != "" || e.Egress == "" {
		t.Errorf("unruled event: egress %q rule %q, want some endpoint and no rule", e.Egress, e.EgressRule)
	}
	if e := events[2]; e.Status != 0 || !strings.Contains(e.Err, `rule "eu-only"`) {
		t.Errorf("refused event: status %d err %q, want no status and the rule named", e.Status, e.Err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Kind string `json:"kind"`
			Rule string `json:"egress_rule"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if line.Kind == "attempt" {
			rules = append(rules, line.Rule)
		}
	}
	if len(rules) < 2 || rules[0] != "eu-only" || rules[1] != "" {
		t.Errorf("audit attempt lines carry rules %q, want eu-only first, none second", rules)
	}
	if _, err := (telemetry.Verifier{}).VerifyFiles(path); err != nil {
		t.Errorf("VerifyFiles: %v", err)
	}
}
