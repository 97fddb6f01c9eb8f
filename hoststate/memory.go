package hoststate

import (
	"context"
	"fmt"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
)

// Config configures the per-host state; an in-memory Store and the Redis
// store both take it. The zero value uses every default.
type Config struct {
	// Breaker configures circuit breakers and halts (see breaker.Config
	// for the defaults: 8 failures, 300s open, 1 probe, 10m idle TTL).
	Breaker breaker.Config
	// Limit configures pacing (see ratelimit.Config for the defaults:
	// 60/min, burst 1, floor 1/min, +6/min after 10 OKs, 1h pause cap,
	// 10m idle TTL).
	Limit ratelimit.Config
}

// Memory is the in-process Store that NewMemory returns: a circuit breaker
// (package breaker) and a pacing budget (package ratelimit) per host, and
// the halt records (HaltLog, of up to 4,096 hosts). It is safe for
// concurrent use and starts no goroutine; idle hosts are evicted lazily as
// the store is used. Its breakers read time.Now (test with
// testing/synctest); a Limit.Now clock, if set, paces. A crawler author
// passes it as the chain's Store; an operator reads Counts for a gauge.
type Memory interface {
	Store
	// Counts returns how many tracked hosts are closed, half-open, open
	// and halted, for a gauge (the BreakerCounts of the telemetry
	// exporters).
	Counts() breaker.Counts
}

// memory is the Memory that NewMemory returns.
type memory struct {
	breakers *circuits.Set
	limits   *pacing.Set
	// oneClock is set when pacing reads time.Now too (no Limit.Now):
	// Admit and Record then read the clock once for both sets.
	oneClock bool
	recs     records // the HaltLog
}

var _ Memory = (*memory)(nil)

// NewMemory returns an in-memory Store configured by cfg, or an error
// wrapping egresskit.ErrInvalidConfig that names the field cfg cannot
// honour (Breaker.OpenTimeout, Limit.PerMinute, ...).
func NewMemory(cfg Config) (Memory, error) {
	b, err := circuits.New(cfg.Breaker)
	if err != nil {
		return nil, configerr.In("Breaker", err)
	}
	l, err := pacing.New(cfg.Limit)
	if err != nil {
		return nil, configerr.In("Limit", err)
	}
	return &memory{breakers: b, limits: l, oneClock: cfg.Limit.Now == nil}, nil
}

// neutral releases an admission that was not used.
var neutral = classify.Result{Outcome: classify.Canceled, Reason: "not sent"}

// Admit checks the halt and the breaker, then reserves a pacing token; see
// Store. Its errors are *breaker.HaltError, *breaker.OpenError,
// *ratelimit.DeadlineError (errors.Is context.DeadlineExceeded), and
// ctx.Err() when ctx is already done. When the reservation fails, the
// breaker admission is released as neutral.
func (m *memory) Admit(ctx context.Context, host string) (Admission, error) {
	return m.AdmitAt(ctx, host, time.Now())
}

// AdmitAt is Admit at now, a reading of time.Now (with its monotonic
// clock) that the caller took just before, instead of reading the clock
// again: pacing, when it reads time.Now (no Limit.Now), reserves at now,
// the breaker dates a probe and the host's last use now (its open timeout
// runs on gobreaker's own clock, as in Admit), and the Admission's At is
// now. Like Admit, it keeps no reference to ctx once it returns (the
// chain reuses the context it hands it). The chain calls it with the time
// its attempt began.
func (m *memory) AdmitAt(ctx context.Context, host string, now time.Time) (Admission, error) {
	t, err := m.breakers.AllowAt(host, now)
	if err != nil {
		return Admission{}, err
	}
	var res pacing.Reservation
	if m.oneClock {
		res, err = m.limits.ReserveAt(ctx, host, now)
	} else {
		res, err = m.limits.Reserve(ctx, host)
	}
	if err != nil {
		m.breakers.DoneAt(host, t, neutral, now)
		return Admission{}, err
	}
	return Admission{Wait: res.Wait, Probe: t.Probe, Generation: t.Generation, Epoch: res.Epoch, PerMinute: res.PerMinute,
		BaseLatency: res.BaseLatency, At: now, ticket: t}, nil
}

// Record feeds r to the limiter, then to the breaker, which also halts the
// host when r is Refused; a Throttled result reaches the breaker as a
// failure only when the limiter reports its rate at the floor, else as
// neutral (see Store). The breaker counts only an Admission this Memory's
// Admit returned (another one, a zero one included, changes it only by a
// Refused result's halt). It never fails.
func (m *memory) Record(_ context.Context, host string, a Admission, r classify.Result) (Effect, error) {
	now := time.Now()
	var floored bool
	if m.oneClock {
		floored = m.limits.ObserveAt(host, r, now)
	} else {
		floored = m.limits.Observe(host, r)
	}
	br := r
	if r.Outcome == classify.Throttled && !floored {
		br = throttledNeutral
	}
	b := m.breakers.DoneAt(host, a.ticket, br, now)
	return Effect{Halted: b.Halted, From: b.From, To: b.To}, nil
}

// throttledNeutral is what the breaker counts for a throttle that pacing
// still answers by slowing down: nothing.
var throttledNeutral = classify.Result{Outcome: classify.Canceled, Reason: "throttled: pacing slows down"}

// Resume lifts a halt on host (a key, or a host, host:port or URL keyed
// by host); see Store. Its errors wrap ErrNotHalted, hostkey.ErrEmptyHost
// or hostkey.ErrInvalidHost.
func (m *memory) Resume(_ context.Context, host string) error {
	key, err := hostkey.Parse(host, hostkey.ByHost)
	if err != nil {
		return err
	}
	if !m.breakers.Resume(key) {
		return fmt.Errorf("%w: %s", ErrNotHalted, key)
	}
	return nil
}

// SetCeiling caps host's rate (see Store). It fails only
// for a NaN rate (ratelimit.ErrInvalidRate).
func (m *memory) SetCeiling(_ context.Context, host string, perMinute float64) error {
	return m.limits.SetCeiling(host, perMinute)
}

// State returns a snapshot of host. It never fails.
func (m *memory) Status(_ context.Context, host string) (Status, error) {
	b := m.breakers.Status(host)
	l := m.limits.Status(host)
	return Status{
		Host:                host,
		Breaker:             b.State,
		Halted:              b.Halted,
		HaltedAt:            b.HaltedAt,
		ConsecutiveFailures: b.ConsecutiveFailures,
		OpenUntil:           b.OpenUntil,
		PerMinute:           l.PerMinute,
		Ceiling:             l.Ceiling,
		PausedUntil:         l.PausedUntil,
		Epoch:               l.Epoch,
		Recent:              l.Recent,
		RecentSince:         l.RecentSince,
	}, nil
}

// Counts returns how many tracked hosts are closed, half-open, open and
// halted, for a gauge.
func (m *memory) Counts() breaker.Counts { return m.breakers.Counts() }

// Evict forgets the hosts idle for longer than their IdleTTL now, instead
// of as their shards are next used, and returns how many host states it
// dropped. Tests and benchmarks call it through internal/hostmem.
func (m *memory) Evict() int { return m.breakers.Evict() + m.limits.Evict() }

// Len returns how many host states the store holds (breaker and pacing
// counted separately), for internal/hostmem.
func (m *memory) Len() int { return m.breakers.Len() + m.limits.Len() }
