package pacing

import "time"

// bucket is a host's token bucket: tokens as of at (negative while
// reservations are owed), refilled at perMinute up to burst. It is
// golang.org/x/time/rate's Limiter arithmetic, and grants exactly what a
// rate.Limiter of the same rate and burst grants (ReserveN, TokensAt) while
// the rate does not change, and across a change made while no token is
// owed: TestBucketSameAsRateLimiter checks it over random runs. It differs
// in exactly two places:
//
//   - A rate change while tokens are owed re-values them at the new rate,
//     so that the reservations already handed out keep their spacing and
//     the next one comes one interval of the new rate after the last.
//     rate.Limiter's SetLimitAt keeps the count owed, so a faster rate
//     slots the next reservation in among the earlier ones: two requests
//     to the host close together, which adaptive pacing (and its Lua twin
//     in redisstore, which must equal it) cannot allow.
//     TestBucketDiffersWhenOwed shows it.
//   - Its time never goes back (clock): rate.Limiter moves its time back
//     to an earlier t it is given, and then refills the same interval
//     twice; the bucket takes the latest time it was given instead.
//
// A Limiter cannot be used as it is for the first reason, and the bucket
// is also a plain value kept in the host's entry, with no lock of its own.
type bucket struct {
	tokens    float64
	at        time.Time // the latest time given to the bucket
	perMinute float64
	burst     float64
}

func newBucket(perMinute float64, burst int, now time.Time, tokens float64) bucket {
	return bucket{tokens: tokens, at: now, perMinute: perMinute, burst: float64(burst)}
}

// perSecond is the refill rate in tokens a second.
func (b *bucket) perSecond() float64 { return b.perMinute / 60 }

// clock returns t, or the latest time given to the bucket if later: the
// bucket's time never goes back.
func (b *bucket) clock(t time.Time) time.Time {
	if t.Before(b.at) {
		return b.at
	}
	return t
}

// tokensAt returns the tokens at t >= b.at.
func (b *bucket) tokensAt(t time.Time) float64 {
	tok := b.tokens + t.Sub(b.at).Seconds()*b.perSecond()
	return min(tok, b.burst)
}

// reserve takes a token at t >= b.at and returns when it may be used.
func (b *bucket) reserve(t time.Time) time.Time {
	tok := b.tokensAt(t) - 1
	b.tokens, b.at = tok, t
	if tok >= 0 {
		return t
	}
	return t.Add(delay(-tok, b.perMinute))
}

// setRate changes the rate at t >= b.at, re-valuing the tokens owed.
func (b *bucket) setRate(t time.Time, perMinute float64) {
	tok := b.tokensAt(t)
	if tok < 0 {
		tok = tok * perMinute / b.perMinute
	}
	b.tokens, b.at, b.perMinute = tok, t, perMinute
}
