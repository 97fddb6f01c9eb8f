package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// TestEndToEndRules runs a matrix under an egress rules file: the ruled
// host is probed only through its eligible (dead) proxy and reported as
// lacking a healthy eligible endpoint; the unruled host goes through both.
func TestEndToEndRules(t *testing.T) {
	site := testprog.ProbeSite(t)
	local := strings.Replace(site, "127.0.0.1", "localhost", 1)
	dir := t.TempDir()
	proxies := filepath.Join(dir, "proxies.txt")
	os.WriteFile(proxies, []byte("eu-dead "+deadProxy(t)+" region=eu\nus-direct direct region=us\n"), 0o600)
	rules := filepath.Join(dir, "rules.json")
	os.WriteFile(rules, []byte(`{"rules": [{"name": "eu-only", "hosts": ["127.0.0.1"], "labels": {"region": "eu"}}]}`), 0o600)

	r := runBinary(t, "", "-timeout", "5s", "-matrix", "-proxies", proxies, "-rules", rules, site+"/ok/1", local+"/ok/2")
	var doc struct {
		Results []struct {
			Egress string `json:"egress"`
			Host   string `json:"host"`
			Rule   string `json:"rule"`
		} `json:"results"`
		Rules []struct {
			Rule     string   `json:"rule"`
			Host     string   `json:"host"`
			Eligible []string `json:"eligible"`
			Healthy  []string `json:"healthy"`
			OK       bool     `json:"ok"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("output %q: %v (stderr %q)", r.stdout, err, r.stderr)
	}
	var through []string
	for _, res := range doc.Results {
		through = append(through, res.Rule+"@"+res.Egress)
	}
	if got, want := strings.Join(through, " "), "eu-only@eu-dead @eu-dead @us-direct"; got != want {
		t.Errorf("probes rule@egress = %q, want %q", got, want)
	}
	if len(doc.Rules) != 1 || doc.Rules[0].Rule != "eu-only" || doc.Rules[0].OK ||
		strings.Join(doc.Rules[0].Eligible, ",") != "eu-dead" || len(doc.Rules[0].Healthy) != 0 {
		t.Errorf("rules = %+v, want eu-only with eligible [eu-dead], none healthy, not ok", doc.Rules)
	}
	if strings.Contains(r.stdout, "pa55-w0rd-secret") {
		t.Errorf("output leaks the proxy password")
	}
	r = runBinary(t, "", "-timeout", "5s", "-matrix", "-format", "text", "-proxies", proxies, "-rules", rules, site+"/ok/1")
	if want := "rule eu-only, host " + strings.TrimPrefix(site, "http://") + ": NO healthy eligible egress (eligible: eu-dead)"; !strings.Contains(r.stdout, want) {
		t.Errorf("text output lacks %q:\n%s", want, r.stdout)
	}

	// A rule on a label no proxy carries, and a malformed file: usage errors.
	os.WriteFile(rules, []byte(`{"rules": [{"name": "x", "hosts": ["127.0.0.1"], "labels": {"regoin": "eu"}}]}`), 0o600)
	if r := runBinary(t, "", "-timeout", "5s", "-proxies", proxies, "-rules", rules, site+"/ok/1"); r.code != exitUsage || !strings.Contains(r.stderr, "regoin") {
		t.Errorf("unknown label: exit %d stderr %q, want %d naming the label", r.code, r.stderr, exitUsage)
	}
	os.WriteFile(rules, []byte(`{"rules": [`), 0o600)
	if r := runBinary(t, "", "-timeout", "5s", "-rules", rules, site+"/ok/1"); r.code != exitUsage || r.stdout != "" {
		t.Errorf("malformed rules: exit %d stdout %q, want %d and nothing on stdout", r.code, r.stdout, exitUsage)
	}
}
