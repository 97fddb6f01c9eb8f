package egresskit

import (
	"context"
	"sync"
	"time"

	"github.com/egresskit/egresskit/internal/firstsend"
)

// spacing keeps this process's paced attempts to one host apart in time.
// The host's token bucket spaces admissions, not sends: when the process
// stalls (a busy machine, a pause of the garbage collector) the timers of
// several paced attempts fire together, and an attempt taken again for
// lateness finds the bucket refilled by the stall, so two or three
// requests went out within a few milliseconds and a limiter with a burst
// of one refused the last. A paced attempt therefore also waits until
// spacingShare of the host's pacing interval has passed since this
// process's previous paced send to the host. Unpaced attempts (a token
// was there at once, as in the configured burst) are not held.
type spacing struct {
	mu   sync.Mutex
	last map[string]time.Time // host key → latest paced send
}

// spacingShare is the share of the pacing interval kept between two paced
// sends: below one, so that a timer firing a little early or late does
// not push the next send back.
const spacingShare = 0.9

// spacingMatters is the rate, in requests a minute, above which a host's
// spacing is under a millisecond (1,000 a second): a slot-waited attempt
// to such a host is spaced at its admission's rate rather than at the
// rate a Status round trip would read.
const spacingMatters = 60000

// maxSpaced bounds the hosts remembered; past it, hosts whose latest send
// is older than spacingForget are dropped.
const (
	maxSpaced     = 4096
	spacingForget = time.Minute
)

// wait holds a paced attempt to key, at perMinute, until its turn, and
// notes the send. It returns ctx's error if ctx ends first.
func (s *spacing) wait(ctx context.Context, key string, perMinute float64) error {
	if !(perMinute > 0) {
		return nil
	}
	gap := time.Duration(spacingShare * float64(time.Minute) / perMinute)
	for {
		s.mu.Lock()
		now := time.Now()
		next := s.last[key].Add(gap)
		if !now.Before(next) {
			s.note(key, now)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		timer := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// note records a send to key at now; s.mu is held.
func (s *spacing) note(key string, now time.Time) {
	if s.last == nil {
		s.last = make(map[string]time.Time)
	}
	if _, ok := s.last[key]; !ok && len(s.last) >= maxSpaced {
		for k, at := range s.last {
			if now.Sub(at) > spacingForget {
				delete(s.last, k)
			}
		}
	}
	s.last[key] = now
}

// spaceOut holds a paced attempt to key (see spacing); a retry's hold is
// not counted against its attempt timeout (first is set for a first
// attempt on the caller's context).
func (t *Transport) spaceOut(ctx context.Context, key string, perMinute float64, first bool) error {
	resume := noResume
	if !first {
		resume = firstsend.HoldAttemptTimer(ctx)
	}
	err := t.spacing.wait(ctx, key, perMinute)
	resume()
	return err
}
