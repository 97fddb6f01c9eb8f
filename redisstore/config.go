package redisstore

import (
	"math"
	"strconv"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/ratelimit"
)

// ErrorPolicy says what a Store does when Redis cannot be reached or does not
// answer within Config.Timeout.
type ErrorPolicy uint8

// The policies.
const (
	// FailOpen (the default) falls back to in-process state
	// (hoststate.Memory) with a Warning, and goes back to Redis when it
	// answers again: see Store for what happens then.
	FailOpen ErrorPolicy = iota
	// FailClosed fails the operation with an error wrapping
	// ErrUnavailable; Admit failing means the attempt is not sent.
	FailClosed
)

// String returns "fail-open" or "fail-closed".
func (p ErrorPolicy) String() string {
	switch p {
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	}
	return "unknown"
}

// Config configures a Store. The zero value uses every default.
type Config struct {
	// Prefix starts every key ("PREFIX:{host}:st"). It must not contain
	// spaces, control characters or braces. Default (""): "egresskit".
	Prefix string

	// HostState configures breakers, halts and pacing, with the defaults
	// and meaning it has for hoststate.Memory. HostState.Limit.Now is not
	// used; see Now.
	HostState hoststate.Config

	// OnRedisError is the policy when Redis is unreachable or slow.
	// Default (zero): FailOpen.
	OnRedisError ErrorPolicy

	// OnWarning, if not nil, receives every Warning: when a FailOpen Store
	// falls back to local state and when it returns to Redis, under either
	// policy when a halt Redis could not take is kept locally and when it
	// is written, and the Restored and Unchecked ones. It is called outside any lock of the
	// Store, on the goroutine of the operation that noticed, possibly
	// concurrently. Nil (the default) logs each Warning through
	// slog.Default (level Warn; Recovered at Info), once per change, not
	// per request: a warning is never silent.
	OnWarning func(Warning)

	// Timeout bounds each Redis call; no operation waits longer for Redis
	// (the client must honour context deadlines: see New). A slower call
	// counts as Redis unavailable (see OnRedisError). Zero: 250ms, which
	// rides out a busy worker's stalls while keeping a hung Redis to a
	// quarter second per attempt. Negative: refused by New. The
	// trade-off: docs/reference.md, "redisstore.Config.Timeout".
	Timeout time.Duration

	// RetryInterval is how often a FailOpen Store that fell back to local
	// state tries Redis again; in between, operations do not touch Redis.
	// Zero: 1s. Negative: refused by New. After a refused connection the
	// Store also dials Redis itself, at most every 100ms (see
	// docs/reference.md, "redisstore.Config.RetryInterval").
	RetryInterval time.Duration

	// ProbeLease is how long a half-open probe slot stays taken when the
	// probe's outcome is never recorded (its worker died, or Redis was
	// unreachable for the record); then a new probe is admitted. Zero:
	// HostState.Breaker.OpenTimeout (negative: refused by New), the bound the in-memory store
	// (hoststate.Memory) holds a probe slot for: left at its default, it
	// is the same in every store.
	ProbeLease time.Duration

	// CheckInterval is how often, at most, an operation first checks
	// whether a Redis server restarted or failed over (its run_id, from
	// INFO server), so that the halts this Store remembers are written
	// back when Redis may have lost them. Operations also check after
	// every new connection to Redis, and Watch checks on its own.
	// Default (0): 5s; negative: only after new connections (and in
	// Watch, every 5s).
	CheckInterval time.Duration

	// AllowEviction accepts a Redis whose maxmemory-policy evicts keys
	// without a TTL (allkeys-*), which New otherwise refuses. Unsafe: an
	// evicted halt is written back only by a worker that remembers it,
	// when it next asks for the host; every other worker may contact the
	// refused host in between.
	AllowEviction bool

	// Journal, if not empty, is the path of a file where the Store keeps
	// the halts it remembers, so that a worker restarted together with
	// Redis still remembers them: New reads it back and writes its halts
	// to Redis unless resumed since. One file per Store. New returns an
	// error wrapping ErrJournal for a file it cannot use. Default (""): no
	// journal. More: docs/reference.md, "redisstore.Config.Journal".
	Journal string

	// RecordDelay is how long, at most, Record may hold back an OK (not a
	// probe's, not one stating a quota), so that it rides with the host's
	// next admission instead of a round trip of its own; other outcomes
	// are recorded at once. Other workers see held OKs up to RecordDelay
	// late. Close (or Flush) sends them: call it before exiting. Default
	// (0): 1s. Negative: every outcome at once. More than a minute:
	// refused by New. More: docs/reference.md, "redisstore.Config.RecordDelay".
	RecordDelay time.Duration

	// LeaseWindow lets a Store take up to 16 of a fast host's spare pacing
	// tokens in one admission and hand them to its next admissions without
	// a round trip, for at most LeaseWindow; other workers' changes to
	// such a host (a halt, a pause) reach this Store up to LeaseWindow
	// late. Default (0): 100ms. Negative: off. More than a second: refused
	// by New. Which hosts are leased: docs/reference.md,
	// "redisstore.Config.LeaseWindow".
	LeaseWindow time.Duration

	// Now is the clock. Nil (the default, and the only sensible setting
	// for a fleet) takes time from the Redis server (TIME, inside every
	// script), so workers with skewed clocks agree; the local clock then
	// only measures how long a context has left before its deadline. Tests
	// set it to a fake clock, which is then passed to every script and
	// against which context deadlines are read (as ratelimit.Config.Now).
	Now func() time.Time
}

// defaultLeaseWindow is Config.LeaseWindow's default, and maxLease the
// most tokens a lease holds.
const (
	defaultLeaseWindow = 100 * time.Millisecond
	maxLease           = 16
)

// defaultTimeout is Config.Timeout's default.
const defaultTimeout = 250 * time.Millisecond

// minPerMinute is ratelimit's lowest rate (one request a day).
const minPerMinute = 1.0 / (24 * 60)

func positive(f float64) bool { return f > 0 && !math.IsInf(f, 1) }

// settings is a Config with every default applied, as breaker and
// ratelimit apply them, and the script arguments it implies.
type settings struct {
	cfg   Config
	delay time.Duration // RecordDelay, with its default; 0: off
	lease time.Duration // LeaseWindow, with its default; 0: off
	// leaseArgs are the admit script's lease arguments, formatted once:
	// the most tokens to take beyond the attempt's, and the window in
	// microseconds ("0" and "0" when leases are off).
	leaseArgs [2]string
	br        breaker.Config
	lim       ratelimit.Config
	conf      string            // the configured rate, formatted
	overrides map[string]string // per-host configured rates, formatted
	// base holds ARGV[2..14] of every script; conf (ARGV[7]) is replaced
	// per host.
	base [13]any
}

func newSettings(cfg Config) settings {
	s := settings{cfg: cfg}
	if s.cfg.Prefix == "" {
		s.cfg.Prefix = defaultPrefix
	}
	if s.cfg.Timeout <= 0 {
		s.cfg.Timeout = defaultTimeout
	}
	if s.cfg.RetryInterval <= 0 {
		s.cfg.RetryInterval = time.Second
	}
	if s.cfg.CheckInterval == 0 {
		s.cfg.CheckInterval = 5 * time.Second
	}
	switch d := s.cfg.RecordDelay; {
	case d == 0:
		s.delay = time.Second
	case d > 0:
		s.delay = d
	}
	switch d := s.cfg.LeaseWindow; {
	case d == 0:
		s.lease = defaultLeaseWindow
	case d > 0:
		s.lease = d
	}
	s.leaseArgs = [2]string{"0", "0"}
	if s.lease > 0 {
		s.leaseArgs = [2]string{strconv.Itoa(maxLease), usec(s.lease)}
	}

	bd := circuits.DefaultConfig()
	b := cfg.HostState.Breaker
	if b.FailureThreshold <= 0 {
		b.FailureThreshold = bd.FailureThreshold
	}
	b.FailureThreshold = min(b.FailureThreshold, 1<<31)
	if b.OpenTimeout <= 0 {
		b.OpenTimeout = bd.OpenTimeout
	}
	if b.HalfOpenProbes <= 0 {
		b.HalfOpenProbes = bd.HalfOpenProbes
	}
	b.HalfOpenProbes = min(b.HalfOpenProbes, 1<<31)
	if b.IdleTTL == 0 {
		b.IdleTTL = bd.IdleTTL
	}
	s.br = b
	if s.cfg.ProbeLease <= 0 {
		s.cfg.ProbeLease = b.OpenTimeout
	}

	ld := ratelimit.DefaultConfig()
	l := cfg.HostState.Limit
	if !positive(l.PerMinute) {
		l.PerMinute = ld.PerMinute
	}
	l.PerMinute = max(l.PerMinute, minPerMinute)
	if l.Burst <= 0 {
		l.Burst = ld.Burst
	}
	if !positive(l.Floor) {
		l.Floor = ld.Floor
	}
	l.Floor = max(l.Floor, minPerMinute)
	if l.RecoverAfter <= 0 {
		l.RecoverAfter = ld.RecoverAfter
	}
	if !positive(l.RecoverStep) {
		l.RecoverStep = 0
	}
	if l.MaxPause <= 0 {
		l.MaxPause = ld.MaxPause
	}
	if l.Window <= 0 {
		l.Window = ld.Window
	}
	if l.IdleTTL == 0 {
		l.IdleTTL = ld.IdleTTL
	}
	l.Now = nil
	s.overrides = make(map[string]string, len(l.Overrides))
	for host, pm := range l.Overrides {
		if positive(pm) {
			s.overrides[host] = ftoa(max(pm, minPerMinute))
		}
	}
	l.Overrides = nil
	s.lim = l
	s.conf = ftoa(l.PerMinute)

	s.base = [13]any{
		itoa(int64(b.FailureThreshold)),
		usec(b.OpenTimeout),
		itoa(int64(b.HalfOpenProbes)),
		idle(b.IdleTTL),
		usec(s.cfg.ProbeLease),
		s.conf,
		itoa(int64(l.Burst)),
		ftoa(l.Floor),
		itoa(int64(l.RecoverAfter)),
		ftoa(l.RecoverStep),
		usec(l.MaxPause),
		usec(l.Window),
		idle(l.IdleTTL),
	}
	return s
}

// memoryConfig is the Config of the local fallback state.
func (s *settings) memoryConfig() hoststate.Config {
	c := s.cfg.HostState
	c.Limit.Now = s.cfg.Now
	return c
}

// args returns the ARGV of a script for host: the clock, the
// configuration, then extra.
func (s *settings) args(host string, now string, extra ...any) []any {
	a := make([]any, 0, 14+len(extra))
	a = append(a, now)
	a = append(a, s.base[:]...)
	if pm, ok := s.overrides[host]; ok {
		a[6] = pm
	}
	return append(a, extra...)
}

func itoa(n int64) string   { return strconv.FormatInt(n, 10) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// usec formats d in microseconds, the scripts' unit.
func usec(d time.Duration) string { return itoa(d.Microseconds()) }

// idle formats an IdleTTL: negative means never forget.
func idle(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return usec(d)
}

// micros converts a script time to a time.Time; 0 is the zero time.
func micros(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// check refuses the settings New cannot honour. The error wraps
// egresskit.ErrInvalidConfig and names the field.
func (c *Config) check() error {
	switch {
	case c.OnRedisError != FailOpen && c.OnRedisError != FailClosed:
		return configerr.Field("OnRedisError", "is %d, neither FailOpen nor FailClosed", c.OnRedisError)
	case c.Timeout < 0:
		return configerr.Field("Timeout", "is %v, negative (0 means 50ms)", c.Timeout)
	case c.RetryInterval < 0:
		return configerr.Field("RetryInterval", "is %v, negative (0 means 1s)", c.RetryInterval)
	case c.LeaseWindow > time.Second:
		return configerr.Field("LeaseWindow", "is %v, more than a second (negative means off)", c.LeaseWindow)
	case c.RecordDelay > time.Minute:
		return configerr.Field("RecordDelay", "is %v, more than a minute (negative means off)", c.RecordDelay)
	case c.ProbeLease < 0:
		return configerr.Field("ProbeLease", "is %v, negative (0 means HostState.Breaker.OpenTimeout)", c.ProbeLease)
	}
	if _, err := hoststate.NewMemory(c.HostState); err != nil {
		return configerr.In("HostState", err)
	}
	return nil
}
