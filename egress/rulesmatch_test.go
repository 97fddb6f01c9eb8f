package egress_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

// TestMatchHostWithEmptyLabel: a host with an empty label (a malformed
// name a request may still carry) falls under the rule of the suffix it
// ends with, as any other name under it does: rules never fail open.
func TestMatchHostWithEmptyLabel(t *testing.T) {
	eps := []egress.Endpoint{{ID: "eu", Proxy: "direct", Labels: map[string]string{"region": "eu"}}}
	rs, err := egress.NewRuleSet([]egress.Rule{{Name: "eu-only", Hosts: []string{"*.example.com"}, Labels: map[string]string{"region": "eu"}}}, eps)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"a.example.com", "a.b.example.com", "a..b.example.com", ".a.example.com"} {
		if r := rs.Match(host); r == nil || r.Name != "eu-only" {
			t.Errorf("Match(%q) = %v, want rule eu-only", host, r)
		}
	}
	if r := rs.Match("example.org"); r != nil {
		t.Errorf("Match(example.org) = %v, want none", r)
	}
}

// TestConfigErrorNamesEndpoint: an endpoint without ID is named by its
// index in Config.Endpoints, or as the endpoint given to Add.
func TestConfigErrorNamesEndpoint(t *testing.T) {
	_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: "direct"}, {Proxy: "direct"}}})
	var ce *egress.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, egress.ErrEmptyID) || ce.Field != "Endpoints[1].ID" {
		t.Errorf("New with an endpoint without ID = %v, want a *ConfigError on Endpoints[1].ID", err)
	}
	p, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Add(egress.Endpoint{Proxy: "direct"})
	if !errors.As(err, &ce) || !errors.Is(err, egress.ErrEmptyID) || ce.Field != "Endpoint.ID" {
		t.Errorf("Add of an endpoint without ID = %v, want a *ConfigError on Endpoint.ID", err)
	}
}

// TestProxyErrorText names the endpoint and the failure.
func TestProxyErrorText(t *testing.T) {
	err := &egress.ProxyError{EndpointID: "p1", Kind: egress.KindDial}
	if got, want := err.Error(), `egress: endpoint "p1": proxy unreachable`; !strings.HasPrefix(got, want) {
		t.Errorf("Error() = %q, want it to start with %q", got, want)
	}
}

// TestNoEligibleNamesLabels: a rule no endpoint can satisfy is refused
// with the labels it requires, comma-separated.
func TestNoEligibleNamesLabels(t *testing.T) {
	eps := []egress.Endpoint{{ID: "us", Proxy: "direct", Labels: map[string]string{"region": "us", "tier": "a"}}}
	_, err := egress.NewRuleSet([]egress.Rule{{Name: "eu", Hosts: []string{"example.com"}, Labels: map[string]string{"region": "eu", "tier": "a"}}}, eps)
	if !errors.Is(err, egress.ErrNoEligible) || !strings.Contains(err.Error(), "region=eu,tier=a") {
		t.Errorf("NewRuleSet with no eligible endpoint = %v, want ErrNoEligible naming region=eu,tier=a", err)
	}
}

// TestHealthThresholdsMayMeet: DegradedBelow may equal QuarantineBelow
// (no degraded band), and may not be below it.
func TestHealthThresholdsMayMeet(t *testing.T) {
	ep := []egress.Endpoint{{ID: "a", Proxy: "direct"}}
	p, err := egress.New(egress.Config{Endpoints: ep, Health: egress.HealthConfig{QuarantineBelow: 0.3, DegradedBelow: 0.3}})
	if err != nil {
		t.Fatalf("New with DegradedBelow == QuarantineBelow: %v", err)
	}
	p.Close()
	if _, err := egress.New(egress.Config{Endpoints: ep, Health: egress.HealthConfig{QuarantineBelow: 0.3, DegradedBelow: 0.2}}); !errors.Is(err, egress.ErrBadSetting) {
		t.Errorf("New with DegradedBelow < QuarantineBelow = %v, want ErrBadSetting", err)
	}
}
