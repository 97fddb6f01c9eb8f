// Package ratelimit paces requests per host, adaptively.
//
// Every host store (hoststate.NewMemory, redisstore.New) keeps a token
// bucket (x/time/rate's arithmetic) per host key (see package hostkey), filled at the host's current rate in requests per
// minute, and adapts that rate to what the host says:
//
//   - A host never contacted gets one request at first, not a burst: its
//     bucket starts with one token and fills to Burst while it is idle.
//   - Throttled (a 429, or any Retry-After) starts a pause episode, and
//     teaches the store that the host's sustained limit is below the rate r
//     it was sent at, whatever the spacing of earlier OKs suggested (a
//     limiter's burst allowance hides an excess for a while). The learnt
//     ceiling drops to r, and the rate settles below the limit the
//     throttle shows: a limiter with a burst of one request that let n
//     OKs through since the last pause ended, over a time d, and refuses
//     now allows fewer than n-1 requests in d; the rate is set to that
//     ((n-1)/d, at most r), 3 % below, and at least r/2. OKs answered
//     during the pause that follows, for attempts sent before the
//     throttle, join that run and revise the estimate up (never above r):
//     a limiter that delays the excess (nginx's limit_req without
//     nodelay) still holds such attempts when it refuses one, and a fleet
//     sharing Redis may deliver OKs it held back only after the throttle
//     (redisstore.Config.RecordDelay). Fewer than 3 OKs
//     since the last pause ended say only that r was far too fast: the
//     rate halves. Refused again within 15 % below the
//     learnt ceiling (a limiter counting over a window lets many requests
//     through before it refuses, whatever their rate), the rate is cut by
//     10 % and the 3 %. It never goes below Floor.
//   - A stray refusal is not a limit: a Throttled outcome is paid for with
//     its pause alone (the rate, the learnt ceiling and the spacing of OKs
//     stand) when the pace did not bind the crawl (admissions seldom
//     queued at it, waiting half an interval or more for a token; while
//     the crawl's demand is not yet known, over its first 16 OKs, a
//     refusal soon after a cut is a stray, and before any cut none but
//     the next admission may wait), the crawl's demand (the rate of OK answers)
//     was under 0.8 of the rate and of any rate the host refused, no
//     attempt waited at the host (demand × latency under one half), the
//     host did not delay our attempts (its latency under twice its base
//     and 50 ms), and refusals are under 15 % of its answers. A broad
//     crawl's hosts thus keep their rate through a loaded server's odd 429,
//     however long it runs. A limit below the crawl's demand refuses
//     often enough to be learnt all the same. A refusal taken for a limit
//     is probed past after the backoff below: the rate is back at the
//     configured rate (or Crawl-delay) about twice RecoverAfter OKs after
//     the probe begins, when the host refuses no probe.
//   - A host slowing down under our load is answered before it refuses:
//     when its latency (time to headers, kept in the state as a fast
//     average and a base that follows the lowest, and a higher latency
//     over minutes) is twice its base and 50 ms more for 250 ms (at once
//     during a probe), with attempts queued there (the served rate × the
//     latency over the base at least one) and the host paced a fifth
//     faster than it serves, the rate it serves (the slow average of the
//     gaps between its OKs) becomes the learnt ceiling; the host is
//     paused while the queue drains (the pace over the served rate times
//     the fast latency, less the base: Little's law; at most four times
//     the wait its answers show) and then paced 3 % below what it served. A far but steady host is at its base. Every
//     worker sharing the state slows and recovers together.
//   - The host is paused until now + RetryAfter (capped at MaxPause; one
//     interval at the new rate when the host gave no RetryAfter). When
//     the host answered no OK since the previous pause ended, it is still
//     shut (a limiter counting over a window, refused requests too): the
//     pause is four times the previous one, at least, and the rate drops
//     to a quarter — except at a host that never answered two OKs, whose
//     second refusal in a row (the first answer after its first pause,
//     as likely a stray's) keeps the rate; from the third the rate drops
//     too. The throttle drains the bucket, and from then on the host gets no bursts
//     (its bucket holds one token): when the pause ends (and no sooner
//     than one interval of the new rate after the throttle), the attempts
//     waiting for it go out one interval apart at the new rate, never
//     together. A Throttled outcome that arrives while the host is already
//     paused (another attempt answered by the same episode) extends the
//     pause, draining the bucket again, but teaches nothing new.
//   - Every pause that starts or grows bumps the host's epoch: an
//     admission taken in an earlier epoch was computed before the latest
//     throttle, and its holder must be admitted again rather than send at
//     the time it was given.
//   - The rate stays where the throttle settled it: it
//     does not climb back into the limit. A backoff after the throttle (2
//     minutes, doubling after every probe the host refused, up to 8), or
//     200 OKs after it if sooner (400 and 800 as the backoff doubles: a
//     probe costs at most one refusal in that many answers), the rate
//     probes above it, slowly at first: RecoverStep faster after
//     RecoverAfter OKs, growing with the cube of their number, up to the
//     configured rate, so that a raised limit is found within minutes
//     while a fixed one is probed ever more rarely. A throttle during the
//     probe sends the rate back to where the probe started.
//   - An OK answer whose rate-limit fields state a quota
//     (classify.Result.Quota: remaining requests over the time to the
//     reset; a spent quota is one request at the reset) sets the rate to
//     it at once, slower or faster, never above the configured rate or
//     ceiling; with a fixed window advertised on every answer the rate
//     follows what the window has left. Without a later quota the rate
//     stays there until the probe's backoff has passed.
//   - The rate never exceeds the host's configured rate nor its ceiling
//     (robots.txt Crawl-delay).
//   - Transient, Refused, Permanent and Canceled outcomes leave the rate
//     alone.
//
// A Throttled outcome that comes when pacing can no longer slow down — the
// rate already at its floor — is when package hoststate lets a throttle
// count toward opening the breaker. An admission never sleeps: it returns
// the wait (the rest of any pause plus the token's delay), and fails fast,
// taking nothing, with a *DeadlineError when that wait would pass the
// context's deadline.
//
// A host idle for IdleTTL is forgotten (so it starts again at its configured
// rate, without its ceiling) unless it is still paused. Eviction runs lazily
// on the calls that touch a host's shard; nothing starts a goroutine.
package ratelimit

import (
	"strconv"

	"github.com/egresskit/egresskit/classify"
)

// Outcomes counts outcomes by class.
type Outcomes struct {
	OK, Transient, Throttled, Refused, Permanent, Canceled int
}

// String formats o as "ok=1 transient=0 ...", for logs.
func (o Outcomes) String() string {
	b := make([]byte, 0, 80)
	for i, n := range [...]int{o.OK, o.Transient, o.Throttled, o.Refused, o.Permanent, o.Canceled} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, classify.Outcome(i).String()...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b)
}
