package pacing

import (
	"fmt"
	"math"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/ratelimit"
)

// Observe adapts host's pacing to the outcome of an attempt. It reports
// whether r is a throttle that pacing can no longer answer by slowing
// down: Throttled, with the rate already at its floor (Floor, or a lower
// configured rate or ceiling).
func (s *Set) Observe(host string, r classify.Result) (floored bool) {
	return s.ObserveAt(host, r, s.cfg.Now())
}

// ObserveAt is Observe with the time already read: now must come from the
// Set's clock (ratelimit.Config.Now), as for ReserveAt.
func (s *Set) ObserveAt(host string, r classify.Result, now time.Time) (floored bool) {
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := s.entry(sh, host, now)
	e.used = now
	if now.Sub(e.since) >= s.cfg.Window {
		e.counts, e.since = [len(e.counts)]uint32{}, now
	}
	if int(r.Outcome) < len(e.counts) && e.counts[r.Outcome] < math.MaxUint32 {
		e.counts[r.Outcome]++
	}
	switch r.Outcome {
	case classify.OK:
		e.observeLatency(r.Latency, now)
		s.ok(e, now, r.Quota)
	case classify.Throttled:
		floored = s.throttled(e, now, r.RetryAfter)
	}
	s.hosts.MaybeSweep(sh, now)
	return floored
}

// The learnt ceiling's constants: the margin kept below the limit a
// refusal showed, the largest cut that an overshoot estimate may ask for,
// and the probe's backoff, first and at most.
const (
	margin       = 0.03
	maxOvershoot = 0.5
	nearBelow    = 0.15 // a refusal this close below the learnt ceiling...
	nearCut      = 0.1  // ...cuts the rate by this much, and margin
	firstBackoff = 2 * time.Minute
	maxBackoff   = 8 * time.Minute
	// firstProbeOKs is how many OKs since a throttle let the probe begin
	// before its first backoff has passed (twice as many for each
	// doubling): a probe then costs at most one refusal in that many
	// answers, and a fast host is back at its rate within seconds of a
	// refusal taken for a limit.
	firstProbeOKs = 200
)

// probeOKs is how many OKs since a throttle let the probe begin, for a
// probe's backoff.
func probeOKs(backoff time.Duration) int {
	return firstProbeOKs * int(max(backoff, firstBackoff)/firstBackoff)
}

// A stray refusal's bounds (see isStray).
const (
	strayDemand   = 0.8  // a demand below this share of the rate (or learnt ceiling): the pace did not bind
	strayInFlight = 0.5  // fewer attempts in flight on average: none waited at the host
	strayShare    = 0.15 // a refused share of answers from this on: a limit, not strays
	strayBound    = 0.5  // admissions waiting for a token less often than this: the pace did not bind
	strayGaps     = 16   // gaps between OKs that make the crawl's demand known: the slow average's window (1/slowGapWeight)
	strayRun      = 10   // OKs since the last pause that make a long run
	strayBelowTop = 0.6  // a rate under this share of the highest refused: far below it
	slowGapWeight = 1.0 / 16
	straySlack    = 50e3 // microseconds of latency over latRise times the base: the host delays us
	shareWeight   = 1.0 / 32
	boundWeight   = 1.0 / 16
)

// isStray reports whether a refusal at now is a stray rather than a
// limit reached: the pace did not bind (admissions seldom queued at it,
// waiting half an interval or more for their token), the host did not
// delay our attempts (its fast latency under latRise times its base, and
// straySlack), refusals are rare (their share of answers under
// strayShare), and, once the crawl's demand is known (strayGaps gaps
// between OKs, the window of their slow average), the host was answering
// that demand far below its pace and below any rate it refused (the rate
// of OKs under strayDemand of the higher of the two) with no attempt
// waiting there (Little's law: that rate × latency under strayInFlight),
// a probe above the learnt ceiling under way or not: a probe the crawl's
// demand does not reach tests nothing, and a stray then would send the
// host back to its cut rate for a doubled backoff, over and over. While
// the demand is not known, no probe may be under way, a refusal after a
// cut is a stray (unless refusals are frequent), and before any cut the
// latest admission may not have queued and at most one may wait now. So
// is a refusal after a long run of OKs (strayRun) at a rate far
// below (strayBelowTop) the highest a refusal taken for a limit came at,
// with at most one admission waiting for its token: refusals taken for
// limits cut no further than that. The pace says nothing of the host's
// limit then; the refusal is paid for with its pause alone. A limit below
// the crawl's demand refuses often enough to be learnt all the same. A
// refusal before any two OKs is no stray: nothing is known of the host.
func (e *entry) isStray(now time.Time) bool {
	if e.gaps == 0 || (e.probeN > 0 && e.gaps < strayGaps) || e.share >= strayShare || e.risen() {
		// Nothing is known of the host, a probe found the limit (the
		// crawl's demand not known yet), or the host refuses often or
		// delays us.
		return false
	}
	owed := -e.lim.tokensAt(e.lim.clock(now)) // admissions waiting for their token
	if e.runOKs >= strayRun && e.perMinute < e.refusedTop*strayBelowTop && owed <= 1 {
		// Far below the rate of the first refusals taken for limits,
		// after a long run of OKs at this one, with the crawl's
		// attempts not queued at the pace: the cuts since were strays
		// taken for limits, and the pace that binds the crawl now is
		// theirs, not the host's. No further cut.
		return true
	}
	if e.bound >= strayBound {
		return false
	}
	if e.gaps < strayGaps {
		// The demand is not known yet. After a cut (the learnt
		// ceiling), more refusals at once are needed to cut again (a
		// refused share of strayShare): the attempts that queued during
		// the pause say nothing of the host, and a crawl over many hosts
		// meets a second stray soon after a first now and then. Before
		// any cut: no queue at the pace, neither at the latest admission
		// nor now (the refused attempt's successor at most).
		return e.learnt > 0 || (!e.waited && owed < 2)
	}
	demand := 60e6 / e.slowGap // over a run of OKs, not one burst of them
	return demand < max(e.perMinute, e.learnt)*strayDemand && demand/60e6*max(e.latFast, e.latBase) < strayInFlight
}

// The latency averages: the fast average's weight, and the time constant
// over which the base follows a higher latency up. The base follows over
// minutes, not answers: a queue of our attempts at a host that answers
// many a second drains in seconds and must not become its base (the rate
// would climb back into it), while a host slower for good is followed
// within minutes, however few its answers.
const (
	latFastWeight = 1.0 / 4
	latBaseTau    = 5 * time.Minute
)

// observeLatency counts an OK answer's time to headers, at now, in the
// host's latency averages; e.lastOK is the previous OK's time.
func (e *entry) observeLatency(d time.Duration, now time.Time) {
	us := float64(d.Microseconds()) // the Redis store's unit
	if us <= 0 {
		return
	}
	switch {
	case e.latFast == 0:
		e.latFast, e.latBase = us, us
		return
	case us < e.latBase:
		e.latBase = us
	default:
		e.latBase += (us - e.latBase) * baseDrift(e.lastOK, now)
	}
	e.latFast += (us - e.latFast) * latFastWeight
}

// baseDrift is the share of the way toward a higher latency the base moves
// for an answer at now, the previous at last: 1 - exp(-elapsed/latBaseTau)
// (as the Redis store's script computes it, in microseconds), and none
// without a previous OK (a pause episode forgets it).
func baseDrift(last, now time.Time) float64 {
	if last.IsZero() || !now.After(last) {
		return 0
	}
	return 1 - math.Exp(-float64(now.Sub(last).Microseconds())/float64(latBaseTau.Microseconds()))
}

// A host slowing down under our load (see slowing): its fast latency at
// least latRise times its base and straySlack more, for latSustain (a
// stalled machine's lone slow answers are not a host slowing down; during
// a probe above the learnt ceiling, at once: the probe raised it), with
// at least latQueued of our attempts waiting there on average, paced at
// least latAhead times faster than it serves.
const (
	maxDrain   = 4.0 // a slowing host's pause: at most this many times the queue's wait its answers show
	latRise    = 2.0
	latQueued  = 1.0
	latAhead   = 1.2
	latSustain = 250 * time.Millisecond
)

// risen reports whether the host's latency is risen: its fast average at
// least latRise times its base and straySlack more. Such a host delays
// our attempts: its refusals are no strays, and it may be slowing down.
func (e *entry) risen() bool {
	return e.latBase > 0 && e.latFast >= latRise*e.latBase+straySlack
}

// slowing answers a host whose latency rises under our load, paced faster
// than it serves: it queues what it cannot serve yet. The host is paused
// while that queue drains (Little's law: what the pace sent over the fast
// latency, less what the host serves at once, over the rate it serves:
// the pace over the served rate times the fast latency, less the base),
// so that nothing more is sent until it has, and its rate settles below the
// rate it served (see served), which becomes the learnt ceiling; a probe
// above it waits for the backoff. The pause is a new epoch, as a
// throttle's: attempts admitted before it are admitted again at its end,
// one interval apart at the new rate, and none is left holding a slot
// reckoned at a rate lower than the host's (a drop to a low rate while the
// queue drained had the attempts waiting then keep slots seconds deep
// after the rate had climbed back). The pause is no refusal's: a refusal
// after it is judged as after a stray's. It reports whether it changed the
// rate.
func (s *Set) slowing(e *entry, now time.Time) bool {
	if !e.risen() {
		e.risenAt = time.Time{}
		return false
	}
	if e.risenAt.IsZero() {
		e.risenAt = now
	}
	served := e.served()
	if served <= 0 || (now.Sub(e.risenAt) < latSustain && e.probeN == 0) ||
		served/60e6*(e.latFast-e.latBase) < latQueued || e.perMinute < served*latAhead {
		return false
	}
	e.risenAt = time.Time{}
	floor := min(s.cfg.Floor, e.configured)
	if e.probeN > 0 {
		e.backoff = min(2*e.backoff, maxBackoff)
	}
	if e.backoff == 0 {
		e.backoff = firstBackoff
	}
	if e.learnt == 0 || e.probeN > 0 {
		e.learnt = served
	} else {
		e.learnt = min(e.learnt, served)
	}
	// The queue: what was sent over the latest latency at the pace (at
	// most), less what the host serves at once (Little's law); it drains
	// at the rate served. The pace only bounds what the crawl sent: the
	// wait is at most maxDrain times the one the answers show.
	queue := min(e.perMinute/served*e.latFast-e.latBase, maxDrain*(e.latFast-e.latBase))
	target := min(max(served*(1-margin), floor), e.top())
	e.target, e.base, e.oks, e.probeN = target, target, 0, 0
	e.cutRate = 0
	e.probeAt = now.Add(e.backoff)
	e.gaps = 0
	e.setRate(target, now)
	if s.pause(e, now, time.Duration(queue)*time.Microsecond) {
		e.stray = true
	}
	return true
}

// served is the rate at which a host that queues our attempts answers
// them, per minute (0: not known): the slow average of the gaps between
// OKs once servedGaps are in it, as a server's workers answer in bursts
// and the fast average of a moment is a burst's or a lull's (a server of
// 4 workers × 100ms read as 28 or 63 a second, not 40).
func (e *entry) served() float64 {
	if e.gaps >= servedGaps && e.slowGap > 0 {
		return 60e6 / e.slowGap
	}
	return e.accepted()
}

// servedGaps is how many gaps between OKs make their slow average the
// served rate.
const servedGaps = 4

// ok counts an OK answer: its spacing from the last, a quota it states,
// and a step of the recovery.
func (s *Set) ok(e *entry, now time.Time, quota float64) {
	e.share -= e.share * shareWeight
	// A gap across the end of a pause (when this side waited, not the
	// host) says nothing of the rate the host accepts; answers that come
	// while the host is paused were sent before, and their spacing does.
	spansEnd := e.lastOK.Before(e.pausedUntil) && !now.Before(e.pausedUntil)
	if !e.lastOK.IsZero() && now.After(e.lastOK) && !spansEnd {
		d := float64(now.Sub(e.lastOK).Microseconds())
		if e.gaps == 0 {
			e.gap, e.slowGap = d, d
		} else {
			e.gap += (d - e.gap) / 4
			// The mean of the gaps so far until the average's weight
			// takes over: the first gap alone (two answers of a burst)
			// is no demand.
			e.slowGap += (d - e.slowGap) * max(1/float64(e.gaps+1), slowGapWeight)
		}
		e.gaps = min(e.gaps+1, maxOKs)
	}
	e.lastOK = now
	e.oks = min(e.oks+1, maxOKs)
	if !now.Before(e.pausedUntil) {
		if e.runStart.Before(e.pausedUntil) || e.runStart.IsZero() {
			e.runStart, e.runOKs = now, 0
		}
		e.runOKs = min(e.runOKs+1, maxOKs)
	} else {
		s.revise(e, now)
	}
	if positive(quota) {
		// The host says how fast it will go on accepting until its
		// window ends: go at that rate at once, slower or faster (never
		// above the configured rate or Crawl-delay), and stay there until
		// the probe's backoff has passed.
		q := min(max(quota, minPerMinute), e.top())
		e.target, e.base, e.oks, e.probeN = q, q, 0, 0
		e.cutRate = 0
		e.probeAt = maxTime(e.probeAt, now.Add(firstBackoff))
		if q != e.perMinute {
			e.setRate(q, now)
		}
		return
	}
	if s.slowing(e, now) || e.target == 0 {
		return
	}
	if e.perMinute < e.target && e.risen() {
		// The host's latency is still risen: the queue our attempts
		// built there drains before the rate climbs again.
		return
	}
	k := s.cfg.RecoverAfter
	w := climb(e.base, e.target, e.oks, k)
	if (e.oks >= k || e.base >= e.target) && (!now.Before(e.probeAt) || e.oks >= probeOKs(e.backoff)) {
		// The backoff has passed: probe above the target, slowly at
		// first, past the learnt ceiling if the host allows it now.
		if e.probeN == 0 {
			e.probeN = e.oks
		}
		step := s.cfg.RecoverStep
		if step == 0 {
			step = e.target / 10
		}
		w = max(w, probe(e.target, step, e.oks-e.probeN, k))
	} else {
		w = min(w, e.settled())
	}
	if w = min(w, e.top()); w != e.perMinute {
		e.setRate(w, now)
	}
}

// throttled starts or extends a pause episode; see Observe.
func (s *Set) throttled(e *entry, now time.Time, retryAfter time.Duration) (floored bool) {
	floor := min(s.cfg.Floor, e.configured)
	floored = e.perMinute <= floor
	pause := max(retryAfter, 0)
	if !now.Before(e.pausedUntil) { // a new episode
		stray := e.isStray(now)
		switch {
		case stray:
			// Paid for with its pause alone: the rate, the learnt
			// ceiling and the spacing of OKs stand.
		case e.epoch > 0 && e.lastOK.Before(e.pausedUntil) && !e.stray:
			e.refusedTop = max(e.refusedTop, e.perMinute)
			// No OK since the last pause ended: the host is still shut
			// (a limiter that counts refused requests too, over a
			// window): wait four times as long as last time.
			// It let more through before than it allows over time:
			// settle at a quarter of the rate. A host that never let
			// two through (no gap between OKs) settles nothing from its
			// second refusal in a row, the first answer after a pause,
			// which is as likely a stray's (one crawl in five over 200
			// hosts with 2 % strays meets the pair): the rate falls from
			// its third, once the pause has grown.
			own := pause
			if own == 0 {
				own = interval(e.perMinute, s.cfg.MaxPause)
			}
			escalated := e.lastPause > own
			e.lastOK = time.Time{}
			e.cutRate = 0
			pause = max(pause, 4*e.lastPause)
			if e.gaps > 0 || escalated {
				e.target = min(max(e.target/4, floor), e.top())
				e.base = min(e.base, e.target)
				e.setRate(e.base, now)
			}
		default:
			e.refusedTop = max(e.refusedTop, e.perMinute)
			s.cut(e, now, floor)
		}
		e.stray = stray
		if pause == 0 {
			pause = interval(e.perMinute, s.cfg.MaxPause)
		}
		e.lastPause = min(pause, s.cfg.MaxPause)
	}
	if pause == 0 {
		pause = interval(e.perMinute, s.cfg.MaxPause)
	}
	s.pause(e, now, pause)
	e.share += (1 - e.share) * shareWeight
	return floored
}

// pause pauses e for d from now (at most MaxPause) unless it is paused
// longer already: a new epoch, and the first token when the pause ends,
// never sooner than one interval of the current rate after now. It
// reports whether the pause started or grew.
func (s *Set) pause(e *entry, now time.Time, d time.Duration) bool {
	until := now.Add(min(d, s.cfg.MaxPause))
	if !until.After(e.pausedUntil) {
		return false
	}
	e.pausedUntil = until
	e.epoch++
	e.drain(maxTime(until, now.Add(interval(e.perMinute, s.cfg.MaxPause))))
	return true
}

// cut learns from a throttle at the current rate r: the host's limit is
// below r. The learnt ceiling drops to r (or moves to r, up or down, when
// a probe brought the throttle, whose backoff then doubles), and the rate
// settles below the limit the throttle shows: a limiter with a burst of
// one request that answered n OKs since the last pause ended, and refuses
// now, allows fewer than n-1 requests in that time. Few OKs say only that
// r is far too fast: the rate halves.
func (s *Set) cut(e *entry, now time.Time, floor float64) {
	r := e.perMinute
	// Refused again near below the learnt ceiling: the limit is close
	// below, whatever the run of OKs suggests (a limiter counting over a
	// window lets many through before it refuses): a fixed cut.
	near := e.probeN == 0 && r <= e.learnt && r >= e.learnt*(1-nearBelow)
	switch {
	case e.probeN > 0:
		e.backoff = min(2*e.backoff, maxBackoff)
		e.learnt = r
	case e.learnt == 0:
		e.learnt = r
	default:
		e.learnt = min(e.learnt, r)
	}
	if e.backoff == 0 {
		e.backoff = firstBackoff
	}
	target := r / 2
	e.cutRate = 0
	switch n, d := e.runOKs, now.Sub(e.runStart); {
	case near:
		target = r * (1 - nearCut) * (1 - margin)
	case n >= 3 && e.runStart.After(e.pausedUntil) && d > 0:
		// A limiter with a burst of one request that let n through from
		// runStart and refuses now allows less than n-1 in that time.
		// OKs still to come for attempts sent before now revise it.
		target = estimate(r, n, d)
		e.cutRate, e.cutStart, e.cutEnd, e.cutOKs = r, e.runStart, now, n
	}
	if e.probeN > 0 {
		// The probe found the limit still between where it started (a
		// rate the host took for a whole backoff) and r: back to the
		// start.
		target = min(r, e.target)
		e.cutRate = 0
	}
	target = min(max(target, floor), e.top())
	e.target, e.base, e.oks, e.probeN = target, target, 0, 0
	e.probeAt = now.Add(e.backoff)
	e.setRate(target, now)
}

// estimate is the rate to settle at after a refusal at r that followed n
// OKs in d: below (n-1)/d by margin, at most r less margin, and at least
// half of r (the deepest cut, as when few OKs say only that r is far too
// fast).
func estimate(r float64, n int, d time.Duration) float64 {
	est := float64(n-1) * float64(time.Minute) / float64(d)
	return max(min(est, r)*(1-margin), r*(1-maxOvershoot))
}

// revise counts an OK answered at now, during the pause that a throttle's
// estimate began (see cut), in that estimate: it answers an attempt sent
// before the throttle. A limiter that delays the excess (nginx's limit_req
// without nodelay) still holds such attempts when it refuses one, and
// answers them later, one interval of its limit apart; a fleet's OKs held
// back (redisstore's RecordDelay) come late too, each with the time it was
// answered. The run then spans from its first OK to the latest one (or to
// the throttle, if later), and the target rises to the estimate over it,
// never above the rate refused, and never falls: a late answer may only
// be slow.
func (s *Set) revise(e *entry, now time.Time) {
	if e.cutRate == 0 || now.Before(e.cutStart) {
		return
	}
	e.cutOKs = min(e.cutOKs+1, maxOKs)
	e.cutEnd = maxTime(e.cutEnd, now)
	t := estimate(e.cutRate, e.cutOKs, e.cutEnd.Sub(e.cutStart))
	if t = min(max(t, min(s.cfg.Floor, e.configured)), e.top()); t > e.target {
		e.target, e.base = t, t
	}
}

// SetCeiling caps host's rate at perMinute requests per minute (robots.txt
// Crawl-delay): a faster current rate drops to it at once, and recovery
// stops at it. A perMinute <= 0 or +Inf removes the cap; a rate below the
// configured one then recovers toward it as after a throttle. Rates below
// one a day count as one a day. It returns an error wrapping ratelimit.ErrInvalidRate
// for NaN.
func (s *Set) SetCeiling(host string, perMinute float64) error {
	if math.IsNaN(perMinute) {
		return fmt.Errorf("%w: ceiling is NaN", ratelimit.ErrInvalidRate)
	}
	now := s.cfg.Now()
	sh := s.hosts.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	e := s.entry(sh, host, now)
	e.used = now
	if !positive(perMinute) {
		e.ceiling = 0
		if e.perMinute < e.configured {
			e.target, e.base, e.oks, e.probeN = e.configured, e.perMinute, 0, 0
		}
		return nil
	}
	e.ceiling = max(perMinute, minPerMinute)
	if e.perMinute > e.ceiling {
		e.setRate(e.ceiling, now)
	}
	return nil
}
