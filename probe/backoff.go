package probe

import (
	"math"
	"time"
)

// Backoff is the recommended retry backoff, derived from the diagnosis.
type Backoff struct {
	// BaseDelay is the first retry delay: the status tier's delay (1 s
	// HEALTHY, 2 s DEGRADED, 5 s CRITICAL), raised to the largest
	// Retry-After observed.
	BaseDelay time.Duration
	// MaxDelay caps the delay: the tier's cap (10 s, 30 s, 60 s), raised to
	// twice BaseDelay.
	MaxDelay time.Duration
	// MaxRetries is the retry budget: 2, 3 or 5 by tier.
	MaxRetries int
	// AttemptTimeout bounds one attempt: four times the p99 response
	// latency, rounded up to 100 ms and kept within [1 s, 30 s]; zero when
	// no response was measured.
	AttemptTimeout time.Duration
}

// tiers are the fixed backoffs per status, the floor of the
// recommendation.
var tiers = [...]Backoff{
	Healthy:  {BaseDelay: 1 * time.Second, MaxDelay: 10 * time.Second, MaxRetries: 2},
	Degraded: {BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second, MaxRetries: 3},
	Critical: {BaseDelay: 5 * time.Second, MaxDelay: 60 * time.Second, MaxRetries: 5},
}

func recommendBackoff(d Diagnosis) Backoff {
	b := tiers[d.Status]
	b.BaseDelay = max(b.BaseDelay, d.MaxRetryAfter)
	b.MaxDelay = max(b.MaxDelay, 2*b.BaseDelay)
	if d.Latency.Samples > 0 {
		t := 4 * d.Latency.P99
		t = (t + 100*time.Millisecond - 1).Truncate(100 * time.Millisecond)
		b.AttemptTimeout = min(max(t, time.Second), 30*time.Second)
	}
	return b
}

// Recommendation is how to dispatch the fleet.
type Recommendation struct {
	// Concurrency is the fraction of the planned concurrency to use: 1.0
	// when HEALTHY; when DEGRADED, the success rate (when below
	// DegradedSuccessRate), scaled down by DegradedLatency / mean latency
	// when the mean is too high, and capped at half of the share of probes
	// that were not rate-limited when any was; never below 0.01. It is 0
	// (halt) exactly when the status is CRITICAL. Rounded down to two
	// decimals.
	Concurrency float64
	// MaxConcurrency is Workers(Options.Workers), the recommended number
	// of requests in flight for the crawl. Zero when the recommendation
	// is to halt.
	MaxConcurrency int
	// HostPerMinute is the recommended pacing, in requests per minute, of
	// every host that rate-limited a probe, by host key: one request per
	// the longest Retry-After the host asked for, or half of package
	// ratelimit's default rate when it gave none; never above that default.
	// Hosts not listed keep the default. Nil when no host rate-limited.
	HostPerMinute map[string]float64
	// HaltHosts are the hosts that refused a probe (challenge page or a
	// refusal naming the agent): do not crawl them until a human has
	// looked. Sorted.
	HaltHosts []string
	// AvoidEgresses are Diagnosis.FailingEgresses: egresses to take out of
	// the pool.
	AvoidEgresses []string
}

// Halt reports whether the recommendation is not to dispatch at all. It is
// true exactly when the diagnosis is CRITICAL.
func (r Recommendation) Halt() bool { return r.Concurrency == 0 }

// Workers scales a planned worker count by Concurrency: at least 1 unless
// the recommendation is to halt.
func (r Recommendation) Workers(planned int) int {
	if r.Halt() || planned <= 0 {
		return 0
	}
	return max(1, int(float64(planned)*r.Concurrency))
}

func floor2(x float64) float64 { return math.Floor(x*100+1e-9) / 100 }

func recommend(d Diagnosis, th Thresholds) Recommendation {
	var r Recommendation
	switch d.Status {
	case Healthy:
		r.Concurrency = 1
	case Degraded:
		f := 1.0
		if th.DegradedSuccessRate > 0 && d.SuccessRate < th.DegradedSuccessRate {
			f = d.SuccessRate
		}
		if th.DegradedLatency > 0 && d.Latency.Mean > th.DegradedLatency {
			f *= float64(th.DegradedLatency) / float64(d.Latency.Mean)
		}
		if d.RateLimited > 0 && d.Measured > 0 {
			f = min(f, 0.5*(1-float64(d.RateLimited)/float64(d.Measured)))
		}
		r.Concurrency = max(floor2(f), 0.01)
	case Critical:
		r.Concurrency = 0
	}
	base := defaultPerMinute()
	for _, h := range d.Hosts {
		if h.RateLimited == 0 {
			continue
		}
		rate := base / 2
		if h.MaxRetryAfter > 0 {
			rate = min(base, math.Round(60/h.MaxRetryAfter.Seconds()*1000)/1000)
		}
		if r.HostPerMinute == nil {
			r.HostPerMinute = map[string]float64{}
		}
		r.HostPerMinute[h.Name] = rate
	}
	for _, h := range d.Hosts {
		if h.Outcomes.Refused > 0 {
			r.HaltHosts = append(r.HaltHosts, h.Name)
		}
	}
	r.AvoidEgresses = d.FailingEgresses
	return r
}
