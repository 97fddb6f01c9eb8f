package egress_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

// geoEndpoints returns selection-only endpoints: eu-0..eu-(n-1) labelled
// region=eu, us-0..us-(n-1) labelled region=us, and one us datacenter.
func geoEndpoints(n int) []egress.Endpoint {
	var eps []egress.Endpoint
	for i := range n {
		eps = append(eps,
			egress.Endpoint{ID: fmt.Sprintf("eu-%d", i), Proxy: fmt.Sprintf("http://10.1.0.%d:3128", i+1),
				Labels: map[string]string{"region": "eu", "jurisdiction": "eu", "kind": "residential"}},
			egress.Endpoint{ID: fmt.Sprintf("us-%d", i), Proxy: fmt.Sprintf("http://10.2.0.%d:3128", i+1),
				Labels: map[string]string{"region": "us", "jurisdiction": "us", "kind": "residential"}})
	}
	return append(eps, egress.Endpoint{ID: "us-dc", Proxy: "http://10.3.0.1:3128",
		Labels: map[string]string{"region": "us", "jurisdiction": "us", "kind": "datacenter"}})
}

func geoRules() []egress.Rule {
	return []egress.Rule{
		{Name: "eu", Hosts: []string{"*.de", "site:example.fr"}, Labels: map[string]string{"region": "eu"}},
		{Name: "us-gov", Hosts: []string{"site:gov.example"}, Labels: map[string]string{"jurisdiction": "us", "kind": "datacenter"}},
		{Name: "open", Hosts: []string{"site:global.de", "203.0.113.7"}},
	}
}

func TestRulesMatchMostSpecific(t *testing.T) {
	rs, err := egress.NewRuleSet(geoRules(), geoEndpoints(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, want string }{
		{"www.bund.de", "eu"},
		{"a.b.c.de", "eu"},
		{"WWW.Bund.DE:8443", "eu"},
		{"bund.de.", "eu"},
		{"de", ""}, // *.de claims the hosts below de only
		{"example.fr", "eu"},
		{"shop.example.fr", "eu"},
		{"example.fr.evil.com", ""},
		{"notexample.fr", ""},
		{"gov.example", "us-gov"},
		{"www.gov.example", "us-gov"},
		{"global.de", "open"},     // site:global.de beats *.de
		{"cdn.global.de", "open"}, // the longer suffix wins
		{"203.0.113.7", "open"},
		{"203.0.113.7:443", "open"},
		{"example.com", ""},
		{"", ""},
	} {
		got := ""
		if r := rs.Match(tc.host); r != nil {
			got = r.Name
		}
		if got != tc.want {
			t.Errorf("Match(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

func TestNewRulesErrors(t *testing.T) {
	eu := map[string]string{"region": "eu"}
	for _, tc := range []struct {
		name  string
		rules []egress.Rule
		want  error
		field string
	}{
		{"no name", []egress.Rule{{Hosts: []string{"a.de"}, Labels: eu}}, egress.ErrBadRule, "Rules[0]"},
		{"duplicate name", []egress.Rule{{Name: "x", Hosts: []string{"a.de"}}, {Name: "x", Hosts: []string{"b.de"}}}, egress.ErrBadRule, `Rules["x"]`},
		{"no hosts", []egress.Rule{{Name: "x", Labels: eu}}, egress.ErrBadRule, `Rules["x"]`},
		{"bare star", []egress.Rule{{Name: "x", Hosts: []string{"*"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"empty suffix", []egress.Rule{{Name: "x", Hosts: []string{"*."}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"inner star", []egress.Rule{{Name: "x", Hosts: []string{"a.*.de"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"empty label", []egress.Rule{{Name: "x", Hosts: []string{"a..de"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"space", []egress.Rule{{Name: "x", Hosts: []string{"exa mple.de"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"url", []egress.Rule{{Name: "x", Hosts: []string{"https://example.de/"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"site of a public suffix", []egress.Rule{{Name: "x", Hosts: []string{"site:co.uk"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"site of a subdomain", []egress.Rule{{Name: "x", Hosts: []string{"site:www.example.fr"}}}, egress.ErrBadPattern, `Rules["x"]`},
		{"same suffix twice", []egress.Rule{{Name: "a", Hosts: []string{"*.de"}}, {Name: "b", Hosts: []string{"*.DE"}}}, egress.ErrOverlappingRules, `Rules["b"]`},
		{"site over exact", []egress.Rule{{Name: "a", Hosts: []string{"example.fr"}}, {Name: "b", Hosts: []string{"site:example.fr"}}}, egress.ErrOverlappingRules, `Rules["b"]`},
		{"site over wildcard", []egress.Rule{{Name: "a", Hosts: []string{"*.example.fr"}}, {Name: "b", Hosts: []string{"site:example.fr"}}}, egress.ErrOverlappingRules, `Rules["b"]`},
		{"unknown key", []egress.Rule{{Name: "x", Hosts: []string{"a.de"}, Labels: map[string]string{"regoin": "eu"}}}, egress.ErrUnknownLabel, `Rules["x"]`},
		{"no endpoint matches", []egress.Rule{{Name: "x", Hosts: []string{"a.de"}, Labels: map[string]string{"region": "eu", "kind": "datacenter"}}}, egress.ErrNoEligible, `Rules["x"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := egress.New(egress.Config{Endpoints: geoEndpoints(1), Rules: tc.rules})
			var ce *egress.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, tc.want) {
				t.Fatalf("New = %v, want a *ConfigError wrapping %v", err, tc.want)
			}
			if ce.Field != tc.field {
				t.Errorf("ConfigError.Field = %q, want %q (%v)", ce.Field, tc.field, err)
			}
		})
	}
	// The same patterns in one rule, and nested suffixes across rules, are fine.
	ok := []egress.Rule{
		{Name: "a", Hosts: []string{"*.de", "*.de", "site:example.fr", "www.example.fr"}, Labels: eu},
		{Name: "b", Hosts: []string{"*.bund.de", "[2001:db8::1]"}},
	}
	if _, err := egress.NewRuleSet(ok, geoEndpoints(1)); err != nil {
		t.Errorf("NewRuleSet(%v) = %v, want nil", ok, err)
	}
}

func TestReadRules(t *testing.T) {
	const doc = `{"rules": [
	  {"name": "eu", "hosts": ["*.de", "site:example.fr"], "labels": {"region": "eu"}},
	  {"name": "us-gov", "hosts": ["site:gov.example"], "labels": {"jurisdiction": "us", "kind": "datacenter"}}
	]}`
	rules, err := egress.ReadRules(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := egress.NewRuleSet(rules, geoEndpoints(1))
	if err != nil {
		t.Fatal(err)
	}
	if r := rs.Match("www.gov.example"); r == nil || r.Name != "us-gov" || r.Labels["kind"] != "datacenter" {
		t.Errorf("Match(www.gov.example) = %+v, want rule us-gov", r)
	}
	if got := len(rs.List()); got != 2 {
		t.Errorf("List has %d rules, want 2", got)
	}
	for _, bad := range []string{
		``,
		`{}`,
		`{"rules": [{"name": "x", "host": ["a.de"]}]}`, // unknown member
		`{"rules": []} {"rules": []}`,
		`{"rules": [{"name": 7}]}`,
	} {
		if _, err := egress.ReadRules(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadRules(%q) = nil error, want one", bad)
		}
	}
}

// TestRulesConstrainSelection checks the hard constraint over many hosts:
// ruled hosts leave only from eligible endpoints, unruled ones use all,
// and a rule left without usable endpoints fails with a *RuleError.
func TestRulesConstrainSelection(t *testing.T) {
	eps := geoEndpoints(4)
	pool := newPool(t, egress.Config{Endpoints: eps, Rules: geoRules()})
	labels := map[string]map[string]string{}
	for _, e := range eps {
		labels[e.ID] = e.Labels
	}
	ctx := context.Background()
	used := map[string]map[string]bool{"eu": {}, "us-gov": {}, "": {}}
	for i := range 4000 {
		for _, host := range []string{
			fmt.Sprintf("s%d.de", i), fmt.Sprintf("s%d.example.fr", i),
			fmt.Sprintf("s%d.gov.example", i), fmt.Sprintf("s%d.example.com", i),
		} {
			c, err := pool.Select(ctx, host)
			if err != nil {
				t.Fatalf("Select(%q): %v", host, err)
			}
			l := labels[c.EndpointID]
			switch c.Rule {
			case "eu":
				if l["region"] != "eu" {
					t.Fatalf("Select(%q) = %v: not region=eu", host, c)
				}
			case "us-gov":
				if l["jurisdiction"] != "us" || l["kind"] != "datacenter" {
					t.Fatalf("Select(%q) = %v: not a us datacenter", host, c)
				}
			case "":
				if !strings.HasSuffix(host, ".example.com") {
					t.Fatalf("Select(%q) = %v, want a rule", host, c)
				}
			}
			used[c.Rule][c.EndpointID] = true
		}
	}
	if got := len(used["eu"]); got != 4 {
		t.Errorf("eu hosts used %d endpoints, want all 4 eu ones", got)
	}
	if got := len(used[""]); got != len(eps) {
		t.Errorf("unruled hosts used %d endpoints, want all %d", got, len(eps))
	}

	// Forced or bound to an excluded endpoint: refused, naming the rule.
	for _, c := range []context.Context{egress.WithForced(ctx, "us-0"), egress.WithBinding(ctx, "us-0")} {
		_, err := pool.Select(c, "www.bund.de")
		var re *egress.RuleError
		if !errors.As(err, &re) || re.Rule != "eu" || re.EndpointID != "us-0" || !errors.Is(err, egress.ErrRuleUnsatisfied) {
			t.Errorf("Select(www.bund.de) through us-0 = %v, want a *RuleError for rule eu", err)
		}
	}
	if c, err := pool.Select(egress.WithForced(ctx, "eu-2"), "www.bund.de"); err != nil || c.EndpointID != "eu-2" || c.Rule != "eu" {
		t.Errorf("Select(www.bund.de) forced through eu-2 = %v, %v", c, err)
	}

	// With every eu endpoint gone, eu hosts fail; others still leave.
	for i := range 4 {
		if err := pool.Drain(fmt.Sprintf("eu-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := pool.Select(ctx, "www.bund.de")
	var re *egress.RuleError
	if !errors.As(err, &re) || re.Rule != "eu" || re.Host != "www.bund.de" {
		t.Fatalf("Select(www.bund.de) with eu drained = %v, want a *RuleError for rule eu", err)
	}
	if want := `egress: rule "eu" for host "www.bund.de": no usable eligible endpoint`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if c, err := pool.Select(ctx, "www.global.de"); err != nil || c.Rule != "open" {
		t.Errorf("Select(www.global.de) = %v, %v; want rule open", c, err)
	}
	if c, err := pool.Select(ctx, "example.com"); err != nil || c.Rule != "" {
		t.Errorf("Select(example.com) = %v, %v; want no rule", c, err)
	}
	// Adding an eligible endpoint back serves the rule again.
	if err := pool.Add(egress.Endpoint{ID: "eu-new", Proxy: "http://10.1.9.9:3128", Labels: map[string]string{"region": "eu"}}); err != nil {
		t.Fatal(err)
	}
	if c, err := pool.Select(ctx, "www.bund.de"); err != nil || c.EndpointID != "eu-new" {
		t.Errorf("Select(www.bund.de) = %v, %v; want eu-new", c, err)
	}
}

func TestChoiceString(t *testing.T) {
	for _, tc := range []struct {
		c    egress.Choice
		want string
	}{
		{egress.Choice{EndpointID: "a", Reason: egress.ReasonAffinity}, "a (affinity)"},
		{egress.Choice{EndpointID: "a", Reason: egress.ReasonCapacity, Rule: "eu"}, "a (capacity, rule eu)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestSelectWithRulesDoesNotAllocate checks the steady state of Select
// for known hosts under rules, and without one.
func TestSelectWithRulesDoesNotAllocate(t *testing.T) {
	pool := newPool(t, egress.Config{Endpoints: geoEndpoints(50), Rules: geoRules()})
	hosts := rulesBenchHosts(1000)
	ctx := context.Background()
	for _, h := range hosts {
		if _, err := pool.Select(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		pool.Select(ctx, hosts[i%len(hosts)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Select under rules allocates %v times per call, want 0", allocs)
	}
}

// rulesBenchHosts returns n hosts, a quarter of them under each rule of
// geoRules and a quarter under none.
func rulesBenchHosts(n int) []string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("s%d.%s", i, [...]string{"de", "example.fr", "gov.example", "example.com"}[i%4])
	}
	return hosts
}

// FuzzRulePattern checks, for any pattern New accepts, that it governs
// the hosts it names and no others of the probes below: an exact host
// itself, "*.d" the hosts below d but not d, "site:d" d and the hosts
// below it. Rejected patterns must fail with ErrBadPattern.
func FuzzRulePattern(f *testing.F) {
	for _, s := range []string{"example.fr", "*.de", "site:example.fr", "site:co.uk", "203.0.113.7", "[2001:db8::1]", "*.", "a..b", "SITE:Example.FR", "*.*.de"} {
		f.Add(s)
	}
	eps := []egress.Endpoint{{ID: "a", Proxy: "direct"}}
	f.Fuzz(func(t *testing.T, pat string) {
		rs, err := egress.NewRuleSet([]egress.Rule{{Name: "r", Hosts: []string{pat}}}, eps)
		if err != nil {
			if !errors.Is(err, egress.ErrBadPattern) {
				t.Fatalf("NewRuleSet(%q) = %v, want ErrBadPattern", pat, err)
			}
			return
		}
		governs := func(host string) bool { r := rs.Match(host); return r != nil && r.Name == "r" }
		p := strings.ToLower(strings.TrimSpace(pat))
		switch {
		case strings.HasPrefix(p, "site:"):
			d := strings.TrimPrefix(p, "site:")
			if !governs(d) || !governs("www."+d) || !governs("a.b."+d) || governs("x"+d) {
				t.Fatalf("site pattern %q: governs %s %v, www.%s %v, x%s %v", pat, d, governs(d), d, governs("www."+d), d, governs("x"+d))
			}
		case strings.HasPrefix(p, "*."):
			d := p[2:]
			if governs(d) || !governs("www."+d) || !governs("a.b."+d) || governs("x"+d) {
				t.Fatalf("wildcard %q: governs %s %v, www.%s %v, x%s %v", pat, d, governs(d), d, governs("www."+d), d, governs("x"+d))
			}
		default:
			host := strings.Trim(p, "[]")
			if !governs(host) || governs("www."+host) {
				t.Fatalf("exact %q: governs %s %v, www.%s %v", pat, host, governs(host), host, governs("www."+host))
			}
		}
	})
}
