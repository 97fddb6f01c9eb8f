package pacing

import (
	"time"

	"github.com/egresskit/egresskit/classify"
)

// entry is one host's pacing; its fields are guarded by its shard's lock.
type entry struct {
	lim         bucket
	perMinute   float64 // current rate
	configured  float64
	ceiling     float64   // 0: none
	pausedUntil time.Time // zero: never paused
	epoch       uint64    // pauses started or grown
	// The recovery: from base toward target (0: none), oks OKs in (since
	// the latest throttle or quota); the probe above target began probeN
	// OKs in (0: not probing), and may begin at probeAt.
	target, base float64
	oks, probeN  int
	probeAt      time.Time
	// The learnt ceiling: the lowest rate refused lately (0: none), the
	// probe's backoff (doubling with every probe refused), the latest
	// pause (doubling while the host refuses every attempt after one).
	learnt    float64
	backoff   time.Duration
	lastPause time.Duration
	// The run of OKs answered since the latest pause ended: the first
	// one's time, and how many.
	runStart time.Time
	runOKs   int
	// The run a throttle's estimate counted (see cut and revise): the rate
	// refused (0: no estimate to revise), the run's first OK, the end of
	// its span (the throttle, then the latest OK counted late) and its OKs.
	cutRate          float64
	cutStart, cutEnd time.Time
	cutOKs           int
	// The spacing of OK answers: the last one's time, and an average of
	// the gaps (microseconds) over gaps samples, and a slow one (the
	// crawl's demand over a run of OKs, not one burst of them).
	lastOK  time.Time
	gap     float64
	slowGap float64
	gaps    int
	// The host's latency (time to headers, microseconds; 0: none seen):
	// a fast average and a base that follows the lowest latencies and
	// follows a higher latency up over minutes (latBaseTau: a far but
	// steady host's base is its latency; a queue of ours is not).
	latFast, latBase float64
	// share is an average of the refused share of answers (Throttled
	// among OK and Throttled); stray reports that the latest pause said
	// nothing of a limit: a stray refusal's (see isStray), or a slowing
	// host's while its queue drained (see slowing).
	share float64
	stray bool
	// bound is an average of whether admissions queued at the pace,
	// waiting half an interval or more for their token (1) or not (0),
	// outside pauses: whether the pace binds the crawl; waited is whether
	// the latest one did.
	bound  float64
	waited bool
	// refusedTop is the highest rate a refusal taken for a limit came at.
	refusedTop float64
	// risenAt is when the host's latency rose over latRise times its base
	// and straySlack (zero: it is not risen).
	risenAt time.Time
	counts  [classify.Canceled + 1]uint32
	since   time.Time // start of the counts' window
	used    time.Time
}

// minGaps is how many gaps between OK answers make an accepted rate.
const minGaps = 1

// maxOKs bounds the OK count of a recovery (far past its end).
const maxOKs = 1 << 30

func (s *Set) newEntry(host string, now time.Time) *entry {
	pm := s.configured(host)
	return &entry{
		lim:        newBucket(pm, s.cfg.Burst, now, 1),
		perMinute:  pm,
		configured: pm,
		since:      now,
		used:       now,
	}
}

func (s *Set) configured(host string) float64 {
	if pm, ok := s.cfg.Overrides[host]; ok {
		return pm
	}
	return s.cfg.PerMinute
}

// top is the rate the host may recover to.
func (e *entry) top() float64 {
	if e.ceiling > 0 {
		return min(e.configured, e.ceiling)
	}
	return e.configured
}

// settled is the highest rate short of a probe: top, and below the learnt
// ceiling by margin.
func (e *entry) settled() float64 {
	if e.learnt > 0 {
		return min(e.top(), e.learnt*(1-margin))
	}
	return e.top()
}

func (e *entry) setRate(perMinute float64, now time.Time) {
	e.perMinute = perMinute
	e.lim.setRate(e.lim.clock(now), perMinute)
}

// drain empties the bucket as of at and leaves it a burst of one: the
// next token is available at at, the one after an interval later.
func (e *entry) drain(at time.Time) {
	at = e.lim.clock(at)
	e.lim = bucket{tokens: 1, at: at, perMinute: e.perMinute, burst: 1}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// accepted is the rate at which the host answered OK lately, per minute;
// 0 when not known.
func (e *entry) accepted() float64 {
	if e.gaps < minGaps || e.gap <= 0 {
		return 0
	}
	return 60e6 / e.gap
}

// climb is the recovery's rate n OKs after a throttle or quota set the
// rate to base, aiming at target: a concave climb over k OKs, like TCP
// CUBIC's window, then target.
func climb(base, target float64, n, k int) float64 {
	if n >= k {
		return target
	}
	x := 1 - float64(n)/float64(k)
	return target - (target-base)*(x*x*x)
}

// probe is the rate n OKs into a probe above target: step faster after k
// OKs, growing with the cube of their number.
func probe(target, step float64, n, k int) float64 {
	x := float64(n) / float64(k)
	return target + step*(x*x*x)
}
