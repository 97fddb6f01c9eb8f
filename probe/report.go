package probe

import (
	"encoding/json"
	"math"
	"time"
)

// SchemaVersion is the version of the JSON document a Report marshals to.
// It grows when fields are added; existing fields never change.
const SchemaVersion = 1

// Report is the outcome of a Run: every probe's result and the diagnosis
// drawn from them. The embedded Diagnosis makes rep.Status, rep.Backoff and
// rep.Recommendation read directly.
//
// Report marshals to JSON with these fields, never renamed: timestamp
// (Unix seconds, float), total_probed, results[] with url, proxy,
// status_code (null when none), latency_ms, success, error_message (null
// when none), and diagnosis with status, success_rate, average_latency_ms,
// rate_limited_count, blocked_count and recommended_backoff
// {initial_delay_sec, max_delay_sec, max_retries}; plus schema_version and
// the fields documented on the wire types below.
type Report struct {
	// Started and Finished bound the Run, by Options.Now.
	Started, Finished time.Time
	// Results holds one entry per probe, in input order (in matrix mode:
	// target by target, each through every egress in turn). Probes cut
	// short or never started by the deadline are included.
	Results []TargetResult
	// Rules says, in matrix mode with Options.Rules, per rule and host,
	// whether an eligible egress got through; nil otherwise.
	Rules []RuleCoverage
	// Diagnosis is drawn from Results.
	Diagnosis
}

// Units in the document: milliseconds and seconds as floats, rounded to
// the microsecond; rates rounded to four decimals.
func ms(d time.Duration) float64   { return round(float64(d)/float64(time.Millisecond), 3) }
func secs(d time.Duration) float64 { return round(d.Seconds(), 6) }
func round(x float64, places int) float64 {
	p := math.Pow10(places)
	return math.Round(x*p) / p
}

type wireReport struct {
	SchemaVersion int            `json:"schema_version"`
	Timestamp     float64        `json:"timestamp"`
	StartedAt     float64        `json:"started_at"`
	DurationMS    float64        `json:"duration_ms"`
	TotalProbed   int            `json:"total_probed"`
	Results       []wireResult   `json:"results"`
	Rules         []wireCoverage `json:"rules,omitempty"`
	Diagnosis     wireDiag       `json:"diagnosis"`
}

type wireResult struct {
	URL          string     `json:"url"`
	Proxy        *string    `json:"proxy"`
	StatusCode   *int       `json:"status_code"`
	LatencyMS    float64    `json:"latency_ms"`
	Success      bool       `json:"success"`
	ErrorMessage *string    `json:"error_message"`
	Egress       string     `json:"egress"`
	Host         string     `json:"host"`
	Outcome      string     `json:"outcome"`
	Stage        string     `json:"stage"`
	EgressFail   string     `json:"egress_failure,omitempty"`
	Markers      []string   `json:"markers"`
	RetryAfter   float64    `json:"retry_after_sec"`
	Reason       string     `json:"reason,omitempty"`
	Rule         string     `json:"rule,omitempty"`
	Disallowed   bool       `json:"disallowed_by_robots,omitempty"`
	Phases       wirePhases `json:"phases"`
}

type wirePhases struct {
	DNS     float64 `json:"dns_ms"`
	Connect float64 `json:"connect_ms"`
	TLS     float64 `json:"tls_ms"`
	TTFB    float64 `json:"ttfb_ms"`
}

type wireBackoff struct {
	Initial        float64 `json:"initial_delay_sec"`
	Max            float64 `json:"max_delay_sec"`
	MaxRetries     int     `json:"max_retries"`
	AttemptTimeout float64 `json:"attempt_timeout_sec"`
}

type wireLatency struct {
	Samples int     `json:"samples"`
	Mean    float64 `json:"mean_ms"`
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
}

type wireCounts struct {
	OK        int `json:"ok"`
	Transient int `json:"transient"`
	Throttled int `json:"throttled"`
	Refused   int `json:"refused"`
	Permanent int `json:"permanent"`
	Canceled  int `json:"canceled"`
	Deadline  int `json:"deadline"`
}

type wireBreakdown struct {
	Name          string     `json:"name"`
	Total         int        `json:"total"`
	Succeeded     int        `json:"succeeded"`
	SuccessRate   float64    `json:"success_rate"`
	RateLimited   int        `json:"rate_limited_count"`
	Blocked       int        `json:"blocked_count"`
	MaxRetryAfter float64    `json:"max_retry_after_sec"`
	Outcomes      wireCounts `json:"outcomes"`
}

type wireRecommendation struct {
	Concurrency   float64            `json:"concurrency_factor"`
	MaxConc       int                `json:"max_concurrency"`
	Halt          bool               `json:"halt"`
	HostPerMinute map[string]float64 `json:"host_per_minute"`
	HaltHosts     []string           `json:"halt_hosts"`
	AvoidEgresses []string           `json:"avoid_egresses"`
}

type wireDiag struct {
	Status             string             `json:"status"`
	SuccessRate        float64            `json:"success_rate"`
	AverageLatencyMS   float64            `json:"average_latency_ms"`
	RateLimitedCount   int                `json:"rate_limited_count"`
	BlockedCount       int                `json:"blocked_count"`
	RecommendedBackoff wireBackoff        `json:"recommended_backoff"`
	Reasons            []string           `json:"reasons"`
	Total              int                `json:"total"`
	Measured           int                `json:"measured"`
	Succeeded          int                `json:"succeeded"`
	Latency            wireLatency        `json:"latency"`
	Outcomes           wireCounts         `json:"outcomes"`
	ConnectionFailures int                `json:"connection_failure_count"`
	Timeouts           int                `json:"timeout_count"`
	NotStarted         int                `json:"not_started_count"`
	Disallowed         int                `json:"disallowed_count"`
	MaxRetryAfter      float64            `json:"max_retry_after_sec"`
	Egresses           []wireBreakdown    `json:"egresses"`
	Hosts              []wireBreakdown    `json:"hosts"`
	FailingEgresses    []string           `json:"failing_egresses"`
	BlockingHosts      []string           `json:"blocking_hosts"`
	Recommendation     wireRecommendation `json:"recommendation"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]float64) map[string]float64 {
	if m == nil {
		return map[string]float64{}
	}
	return m
}

func (c Outcomes) wire() wireCounts {
	return wireCounts(c)
}

func (r TargetResult) wire() wireResult {
	w := wireResult{
		URL:        r.URL,
		LatencyMS:  ms(r.Latency),
		Success:    r.success(),
		Egress:     r.Egress,
		Host:       r.Host,
		Outcome:    r.OutcomeName(),
		Stage:      r.Stage,
		EgressFail: r.EgressFailure,
		Markers:    nonNil(r.Markers),
		RetryAfter: secs(r.RetryAfter),
		Reason:     r.Reason,
		Rule:       r.Rule,
		Disallowed: r.Disallowed,
		Phases:     wirePhases{ms(r.Phases.DNS), ms(r.Phases.Connect), ms(r.Phases.TLS), ms(r.Phases.TTFB)},
	}
	if r.Proxy != "" {
		p := r.Proxy
		w.Proxy = &p
	}
	if r.Status != 0 {
		s := r.Status
		w.StatusCode = &s
	}
	if r.Err != "" {
		e := r.Err
		w.ErrorMessage = &e
	}
	return w
}

func (d Diagnosis) wire() wireDiag {
	w := wireDiag{
		Status:           d.Status.String(),
		SuccessRate:      round(d.SuccessRate, 4),
		AverageLatencyMS: ms(d.Latency.Mean),
		RateLimitedCount: d.RateLimited,
		BlockedCount:     d.Blocked,
		RecommendedBackoff: wireBackoff{
			Initial:        secs(d.Backoff.BaseDelay),
			Max:            secs(d.Backoff.MaxDelay),
			MaxRetries:     d.Backoff.MaxRetries,
			AttemptTimeout: secs(d.Backoff.AttemptTimeout),
		},
		Reasons:   nonNil(d.Reasons),
		Total:     d.Total,
		Measured:  d.Measured,
		Succeeded: d.Succeeded,
		Latency: wireLatency{
			Samples: d.Latency.Samples,
			Mean:    ms(d.Latency.Mean),
			P50:     ms(d.Latency.P50),
			P95:     ms(d.Latency.P95),
			P99:     ms(d.Latency.P99),
			Max:     ms(d.Latency.Max),
		},
		Outcomes:           d.Outcomes.wire(),
		ConnectionFailures: d.ConnectionFailures,
		Timeouts:           d.Timeouts,
		NotStarted:         d.NotStarted,
		Disallowed:         d.Disallowed,
		MaxRetryAfter:      secs(d.MaxRetryAfter),
		Egresses:           wireBreakdowns(d.Egresses),
		Hosts:              wireBreakdowns(d.Hosts),
		FailingEgresses:    nonNil(d.FailingEgresses),
		BlockingHosts:      nonNil(d.BlockingHosts),
		Recommendation: wireRecommendation{
			Concurrency:   d.Recommendation.Concurrency,
			MaxConc:       d.Recommendation.MaxConcurrency,
			Halt:          d.Recommendation.Halt(),
			HostPerMinute: nonNilMap(d.Recommendation.HostPerMinute),
			HaltHosts:     nonNil(d.Recommendation.HaltHosts),
			AvoidEgresses: nonNil(d.Recommendation.AvoidEgresses),
		},
	}
	return w
}

func wireBreakdowns(bs []Breakdown) []wireBreakdown {
	out := make([]wireBreakdown, len(bs))
	for i, b := range bs {
		rate := 0.0
		if b.Total > 0 {
			rate = round(float64(b.Succeeded)/float64(b.Total), 4)
		}
		out[i] = wireBreakdown{b.Name, b.Total, b.Succeeded, rate, b.RateLimited, b.Blocked, secs(b.MaxRetryAfter), b.Outcomes.wire()}
	}
	return out
}

// MarshalJSON encodes the diagnosis as the "diagnosis" object of the
// report document.
func (d Diagnosis) MarshalJSON() ([]byte, error) { return json.Marshal(d.wire()) }

// MarshalJSON encodes the report document (see Report).
func (r Report) MarshalJSON() ([]byte, error) {
	w := wireReport{
		SchemaVersion: SchemaVersion,
		Timestamp:     unixSeconds(r.Finished),
		StartedAt:     unixSeconds(r.Started),
		DurationMS:    ms(r.Finished.Sub(r.Started)),
		TotalProbed:   len(r.Results),
		Results:       make([]wireResult, len(r.Results)),
		Rules:         wireRules(r.Rules),
		Diagnosis:     r.Diagnosis.wire(),
	}
	for i, res := range r.Results {
		w.Results[i] = res.wire()
	}
	return json.Marshal(w)
}

// unixSeconds is t as float Unix seconds (microsecond precision), 0 for the
// zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMicro()) / 1e6
}
