package ratelimit

import "time"

// bucket is a host's token bucket: tokens as of at (negative while
// reservations are owed), refilled at perMinute up to burst. It keeps
// x/time/rate's arithmetic, with one difference that pacing needs: when the
// rate changes, the tokens owed are re-valued at the new rate, so that the
// reservations already handed out keep their spacing and the next one
// comes one interval of the new rate after the last. (rate.Limiter keeps
// the count owed, so a faster rate would slot the next reservation in
// among the earlier ones, two requests close together.)
type bucket struct {
	tokens    float64
	at        time.Time // the latest time given to the bucket
	perMinute float64
	burst     float64
}

func newBucket(perMinute float64, burst int, now time.Time) bucket {
	return bucket{tokens: float64(burst), at: now, perMinute: perMinute, burst: float64(burst)}
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
