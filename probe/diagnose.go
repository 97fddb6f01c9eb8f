package probe

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/configerr"
)

// Verdict is the verdict of a diagnosis: HEALTHY, DEGRADED or CRITICAL.
type Verdict uint8

// The statuses, from best to worst.
const (
	// Healthy: dispatch the fleet at full concurrency.
	Healthy Verdict = iota
	// Degraded: dispatch with reduced concurrency and the recommended
	// backoff.
	Degraded
	// Critical: do not dispatch at all. A diagnosis is CRITICAL exactly
	// when its Recommendation.Halt() is true.
	Critical
)

var statusNames = [...]string{"HEALTHY", "DEGRADED", "CRITICAL"}

// String returns "HEALTHY", "DEGRADED" or "CRITICAL".
func (s Verdict) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "UNKNOWN"
}

// Thresholds decide the status. The zero value holds the defaults: CRITICAL
// (halt) on a success rate below 0.5; DEGRADED on any rate-limited response,
// a success rate below 0.9 or a mean latency above 2 s. Rate limiting alone
// slows the fleet down and paces the hosts that asked; it halts the run
// only when CriticalRateLimited says so, or when it drives the success rate
// below CriticalSuccessRate. Comparisons are strict, so a value exactly at a
// threshold passes.
type Thresholds struct {
	// CriticalRateLimited: this many rate-limited results or more make the
	// status CRITICAL. Zero or negative disables the rule (the default).
	CriticalRateLimited int
	// DegradedRateLimited: this many rate-limited results or more make the
	// status DEGRADED. Zero means 1; negative disables the rule.
	DegradedRateLimited int
	// CriticalSuccessRate: a success rate below it is CRITICAL. Zero means
	// 0.5; negative disables the rule.
	CriticalSuccessRate float64
	// DegradedSuccessRate: a success rate below it is DEGRADED. Zero means
	// 0.9; negative disables the rule.
	DegradedSuccessRate float64
	// DegradedLatency: a mean latency above it is DEGRADED. Zero means 2 s;
	// negative disables the rule.
	DegradedLatency time.Duration
}

func (t Thresholds) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"CriticalSuccessRate", t.CriticalSuccessRate}, {"DegradedSuccessRate", t.DegradedSuccessRate}} {
		if math.IsNaN(r.v) || r.v > 1 {
			return configerr.Field("Thresholds."+r.name, "is %v, above 1", r.v)
		}
	}
	return nil
}

// withDefaults replaces zeros by the defaults.
func (t Thresholds) withDefaults() Thresholds {
	if t.DegradedRateLimited == 0 {
		t.DegradedRateLimited = 1
	}
	if t.CriticalSuccessRate == 0 {
		t.CriticalSuccessRate = 0.5
	}
	if t.DegradedSuccessRate == 0 {
		t.DegradedSuccessRate = 0.9
	}
	if t.DegradedLatency == 0 {
		t.DegradedLatency = 2 * time.Second
	}
	return t
}

// Outcomes are numbers of results per outcome (as ratelimit.Outcomes, with
// Deadline). Every result is counted once:
// a result cut short by the deadline under Deadline, not Canceled.
type Outcomes struct {
	OK, Transient, Throttled, Refused, Permanent, Canceled, Deadline int
}

func (c *Outcomes) add(r TargetResult) {
	switch {
	case r.Deadline:
		c.Deadline++
	case r.Outcome == classify.OK:
		c.OK++
	case r.Outcome == classify.Transient:
		c.Transient++
	case r.Outcome == classify.Throttled:
		c.Throttled++
	case r.Outcome == classify.Refused:
		c.Refused++
	case r.Outcome == classify.Permanent:
		c.Permanent++
	default:
		c.Canceled++
	}
}

// Latency summarises the latencies of the probes that received a response
// (Status != 0); failures without a response carry no latency sample.
// Percentiles use the nearest-rank definition: the p-th percentile of n
// sorted samples is the sample of rank ceil(p/100 * n), so it is always an
// observed value. With no samples every field is zero.
type Latency struct {
	Samples            int
	Mean               time.Duration
	P50, P95, P99, Max time.Duration
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, or zero when sorted is empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	if n == 0 || p <= 0 {
		return 0
	}
	if p > 100 {
		p = 100
	}
	rank := (p*n + 99) / 100 // ceil(p*n/100) in integers
	return sorted[max(rank, 1)-1]
}

// Breakdown is the tally for one egress or one host, for an operator
// looking for the proxy or the site at fault.
type Breakdown struct {
	// Name is the egress ID or the host.
	Name string
	// Total is the number of results; Succeeded of them succeeded.
	Total, Succeeded int
	// Outcomes counts the results per outcome.
	Outcomes Outcomes
	// RateLimited and Blocked are as in Diagnosis.
	RateLimited, Blocked int
	// MaxRetryAfter is the longest Retry-After seen.
	MaxRetryAfter time.Duration
}

// Diagnosis is the verdict drawn from a set of results, which the
// orchestrator that dispatches the crawl acts on. It is a pure function of
// the results and the thresholds.
type Diagnosis struct {
	// Status is the verdict.
	Status Verdict
	// Reasons explain it, one sentence per rule that fired, in rule order.
	Reasons []string

	// Total is the number of results; Measured excludes those the caller
	// cancelled and those robots.txt disallowed (they say nothing about
	// the targets' health).
	Total, Measured int
	// Succeeded counts the results for which TargetResult.Success holds.
	Succeeded int
	// SuccessRate is Succeeded / Measured, or 0 when Measured is 0.
	SuccessRate float64
	// Latency summarises the response latencies.
	Latency Latency
	// Outcomes counts results per outcome.
	Outcomes Outcomes

	// RateLimited counts results with status 429 or outcome Throttled
	// (a 503 with Retry-After is Throttled); rate_limited_count in JSON.
	RateLimited int
	// Blocked counts results that are not rate-limited and were refused
	// (outcome Refused: a challenge page or a refusal naming the agent),
	// or had status 403 or 503, or got no response because the connection
	// failed (ConnectionFailures); blocked_count in JSON. A hang is not a
	// block (see Timeouts), and neither are failures without a response
	// that are the URL's own (Permanent: a redirect loop, a certificate
	// error) nor the caller's cancellation.
	Blocked int
	// ConnectionFailures counts Transient results without a response that
	// were not timeouts: refused or reset connections, failed TLS
	// handshakes, proxy failures.
	ConnectionFailures int
	// Timeouts counts the hangs: probes sent that got no answer in time,
	// ended by PerRequestTimeout or by the Run's deadline;
	// timeout_count in JSON.
	Timeouts int
	// NotStarted counts results the deadline came before (Stage "queued").
	NotStarted int
	// Disallowed counts the probes robots.txt disallowed; they were not
	// sent and are not measured.
	Disallowed int
	// MaxRetryAfter is the longest Retry-After seen.
	MaxRetryAfter time.Duration

	// Egresses and Hosts break the results down, sorted by name. Hosts
	// leave out the results that failed on their egress route
	// (TargetResult.EgressFailure): a proxy refusing our credentials or down
	// says nothing about the host.
	Egresses, Hosts []Breakdown
	// FailingEgresses are egresses through which no probe succeeded while
	// some other egress did succeed: blacklisted or dead proxies.
	FailingEgresses []string
	// BlockingHosts are hosts no probe succeeded with, of which at least
	// one probe was blocked (counted in Blocked) through an egress that did
	// succeed with another host: the host blocks us, whatever the egress.
	// A host that only rate-limited or only answered with errors of its
	// own (404) is not blocking, so BlockingHosts is empty whenever Blocked
	// is 0; a blocked probe with no success anywhere names no host.
	BlockingHosts []string

	// Backoff is the recommended retry backoff.
	Backoff Backoff
	// Recommendation is the recommended concurrency and pacing.
	Recommendation Recommendation
}

func isRateLimited(r TargetResult) bool {
	return !r.Deadline && (r.Status == 429 || r.Outcome == classify.Throttled)
}

// isBlocked: a refusal, or no response because the connection failed. A
// hang (the probe's timeout, or the Run's deadline) is not a block: it is
// counted in Timeouts.
func isBlocked(r TargetResult) bool {
	if isRateLimited(r) || isHang(r) {
		return false
	}
	return r.Outcome == classify.Refused || r.Status == 403 || r.Status == 503 ||
		(r.Status == 0 && r.Outcome == classify.Transient)
}

// isHang: the probe was sent and got no answer in time, ended by its own
// timeout or by the Run's deadline.
func isHang(r TargetResult) bool {
	return r.TimedOut || (r.Deadline && !r.notStarted() && r.Status == 0 && !r.Disallowed)
}

func isCallerCanceled(r TargetResult) bool { return r.Outcome == classify.Canceled && !r.Deadline }

// diagnose draws the diagnosis from results under th (zero fields mean the
// defaults). It is deterministic: the same results in any order give the
// same diagnosis.
//
// The status rules, in order (the worst status that fires wins, and each
// rule that fires adds a reason): no measured result is CRITICAL; at least
// CriticalRateLimited rate-limited results is CRITICAL (off by default); at
// least DegradedRateLimited is DEGRADED; a success rate below
// CriticalSuccessRate is CRITICAL; below DegradedSuccessRate is DEGRADED; a
// mean latency above DegradedLatency is DEGRADED. The status is CRITICAL
// exactly when Recommendation.Halt() is true.
func diagnose(results []TargetResult, th Thresholds) Diagnosis {
	th = th.withDefaults()
	d := Diagnosis{Total: len(results)}
	var lat []time.Duration
	var sum time.Duration
	egresses := map[string]*Breakdown{}
	hosts := map[string]*Breakdown{}
	tally := func(m map[string]*Breakdown, name string, r TargetResult) {
		b := m[name]
		if b == nil {
			b = &Breakdown{Name: name}
			m[name] = b
		}
		b.Total++
		if r.success() {
			b.Succeeded++
		}
		b.Outcomes.add(r)
		if isRateLimited(r) {
			b.RateLimited++
		}
		if isBlocked(r) {
			b.Blocked++
		}
		b.MaxRetryAfter = max(b.MaxRetryAfter, r.RetryAfter)
	}
	for _, r := range results {
		d.Outcomes.add(r)
		tally(egresses, r.Egress, r)
		if r.EgressFailure == "" {
			// A failure of the egress route says nothing about the host.
			tally(hosts, r.Host, r)
		}
		if !isCallerCanceled(r) && !r.Disallowed {
			d.Measured++
		}
		if r.Disallowed {
			d.Disallowed++
		}
		if r.success() {
			d.Succeeded++
		}
		if isRateLimited(r) {
			d.RateLimited++
		}
		if isBlocked(r) {
			d.Blocked++
		}
		if r.Status == 0 && r.Outcome == classify.Transient && !r.TimedOut {
			d.ConnectionFailures++
		}
		if isHang(r) {
			d.Timeouts++
		}
		if r.Deadline && r.notStarted() && !r.Disallowed {
			d.NotStarted++
		}
		d.MaxRetryAfter = max(d.MaxRetryAfter, r.RetryAfter)
		if r.Status != 0 {
			lat = append(lat, r.Latency)
			sum += r.Latency
		}
	}
	if d.Measured > 0 {
		d.SuccessRate = float64(d.Succeeded) / float64(d.Measured)
	}
	if n := len(lat); n > 0 {
		slices.Sort(lat)
		d.Latency = Latency{
			Samples: n,
			Mean:    sum / time.Duration(n),
			P50:     percentile(lat, 50),
			P95:     percentile(lat, 95),
			P99:     percentile(lat, 99),
			Max:     lat[n-1],
		}
	}
	d.Egresses = sortedBreakdowns(egresses)
	d.Hosts = sortedBreakdowns(hosts)
	d.FailingEgresses, d.BlockingHosts = attribute(results, d.Egresses, d.Hosts)

	d.Status, d.Reasons = judge(d, th)
	d.Backoff = recommendBackoff(d)
	d.Recommendation = recommend(d, th)
	return d
}

func sortedBreakdowns(m map[string]*Breakdown) []Breakdown {
	out := make([]Breakdown, 0, len(m))
	for _, b := range m {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b Breakdown) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// attribute singles out the egresses that failed every target while
// another egress worked, and the hosts that failed through every egress
// while some egress worked for another host.
func attribute(results []TargetResult, egresses, hosts []Breakdown) (failing, blocking []string) {
	working := map[string]bool{}   // egresses with a success
	reachable := map[string]bool{} // hosts with a success
	unsent := map[string]int{}     // robots.txt-disallowed probes per egress
	for _, r := range results {
		if r.success() {
			working[r.Egress] = true
			reachable[r.Host] = true
		}
		if r.Disallowed {
			unsent[r.Egress]++
		}
	}
	for _, e := range egresses {
		if e.Succeeded == 0 && e.Total > e.Outcomes.Canceled+unsent[e.Name] && len(working) > 0 {
			failing = append(failing, e.Name)
		}
	}
	// A host blocks when it was blocked through egresses that worked
	// elsewhere and never succeeded.
	for _, h := range hosts {
		if h.Succeeded > 0 || h.Blocked == 0 {
			continue
		}
		for _, r := range results {
			if r.Host == h.Name && working[r.Egress] && isBlocked(r) && r.EgressFailure == "" {
				blocking = append(blocking, h.Name)
				break
			}
		}
	}
	return failing, blocking
}

// judge applies the status rules.
func judge(d Diagnosis, th Thresholds) (Verdict, []string) {
	status := Healthy
	var reasons []string
	fire := func(s Verdict, format string, args ...any) {
		status = max(status, s)
		reasons = append(reasons, fmt.Sprintf(format, args...))
	}
	if d.Measured == 0 {
		if d.Disallowed > 0 {
			fire(Critical, "no probe was measured: %d of %d disallowed by robots.txt", d.Disallowed, d.Total)
			return status, reasons
		}
		fire(Critical, "no probe was measured")
		return status, reasons
	}
	switch {
	case th.CriticalRateLimited > 0 && d.RateLimited >= th.CriticalRateLimited:
		fire(Critical, "%d of %d probes were rate-limited (critical at %d)", d.RateLimited, d.Measured, th.CriticalRateLimited)
	case th.DegradedRateLimited > 0 && d.RateLimited >= th.DegradedRateLimited:
		fire(Degraded, "%d of %d probes were rate-limited (degraded at %d)", d.RateLimited, d.Measured, th.DegradedRateLimited)
	}
	if th.CriticalSuccessRate > 0 && d.SuccessRate < th.CriticalSuccessRate {
		fire(Critical, "success rate %.4g is below %.4g", d.SuccessRate, th.CriticalSuccessRate)
	} else if th.DegradedSuccessRate > 0 && d.SuccessRate < th.DegradedSuccessRate {
		fire(Degraded, "success rate %.4g is below %.4g", d.SuccessRate, th.DegradedSuccessRate)
	}
	if th.DegradedLatency > 0 && d.Latency.Mean > th.DegradedLatency {
		fire(Degraded, "mean latency %v is above %v", d.Latency.Mean.Round(time.Millisecond), th.DegradedLatency)
	}
	if status == Healthy {
		return status, reasons
	}
	// Name every class of failure behind the verdict, in one reason each.
	rateNamed := len(reasons) > 0 && strings.Contains(reasons[0], "rate-limited")
	for _, c := range []struct {
		n    int
		what string
	}{
		{d.Outcomes.Refused, "refused (a challenge page or a refusal naming the agent)"},
		{d.Blocked - d.Outcomes.Refused - d.ConnectionFailures, "answered 403 or 503"},
		{d.Timeouts, "hung: no answer in time"},
		{d.ConnectionFailures, "could not connect"},
	} {
		if c.n > 0 {
			reasons = append(reasons, fmt.Sprintf("%d of %d probes %s", c.n, d.Measured, c.what))
		}
	}
	if d.RateLimited > 0 && !rateNamed {
		reasons = append(reasons, fmt.Sprintf("%d of %d probes were rate-limited (throttling)", d.RateLimited, d.Measured))
	}
	return status, reasons
}
