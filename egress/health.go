package egress

import (
	"fmt"
	"math"
	"time"
)

// HealthConfig tunes how endpoint health is scored. The zero value uses
// the documented defaults.
type HealthConfig struct {
	// Smoothing is the weight of the newest attempt in the score, in
	// (0, 1]. Default 0.3: from a perfect score, three failures in a row
	// quarantine an endpoint.
	Smoothing float64
	// DegradedBelow is the score under which an endpoint is degraded:
	// still used, but only when no healthy one is available. In
	// [QuarantineBelow, 1]; default 0.8.
	DegradedBelow float64
	// QuarantineBelow is the score under which an endpoint is
	// quarantined. In (0, 1); default 0.4.
	QuarantineBelow float64
	// QuarantineAfter is the number of egress failures in a row, with no
	// success between them, that quarantines an endpoint whatever its
	// score. A failing endpoint is degraded at once and so receives little
	// traffic; this makes sure a dead one still reaches quarantine, and
	// its growing schedule, when traffic is sparse. Default 3.
	QuarantineAfter int
	// HalfLife is how fast past penalties fade: the distance of the score
	// from 1 halves every HalfLife. Default 1 minute.
	HalfLife time.Duration
	// SlowSetup is the connection setup time through the proxy (dial,
	// TLS to the proxy, SOCKS handshake) above which successes count
	// less: at twice SlowSetup a success is worth half. Default 2s.
	SlowSetup time.Duration
	// ProbeAfter is how long after its last failure an endpoint that
	// failed but is not quarantined gets a trial request, whatever its
	// score: the next request of a host whose subset holds it goes to it,
	// and success readmits it to the healthy tier. Default 2s.
	ProbeAfter time.Duration
	// QuarantineBaseDelay is the first quarantine's length. Default 5s.
	QuarantineBaseDelay time.Duration
	// QuarantineMaxDelay caps the quarantine, which doubles with each
	// quarantine that follows without a full recovery. Default 10 minutes.
	QuarantineMaxDelay time.Duration
}

// withDefaults fills zero fields and checks ranges.
func (c HealthConfig) withDefaults() (HealthConfig, error) {
	bad := func(field string, v any) (HealthConfig, error) {
		return c, &configError{Field: "Health." + field, Value: fmt.Sprint(v), Err: errBadSetting}
	}
	if c.Smoothing == 0 {
		c.Smoothing = 0.3
	}
	if c.QuarantineBelow == 0 {
		c.QuarantineBelow = 0.4
	}
	if c.DegradedBelow == 0 {
		c.DegradedBelow = max(0.8, c.QuarantineBelow)
	}
	if c.QuarantineAfter == 0 {
		c.QuarantineAfter = 3
	}
	if c.HalfLife == 0 {
		c.HalfLife = time.Minute
	}
	if c.SlowSetup == 0 {
		c.SlowSetup = 2 * time.Second
	}
	if c.ProbeAfter == 0 {
		c.ProbeAfter = 2 * time.Second
	}
	if c.QuarantineBaseDelay == 0 {
		c.QuarantineBaseDelay = 5 * time.Second
	}
	if c.QuarantineMaxDelay == 0 {
		c.QuarantineMaxDelay = max(10*time.Minute, c.QuarantineBaseDelay)
	}
	switch {
	case !(c.Smoothing > 0 && c.Smoothing <= 1):
		return bad("Smoothing", c.Smoothing)
	case !(c.QuarantineBelow > 0 && c.QuarantineBelow < 1):
		return bad("QuarantineBelow", c.QuarantineBelow)
	case !(c.DegradedBelow >= c.QuarantineBelow && c.DegradedBelow <= 1):
		return bad("DegradedBelow", c.DegradedBelow)
	case c.QuarantineAfter < 0:
		return bad("QuarantineAfter", c.QuarantineAfter)
	case c.HalfLife < 0:
		return bad("HalfLife", c.HalfLife)
	case c.SlowSetup < 0:
		return bad("SlowSetup", c.SlowSetup)
	case c.ProbeAfter < 0:
		return bad("ProbeAfter", c.ProbeAfter)
	case c.QuarantineBaseDelay < 0:
		return bad("QuarantineBaseDelay", c.QuarantineBaseDelay)
	case c.QuarantineMaxDelay < c.QuarantineBaseDelay:
		return bad("QuarantineMaxDelay", c.QuarantineMaxDelay)
	}
	return c, nil
}

// forgiveAbove is the score from which a new run of failures starts the
// quarantine schedule afresh.
const forgiveAbove = 0.95

// maxStrikes bounds the doubling so that the shift cannot overflow.
const maxStrikes = 32

// attempt says what a request is to its endpoint's health.
type attempt uint8

const (
	plainAttempt attempt = iota
	probeAttempt         // the one request let through when a quarantine ends
	trialAttempt         // the one request sent ProbeAfter after a failure
)

// healthState is where an endpoint stands at a given time.
type healthState uint8

const (
	stateActive      healthState = iota // usable
	stateQuarantined                    // resting, not usable
	stateHalfOpen                       // quarantine over; the next request is the probe
	stateProbing                        // the probe is in flight; not usable
)

// health is the score of one endpoint. It is a plain value: the Pool
// guards it with its mutex, and the tests drive it with explicit times.
type health struct {
	score       float64       // at time at; 1 is perfect
	at          time.Time     // when score was last brought up to date
	setup       time.Duration // smoothed connection setup time; 0 = no sample
	fails       int           // egress failures since the last success
	strikes     int           // quarantines since the last full recovery
	quarantined bool          // quarantined or half-open or probing
	until       time.Time     // end of the quarantine
	probing     bool          // the half-open probe is in flight
	lastFail    time.Time     // the last egress failure outside a quarantine
	recovering  bool          // failed since the last readmission
	trial       bool          // the readmission trial is in flight
}

func newHealth() health { return health{score: 1} }

// effective is the score at now, with past penalties faded.
func (h *health) effective(now time.Time, c *HealthConfig) float64 {
	if h.score >= 1 || c.HalfLife <= 0 {
		return h.score
	}
	d := now.Sub(h.at)
	if d <= 0 {
		return h.score
	}
	return 1 - (1-h.score)*math.Exp2(-float64(d)/float64(c.HalfLife))
}

// catchUp applies the fading up to now.
func (h *health) catchUp(now time.Time, c *HealthConfig) {
	h.score = h.effective(now, c)
	if h.score > 1-1e-9 {
		h.score = 1
	}
	h.at = now
}

// state reports where the endpoint stands at now.
func (h *health) state(now time.Time) healthState {
	switch {
	case !h.quarantined:
		return stateActive
	case h.probing:
		return stateProbing
	case now.Before(h.until):
		return stateQuarantined
	default:
		return stateHalfOpen
	}
}

// degraded reports whether an active endpoint is below the healthy tier.
// An endpoint due for its readmission trial is not: selection then treats
// it as healthy, so that its hosts' next request tries it.
func (h *health) degraded(now time.Time, c *HealthConfig) bool {
	if h.trialDue(now, c) {
		return false
	}
	return h.effective(now, c) < c.DegradedBelow
}

// trialDue reports whether the endpoint failed, is not quarantined, has
// had ProbeAfter since its last failure and has no trial in flight.
func (h *health) trialDue(now time.Time, c *HealthConfig) bool {
	return h.recovering && !h.quarantined && !h.trial && !now.IsZero() && !now.Before(h.lastFail.Add(c.ProbeAfter))
}

// beginProbe marks the half-open probe as in flight.
func (h *health) beginProbe() { h.probing = true }

// beginTrial marks the readmission trial as in flight.
func (h *health) beginTrial() { h.trial = true }

// readmit puts the endpoint back in the healthy tier.
func (h *health) readmit(now time.Time, c *HealthConfig) {
	h.catchUp(now, c)
	h.score = max(h.score, c.DegradedBelow)
	h.fails, h.recovering = 0, false
}

// sampleSetup records how long a connection setup through the proxy took.
func (h *health) sampleSetup(d time.Duration, c *HealthConfig) {
	if d < 0 {
		d = 0
	}
	if h.setup == 0 {
		h.setup = d
		return
	}
	h.setup = time.Duration((1-c.Smoothing)*float64(h.setup) + c.Smoothing*float64(d))
}

// quality is what one success is worth: 1, less when setup is slow.
func (h *health) quality(c *HealthConfig) float64 {
	if c.SlowSetup <= 0 || h.setup <= c.SlowSetup {
		return 1
	}
	return float64(c.SlowSetup) / float64(h.setup)
}

// success records a request the endpoint carried. Outside a quarantine it
// raises the score, and the readmission trial's success puts the endpoint
// back in the healthy tier. While quarantined only the probe's success
// counts, and it readmits the endpoint likewise.
func (h *health) success(now time.Time, a attempt, c *HealthConfig) {
	if a == trialAttempt {
		h.trial = false
	}
	if h.quarantined {
		if a == probeAttempt {
			// On probation: at the healthy tier's lower edge, so that a
			// failure soon continues the quarantine schedule.
			h.quarantined, h.probing = false, false
			h.score, h.at = c.DegradedBelow, now
			h.fails, h.recovering = 0, false
		}
		return
	}
	h.catchUp(now, c)
	h.fails = 0
	h.score += c.Smoothing * (h.quality(c) - h.score)
	if a == trialAttempt && h.recovering {
		h.readmit(now, c)
	}
}

// steady reports whether a success of attempt a leaves the endpoint as it
// is, whatever the time: a plain attempt of an endpoint outside quarantine,
// at full score, whose successes are worth a full point (connection setup
// not slow). success then only clears the run of failures, and the time of
// the score does not matter, since a full score does not fade.
func (h *health) steady(a attempt, c *HealthConfig) bool {
	return a == plainAttempt && !h.quarantined && h.score >= 1 && h.quality(c) >= 1
}

// steadySuccess is success for an attempt that steady allows: it needs no
// clock.
func (h *health) steadySuccess() { h.fails = 0 }

// failure records an egress failure. Outside a quarantine it lowers the
// score and quarantines the endpoint when the failure is hard (refused
// credentials, an untrusted certificate), below QuarantineBelow, or after
// QuarantineAfter failures in a row; a failed probe quarantines it again,
// for longer. Results of requests sent before the quarantine began are
// ignored.
func (h *health) failure(now time.Time, a attempt, hard bool, c *HealthConfig) {
	if a == trialAttempt {
		h.trial = false
	}
	if h.quarantined {
		if a == probeAttempt {
			h.probing = false
			h.quarantine(now, c)
		}
		return
	}
	h.catchUp(now, c)
	if h.score >= forgiveAbove {
		h.strikes = 0 // a fresh run of failures from full health
	}
	h.fails++
	h.lastFail, h.recovering = now, true
	h.score -= c.Smoothing * h.score
	if hard || h.score < c.QuarantineBelow || (c.QuarantineAfter > 0 && h.fails >= c.QuarantineAfter) {
		h.quarantine(now, c)
	}
}

// neutral records a result that says nothing about the endpoint
// (cancelled, or a target-level error); a probe or trial ending so leaves
// the next request to probe or try the endpoint.
func (h *health) neutral(a attempt) {
	switch a {
	case probeAttempt:
		h.probing = false
	case trialAttempt:
		h.trial = false
	}
}

// quarantine starts a quarantine of QuarantineBaseDelay·2^strikes, capped at
// QuarantineMaxDelay.
func (h *health) quarantine(now time.Time, c *HealthConfig) {
	d := c.QuarantineBaseDelay
	for i := 0; i < h.strikes && d < c.QuarantineMaxDelay; i++ {
		d *= 2
	}
	d = min(d, c.QuarantineMaxDelay)
	h.strikes = min(h.strikes+1, maxStrikes)
	h.quarantined = true
	h.until = now.Add(d)
}
