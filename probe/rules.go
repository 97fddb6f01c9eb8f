package probe

import (
	"fmt"
	"slices"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/probeinput"
)

// RuleCoverage says, for one host governed by an egress rule, which
// eligible egresses a matrix run probed it through and which of them got
// through: the target answered, whatever it answered — a refusal is the
// target's verdict, not the egress's. OK is false when none did: a crawl
// under that rule would find no healthy eligible endpoint for the host.
type RuleCoverage struct {
	// Rule is the rule's name.
	Rule string
	// Host is the host key, as in TargetResult.Host.
	Host string
	// Eligible are the IDs of the egresses the rule allows for the host,
	// in the order probed.
	Eligible []string
	// Healthy are those of Eligible through which the target answered.
	Healthy []string
	// OK is true when Healthy is not empty.
	OK bool
}

// rulePlan is what a plan knows of the rules.
type rulePlan struct {
	rules *egress.RuleSet // nil without Options.Rules
}

func newRulePlan(s settings) (rulePlan, error) {
	if len(s.Rules) == 0 {
		return rulePlan{}, nil
	}
	rs, err := egress.NewRuleSet(s.Rules, s.Proxies)
	if err != nil {
		return rulePlan{}, err
	}
	return rulePlan{rules: rs}, nil
}

// match returns the rule that governs the target's host name, or nil.
func (rp rulePlan) match(hostname string) *egress.Rule {
	return rp.rules.Match(hostname)
}

// allows reports whether rule (nil: none) lets a probe leave from e.
func allows(rule *egress.Rule, e *exit) bool {
	if rule == nil {
		return true
	}
	// Eligible: the endpoint carries every label the rule requires, with
	// its exact value, as package egress decides it.
	for k, v := range rule.Labels {
		if have, ok := e.labels[k]; !ok || have != v {
			return false
		}
	}
	return true
}

// excluded is the error of a target whose egress the rule excludes.
func excluded(i int, shown string, rule *egress.Rule, e *exit) error {
	what := "every egress"
	if e != nil {
		what = fmt.Sprintf("egress %q", e.id)
	}
	return &TargetError{Index: i, URL: shown, Err: fmt.Errorf("%w: rule %q excludes %s", probeinput.ErrExcludedEgress, rule.Name, what)}
}

// coverage builds Report.Rules from the results of a matrix run: one
// entry per (rule, host), in the order first probed.
func coverage(jobs []job, results []TargetResult) []RuleCoverage {
	var out []RuleCoverage
	index := map[[2]string]int{}
	for i, j := range jobs {
		if j.rule == "" {
			continue
		}
		k := [2]string{j.rule, j.host}
		n, ok := index[k]
		if !ok {
			n = len(out)
			index[k] = n
			out = append(out, RuleCoverage{Rule: j.rule, Host: j.host})
		}
		c := &out[n]
		if !slices.Contains(c.Eligible, j.exit.id) {
			c.Eligible = append(c.Eligible, j.exit.id)
		}
		if r := results[i]; r.Status != 0 && !r.Deadline && !slices.Contains(c.Healthy, j.exit.id) {
			c.Healthy = append(c.Healthy, j.exit.id)
		}
		c.OK = len(c.Healthy) > 0
	}
	return out
}

type wireCoverage struct {
	Rule     string   `json:"rule"`
	Host     string   `json:"host"`
	Eligible []string `json:"eligible"`
	Healthy  []string `json:"healthy"`
	OK       bool     `json:"ok"`
}

func wireRules(cs []RuleCoverage) []wireCoverage {
	if cs == nil {
		return nil
	}
	out := make([]wireCoverage, len(cs))
	for i, c := range cs {
		out[i] = wireCoverage{Rule: c.Rule, Host: c.Host, Eligible: nonNil(c.Eligible), Healthy: nonNil(c.Healthy), OK: c.OK}
	}
	return out
}
