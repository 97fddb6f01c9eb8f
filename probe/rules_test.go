package probe_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/probe"
)

// TestMatrixRules runs a matrix under egress rules: each target goes only
// through the egresses its rule allows, and the report says per rule and
// host whether one of them got through.
func TestMatrixRules(t *testing.T) {
	site := siteServer(t).URL
	local := strings.Replace(site, "127.0.0.1", "localhost", 1)
	eu := map[string]string{"region": "eu"}
	proxies := []egress.Endpoint{
		{ID: "eu-1", Proxy: newForwardProxy(t, false), Labels: eu},
		{ID: "eu-dead", Proxy: "http://" + deadAddr(t), Labels: eu},
		{ID: "us-1", Proxy: newForwardProxy(t, false), Labels: map[string]string{"region": "us"}},
		{ID: "ap-dead", Proxy: "http://" + deadAddr(t), Labels: map[string]string{"region": "ap"}},
	}
	rules := []egress.Rule{
		{Name: "eu-only", Hosts: []string{"127.0.0.1"}, Labels: eu},
		{Name: "ap-only", Hosts: []string{"localhost"}, Labels: map[string]string{"region": "ap"}},
	}
	rep, err := probe.Run(context.Background(), []probe.Target{{URL: site + "/ok/1"}, {URL: local + "/ok/2"}},
		probe.Options{Matrix: true, Proxies: proxies, Rules: rules, Deadline: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var through []string
	for _, r := range rep.Results {
		through = append(through, r.Rule+"@"+r.Egress)
	}
	if want := []string{"eu-only@eu-1", "eu-only@eu-dead", "ap-only@ap-dead"}; !reflect.DeepEqual(through, want) {
		t.Errorf("probes went rule@egress %v, want %v (never through an excluded egress)", through, want)
	}
	want := []probe.RuleCoverage{
		{Rule: "eu-only", Host: hostOf(t, site), Eligible: []string{"eu-1", "eu-dead"}, Healthy: []string{"eu-1"}, OK: true},
		{Rule: "ap-only", Host: hostOf(t, local), Eligible: []string{"ap-dead"}, OK: false},
	}
	if !reflect.DeepEqual(rep.Rules, want) {
		t.Errorf("Rules = %+v, want %+v", rep.Rules, want)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rules []struct {
			Rule    string   `json:"rule"`
			Host    string   `json:"host"`
			Healthy []string `json:"healthy"`
			OK      bool     `json:"ok"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rules) != 2 || !doc.Rules[0].OK || doc.Rules[1].OK || doc.Rules[1].Healthy == nil {
		t.Errorf("report JSON rules = %+v, want eu-only ok and ap-only not ok with an empty healthy list", doc.Rules)
	}
}

// TestRulesWithoutMatrix: a target is sent through an egress its rule
// allows, in turn, and a target naming an excluded egress is refused
// before anything is sent.
func TestRulesWithoutMatrix(t *testing.T) {
	site := siteServer(t).URL
	eu := map[string]string{"region": "eu"}
	proxies := []egress.Endpoint{
		{ID: "us-1", Proxy: newForwardProxy(t, false), Labels: map[string]string{"region": "us"}},
		{ID: "eu-1", Proxy: newForwardProxy(t, false), Labels: eu},
	}
	rules := []egress.Rule{{Name: "eu-only", Hosts: []string{"127.0.0.1"}, Labels: eu}}
	opts := probe.Options{Proxies: proxies, Rules: rules, Deadline: 5 * time.Second}
	rep, err := probe.Run(context.Background(), []probe.Target{{URL: site + "/ok/1"}, {URL: site + "/ok/2"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Egress != "eu-1" || r.Rule != "eu-only" || !r.Success() {
			t.Errorf("result %+v, want a success through eu-1 under eu-only", r)
		}
	}
	_, err = probe.Run(context.Background(), []probe.Target{{URL: site + "/ok/1", Egress: "us-1"}}, opts)
	var te *probe.TargetError
	if !errors.As(err, &te) || !errors.Is(err, probe.ErrExcludedEgress) || !strings.Contains(err.Error(), `"eu-only"`) {
		t.Errorf("Run with a target naming us-1 = %v, want a *TargetError wrapping ErrExcludedEgress", err)
	}
	_, err = probe.Run(context.Background(), []probe.Target{{URL: site}}, probe.Options{Proxies: proxies,
		Rules: []egress.Rule{{Name: "x", Hosts: []string{"127.0.0.1"}, Labels: map[string]string{"regoin": "eu"}}}})
	if !errors.Is(err, egresskit.ErrInvalidConfig) || !strings.Contains(err.Error(), "label") {
		t.Errorf("Run with a rule on an unknown label = %v, want an invalid config naming the label", err)
	}
}
