package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Rule says from which endpoints requests to some hosts may leave: only
// from endpoints that carry every one of its Labels. It is a hard
// constraint. When no eligible endpoint is usable, the request fails with
// a *RuleError; it never leaves from an endpoint the rule excludes, not
// even when forced (WithForced) or bound (WithBinding) to one.
//
// A Hosts entry is one of three patterns, matched against the target's
// host in lower case, without port or trailing dot:
//
//	www.example.fr    that host exactly (an IP address too)
//	*.de              every host below de, at any depth; not de itself
//	site:example.fr   the registrable domain example.fr (a public suffix
//	                  plus one label, per the public suffix list): the
//	                  domain itself and every host below it
//
// When several rules match a host, the most specific pattern decides: an
// exact host (site:'s domain itself included) beats any wildcard, and a
// longer suffix beats a shorter one, so "site:bund.de" overrides "*.de"
// for www.bund.de. Two rules may not claim the same exact host or the same
// suffix; New rejects that as errOverlappingRules rather than pick one.
type Rule struct {
	// Name names the rule in a Choice, a *RuleError and telemetry. It is
	// required and unique among the rules.
	Name string `json:"name"`
	// Hosts are the patterns of the hosts the rule governs; at least one.
	Hosts []string `json:"hosts"`
	// Labels are the labels an endpoint must carry, every one with this
	// exact value, to be eligible. Each key must be carried by some
	// endpoint of the pool, and some endpoint must match them all. An
	// empty map makes every endpoint eligible: a rule that exempts hosts
	// from a wider one.
	Labels map[string]string `json:"labels,omitempty"`
}

// eligible reports whether e carries every label the rule requires.
func (r *Rule) eligible(e Endpoint) bool { return labelsMatch(r.Labels, e.Labels) }

func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// The reasons of rule validation errors, in a *configError naming the rule.
var (
	// errBadPattern: a host pattern is malformed, or a site: pattern is
	// not a registrable domain.
	errBadPattern = errors.New("egress: malformed host pattern")
	// errOverlappingRules: two rules claim the same exact host or suffix.
	errOverlappingRules = errors.New("egress: rules claim the same hosts")
	// errUnknownLabel: a rule requires a label key that no endpoint
	// carries.
	errUnknownLabel = errors.New("egress: rule requires a label no endpoint carries")
	// errNoEligible: no endpoint carries every label a rule requires.
	errNoEligible = errors.New("egress: no endpoint is eligible under the rule")
	// errBadRule: a rule has no name, a duplicate name or no hosts.
	errBadRule = errors.New("egress: malformed rule")
)

// ErrRuleUnsatisfied is wrapped by the *RuleError of a request whose rule
// leaves no usable endpoint.
var ErrRuleUnsatisfied = errors.New("egress: no usable endpoint is eligible under the rule")

// RuleError is returned, wrapped in an error whose NotSent method reports
// true (see RoundTrip), when a host's rule
// leaves no usable endpoint: every eligible endpoint is quarantined,
// draining or removed, or the endpoint a request is forced or bound to is
// not eligible. The request was not sent.
type RuleError struct {
	// Rule is the name of the rule that governs the host.
	Rule string
	// Host is the target host.
	Host string
	// EndpointID is the forced or bound endpoint the rule excludes, or "".
	EndpointID string
}

func (e *RuleError) Error() string {
	if e.EndpointID != "" {
		return fmt.Sprintf("egress: rule %q for host %q excludes endpoint %q", e.Rule, e.Host, e.EndpointID)
	}
	return fmt.Sprintf("egress: rule %q for host %q: no usable eligible endpoint", e.Rule, e.Host)
}

// Unwrap returns ErrRuleUnsatisfied.
func (e *RuleError) Unwrap() error { return ErrRuleUnsatisfied }

// RuleSet is a validated set of rules: it finds the rule that governs a
// host, for a crawler author or an operator who checks before a crawl
// where its hosts may leave from (the preflight checks of package probe
// do). A Pool keeps its own. It is immutable and safe for concurrent use.
type RuleSet struct {
	list   []*Rule
	exact  map[string]*Rule // host → rule
	suffix map[string]*Rule // "de" → rule for every host below de
}

// NewRuleSet validates rules against the endpoints whose labels they
// select, and returns the set. Errors wrap egresskit.ErrInvalidConfig and
// name the rule: no name, a duplicate name or no hosts, a malformed host
// pattern, two rules claiming the same hosts, a label no endpoint carries,
// or no endpoint eligible.
func NewRuleSet(rules []Rule, endpoints []Endpoint) (*RuleSet, error) {
	rs := &RuleSet{exact: map[string]*Rule{}, suffix: map[string]*Rule{}}
	keys := map[string]bool{}
	for _, e := range endpoints {
		for k := range e.Labels {
			keys[k] = true
		}
	}
	names := map[string]bool{}
	for i := range rules {
		r := &Rule{Name: rules[i].Name, Hosts: slices.Clone(rules[i].Hosts), Labels: cloneLabels(rules[i].Labels)}
		field := fmt.Sprintf("Rules[%d]", i)
		if r.Name != "" {
			field = fmt.Sprintf("Rules[%q]", r.Name)
		}
		fail := func(err error, value string) (*RuleSet, error) {
			return nil, &configError{Field: field, Value: value, Err: err}
		}
		switch {
		case r.Name == "":
			return fail(fmt.Errorf("%w: no name", errBadRule), "")
		case names[r.Name]:
			return fail(fmt.Errorf("%w: duplicate name", errBadRule), "")
		case len(r.Hosts) == 0:
			return fail(fmt.Errorf("%w: no hosts", errBadRule), "")
		}
		names[r.Name] = true
		for _, k := range sortedKeys(r.Labels) {
			if !keys[k] {
				return fail(errUnknownLabel, k)
			}
		}
		if !slices.ContainsFunc(endpoints, r.eligible) {
			return fail(errNoEligible, formatLabels(r.Labels))
		}
		for j, pat := range r.Hosts {
			exact, suffix, err := parsePattern(pat)
			if err != nil {
				return fail(err, pat)
			}
			r.Hosts[j] = strings.ToLower(strings.TrimSpace(pat))
			for _, c := range []struct {
				m   map[string]*Rule
				key string
			}{{rs.exact, exact}, {rs.suffix, suffix}} {
				if c.key == "" {
					continue
				}
				if o := c.m[c.key]; o != nil && o != r {
					return fail(fmt.Errorf("%w: %q is also claimed by rule %q", errOverlappingRules, pat, o.Name), "")
				}
				c.m[c.key] = r
			}
		}
		rs.list = append(rs.list, r)
	}
	return rs, nil
}

// parsePattern returns the exact host and the suffix a pattern claims
// ("" for none).
func parsePattern(pat string) (exact, suffix string, err error) {
	p := strings.ToLower(strings.TrimSpace(pat))
	switch {
	case strings.HasPrefix(p, "site:"):
		d := strings.TrimPrefix(p, "site:")
		if !validHostname(d) {
			return "", "", errBadPattern
		}
		if etld1, err := publicsuffix.EffectiveTLDPlusOne(d); err != nil || etld1 != d {
			return "", "", fmt.Errorf("%w: not a registrable domain", errBadPattern)
		}
		return d, d, nil
	case strings.HasPrefix(p, "*."):
		d := p[2:]
		if !validHostname(d) {
			return "", "", errBadPattern
		}
		return "", d, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(p, "[]")); err == nil {
		return a.String(), "", nil
	}
	if !validHostname(p) {
		return "", "", errBadPattern
	}
	return p, "", nil
}

// validHostname reports whether s is a DNS name of letters, digits,
// hyphens and underscores in non-empty labels of at most 63 bytes.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Match returns the rule that governs host (a host name or address, with
// or without port, any case), or nil when no rule does. The rule is the
// set's own: read it, do not modify it.
func (rs *RuleSet) Match(host string) *Rule {
	if rs == nil {
		return nil
	}
	return rs.match(hostKey(host))
}

// match finds the rule of a normalised host without allocating: the exact
// host first, then its suffixes from the longest.
func (rs *RuleSet) match(host string) *Rule {
	if rs == nil || len(rs.list) == 0 {
		return nil
	}
	host = strings.TrimSuffix(host, ".")
	if strings.IndexByte(host, ':') >= 0 || host != "" && '0' <= host[len(host)-1] && host[len(host)-1] <= '9' {
		if a, err := netip.ParseAddr(host); err == nil {
			return rs.exact[a.String()] // an address has no suffixes
		}
	}
	if r := rs.exact[host]; r != nil {
		return r
	}
	for i := strings.IndexByte(host, '.'); i >= 0; {
		rest := host[i+1:]
		if r := rs.suffix[rest]; r != nil {
			return r
		}
		j := strings.IndexByte(rest, '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return nil
}

// maxRulesFile bounds a rules document read by ReadRules.
const maxRulesFile = 1 << 20

// ReadRules decodes rules from JSON: an object with one member "rules",
// a list of objects with "name", "hosts" and "labels", as in
//
//	{"rules": [
//	  {"name": "eu", "hosts": ["*.de", "site:example.fr"], "labels": {"region": "eu"}},
//	  {"name": "us-gov", "hosts": ["site:gov.example"],
//	   "labels": {"jurisdiction": "us", "kind": "datacenter"}}
//	]}
//
// Unknown members and documents over 1 MiB are errors. The rules are
// validated against a pool's endpoints by New or NewRuleSet.
func ReadRules(r io.Reader) ([]Rule, error) {
	var doc struct {
		Rules []Rule `json:"rules"`
	}
	dec := json.NewDecoder(io.LimitReader(r, maxRulesFile+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("egress: rules: %w", err)
	}
	if dec.More() {
		return nil, errors.New("egress: rules: trailing data after the document")
	}
	if doc.Rules == nil {
		return nil, errors.New(`egress: rules: no "rules" list`)
	}
	return doc.Rules, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// formatLabels renders labels as "k=v,k=v", keys sorted.
func formatLabels(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + m[k])
	}
	return b.String()
}
