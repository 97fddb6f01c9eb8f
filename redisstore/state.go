package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/redis/go-redis/v9"
)

// Store is the Redis implementation of hoststate.Store: one breaker, one
// pacing budget and one halt per host, shared by every Store that uses the
// same Redis and Prefix, with the semantics of hoststate.Memory.
//
// Admit and Record are one script each (EVALSHA); Record holds an OK back
// for up to Config.RecordDelay so that it rides with the host's next
// script, and an attempt costs one round trip, amortised (see the package
// documentation for the windows this opens). No lock is held across a
// request. Resume, SetCeiling and Status are one script each; SetCeiling
// and Status carry the host's held-back OKs like Admit, Resume sends them
// first.
//
// When Redis is unreachable or slower than Config.Timeout, a FailClosed
// Store fails the operation with an error wrapping ErrUnavailable. A
// FailOpen Store falls back to an in-process hoststate.Memory and sends a
// Warning; it tries Redis again every RetryInterval, and when Redis
// answers it re-syncs:
//
//   - first the halts recorded locally during the outage are written to
//     Redis (a host halted there already keeps its halt), so that no halt
//     is lost; so are the halts this Store had seen in Redis before the
//     outage, in case Redis lost its data (a restart without persistence,
//     a failover to a stale replica) — a host resumed after its halt
//     began stays resumed;
//   - then the local state is dropped and Redis is authoritative again:
//     breaker counts and pacing learnt locally are discarded (Redis keeps
//     what it had, or starts afresh if it lost its data); admissions
//     granted locally and recorded after the return change no Redis
//     breaker (their generation does not match) but do feed the pacing.
//
// While it runs on local state, a Store also refuses hosts whose halt it
// has seen in Redis (up to 65,536 of them); a halt set by another worker
// and never seen by this one is not known during the outage. Use
// FailClosed where that matters more than crawling on.
//
// Resume always needs Redis: it fails with an error wrapping
// ErrUnavailable, under both policies, when Redis cannot be reached, and
// then changes nothing.
//
// Times in errors and snapshots (HaltError.HaltedAt, OpenError.Until,
// Status) are on the Redis server's clock unless Config.Now is set; a
// halt made locally during an outage keeps the local time it began.
//
// A Store remembers the halts it has seen and writes them back when Redis
// lost them, under both policies: see the package documentation ("Halts
// that outlive Redis's data").
//
// With a *redis.ClusterClient an outage is a master's: only the hosts of
// its slots go to local state, and it is tried again, re-synced and
// warned about on its own.
//
// Store is safe for concurrent use. The only goroutine it starts is a
// timer's, which sends the OKs held back when RecordDelay ends; Flush
// stops it and waits for it (Watch runs on the caller's goroutine). It does not own the client: close the client when done.
type Store struct {
	client redis.UniversalClient
	set    settings
	prefix string
	sc     scripts
	down   atomic.Bool  // mirrors len(outages) > 0, for a lock-free fast path
	nKnown atomic.Int64 // mirrors len(known), for a lock-free fast path

	dialed        atomic.Bool // a new connection was made: check for a restart
	lastDial      atomic.Pointer[dialFailure]
	haltsHeld     atomic.Bool  // a halt Redis could not take is pending (see keepHalt)
	rc            reconnect    // after a refused connect: when to dial again
	checking      atomic.Bool  // a check is running
	nextCheck     atomic.Int64 // when the next periodic check is due (Unix ns)
	warnedInfo    atomic.Bool  // the Warning that INFO is refused was sent
	journal       *journal     // Config.Journal, or nil
	warnedJournal atomic.Bool  // the Warning that the journal failed was sent
	hooked        sync.Map     // node clients with the dial hook, of a Cluster or Ring

	mu sync.Mutex // guards the fields below
	// outages are the nodes (see nodeOf; "" for the whole client) whose
	// hosts run on local state (FailOpen), each with when to try Redis
	// again.
	outages map[string]time.Time
	local   hoststate.Memory
	pending map[string]pendingHalt // halts to write to Redis
	known   map[string]time.Time   // halts seen: refused while degraded, written back after a loss
	runs    map[string]serverInfo  // what the last check read of each server, by address

	def   deferrals // the OK outcomes held back (Config.RecordDelay)
	lease leases    // the tokens taken ahead (Config.LeaseWindow)
}

var _ hoststate.Store = (*Store)(nil)

// maxKnown bounds the halts a Store remembers for its fallback.
const maxKnown = 1 << 16

// New returns a Store over client (a *redis.Client, a Sentinel failover
// client, a *redis.ClusterClient or a *redis.Ring) configured by cfg.
//
// New asks every Redis master for its maxmemory-policy (CONFIG GET) and
// its run_id (INFO server), waiting at most the longer of Config.Timeout
// and 2s. A policy that may evict keys without a TTL (allkeys-lru,
// allkeys-lfu, allkeys-random) could evict a halt: New refuses it with an
// ErrEvicting unless Config.AllowEviction is set. When CONFIG GET is
// refused (a managed Redis, an ACL without +config) or Redis does not
// answer, New sends an Unchecked Warning and goes on. New adds a hook to
// client (or to each node client of a Cluster or Ring) that notes new
// connections, after which the Store checks whether Redis restarted; the
// hook stays with the client, so make one Store per client and keep it,
// rather than one per task.
//
// Errors: an error wrapping egresskit.ErrInvalidConfig that names the
// field for a setting out of range or an unusable Config.Prefix; an error
// wrapping ErrClientTimeouts when client is one of go-redis's clients
// whose socket I/O ignores the context deadline (create it with
// ContextTimeoutEnabled: true, or with ReadTimeout and WriteTimeout no
// longer than Config.Timeout), since Config.Timeout could then not bound a
// call; an error wrapping ErrEvicting; an error wrapping ErrJournal for a
// Config.Journal that cannot be used; an error for a nil client.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	set := newSettings(cfg)
	if err := checkPrefix(set.cfg.Prefix); err != nil {
		return nil, err
	}
	if err := checkClient(client, set.cfg.Timeout); err != nil {
		return nil, err
	}
	s := &Store{client: client, set: set, prefix: set.cfg.Prefix, sc: newScripts()}
	if set.cfg.Journal != "" {
		j, halts, err := loadJournal(set.cfg.Journal)
		if err != nil {
			return nil, err
		}
		s.journal, s.known = j, halts
		s.nKnown.Store(int64(len(halts)))
	}
	s.hook()
	if err := s.inspect(); err != nil {
		return nil, err
	}
	if s.nKnown.Load() > 0 {
		// A restarted worker writes back what it remembers, in case Redis
		// lost it meanwhile.
		ctx, cancel := context.WithTimeout(context.Background(), max(set.cfg.Timeout, inspectTimeout))
		s.restore(ctx, "journal", nil, nil)
		cancel()
	}
	return s, nil
}

// checkClient reports a go-redis client whose calls Timeout cannot bound.
func checkClient(c redis.UniversalClient, timeout time.Duration) error {
	var ctxOK bool
	var rd, wr time.Duration
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		ctxOK, rd, wr = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	case *redis.ClusterClient:
		o := c.Options()
		ctxOK, rd, wr = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	case *redis.Ring:
		o := c.Options()
		ctxOK, rd, wr = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	default:
		return nil
	}
	if ctxOK || (rd > 0 && rd <= timeout && wr > 0 && wr <= timeout) {
		return nil
	}
	return fmt.Errorf("%w: set ContextTimeoutEnabled, or ReadTimeout and WriteTimeout of at most %v", ErrClientTimeouts, timeout)
}

// nowArg is a script's ARGV[1]: empty for Redis time, else the fake clock.
func (s *Store) nowArg() string {
	if s.set.cfg.Now == nil {
		return ""
	}
	return itoa(s.set.cfg.Now().UnixMicro())
}

// localNow reads the local clock: Config.Now, else time.Now.
func (s *Store) localNow() time.Time {
	if s.set.cfg.Now != nil {
		return s.set.cfg.Now()
	}
	return time.Now()
}

// Admit decides whether one attempt to host may be sent; see
// hoststate.Store. Its errors are *breaker.HaltError, *breaker.OpenError,
// *ratelimit.DeadlineError (errors.Is context.DeadlineExceeded), ctx.Err()
// when ctx ends first, ErrInvalidHost, ErrCorrupt, ErrScript, and under
// FailClosed ErrUnavailable.
func (s *Store) Admit(ctx context.Context, host string) (hoststate.Admission, error) {
	if err := ctx.Err(); err != nil {
		return hoststate.Admission{}, err
	}
	k, err := s.keysOf(host)
	if err != nil {
		return hoststate.Admission{}, err
	}
	if a, ok := s.leased(host); ok {
		if s.nKnown.Load() == 0 {
			return a, nil
		}
		if _, halted := s.knownHalt(host); !halted {
			return a, nil
		}
		s.dropLease(host)
	}
	budget := "-1"
	if dl, ok := ctx.Deadline(); ok {
		budget = itoa(max(dl.Sub(s.localNow()), 0).Microseconds())
	}
	recs := s.take(host)
	args := s.deferredArgs(s.set.args(host, s.nowArg(), budget, s.set.leaseArgs[0], s.set.leaseArgs[1]), recs)
	reply, local, err := s.exec(ctx, "admit", s.sc.admit, k, args)
	if local != nil {
		return s.localAdmit(ctx, local, host)
	}
	if err != nil {
		if ctx.Err() != nil {
			s.putBack(host, recs)
		}
		if errors.Is(err, ErrUnavailable) && s.nKnown.Load() > 0 {
			// FailClosed: a host whose halt this Store knows is halted,
			// not merely unavailable.
			if since, ok := s.knownHalt(host); ok {
				return hoststate.Admission{}, &breaker.HaltError{Host: host, HaltedAt: since}
			}
		}
		return hoststate.Admission{}, err
	}
	v, err := ints(reply, 2)
	if err != nil {
		return hoststate.Admission{}, &scriptError{Op: "admit", Msg: err.Error()}
	}
	switch {
	case v[0] == 0 && len(v) == 8:
		a := hoststate.Admission{
			Wait:        time.Duration(v[1]) * time.Microsecond,
			Probe:       v[2] == 1,
			Generation:  uint64(v[3]),
			Epoch:       uint64(v[4]),
			PerMinute:   float64(v[5]) / 1000,
			BaseLatency: time.Duration(max(v[7], 0)) * time.Microsecond,
		}
		if a.Probe {
			s.saw(host, breaker.HalfOpen)
		} else {
			s.saw(host, breaker.Closed)
		}
		if s.nKnown.Load() > 0 {
			if since, ok := s.knownHalt(host); ok {
				return s.recheck(ctx, host, since, a)
			}
		}
		if v[6] > 0 {
			s.grant(host, int(v[6]), a)
		}
		return a, nil
	case v[0] == 1:
		since := micros(v[1])
		s.remember(host, since)
		return hoststate.Admission{}, &breaker.HaltError{Host: host, HaltedAt: since}
	case v[0] == 2:
		s.saw(host, breaker.Open)
		return hoststate.Admission{}, &breaker.OpenError{Host: host, Until: micros(v[1])}
	case v[0] == 3:
		return hoststate.Admission{}, &ratelimit.DeadlineError{Host: host, Wait: time.Duration(v[1]) * time.Microsecond}
	}
	return hoststate.Admission{}, &scriptError{Op: "admit", Msg: "unexpected reply"}
}

// Record feeds the classification of an attempt admitted by Admit back
// into host's state; see hoststate.Store. A Refused result halts the host
// before anything else is read, so that even a corrupt state does not
// lose the halt. Its errors are ErrInvalidHost, ErrCorrupt, ErrScript,
// ctx.Err(), and under FailClosed ErrUnavailable.
//
// A halt is never lost to an error, under either policy: when a Refused
// result cannot be written to Redis (unreachable, slow, ctx ended, a
// script error), the Store keeps the halt — Admit refuses the host from
// then on — and writes it to Redis before the next operation that reaches
// Redis (and in Watch); the Effect reports Halted (when no halt of the
// host was known), the error is returned as well, and a Outage Warning
// with Op "halt" names the host. A Recovered Warning follows once the
// halt is in Redis.
func (s *Store) Record(ctx context.Context, host string, a hoststate.Admission, r classify.Result) (hoststate.Effect, error) {
	k, err := s.keysOf(host)
	if err != nil {
		return hoststate.Effect{}, err
	}
	if r.Outcome != classify.OK {
		s.dropLease(host)
	}
	if s.holds(host, a, r) {
		if s.hold(host, a, r) {
			if err := s.sendHost(ctx, host); err != nil {
				return hoststate.Effect{}, err
			}
		}
		return heldEffect, nil
	}
	quota := "0"
	if positive(r.Quota) {
		quota = ftoa(r.Quota)
	}
	args := s.set.args(host, s.nowArg(),
		itoa(int64(r.Outcome)), usec(max(r.RetryAfter, 0)), strconv.FormatUint(a.Generation, 10), quota, usec(max(r.Latency, 0)))
	recs := s.take(host)
	args = s.deferredArgs(args, recs)
	reply, local, err := s.exec(ctx, "record", s.sc.record, k, args)
	if local != nil {
		return s.localRecord(ctx, local, host, a, r)
	}
	if err != nil {
		if ctx.Err() != nil {
			s.putBack(host, recs)
		}
		if r.Outcome == classify.Refused {
			return s.keepHalt(host, err), err
		}
		return hoststate.Effect{}, err
	}
	v, err := ints(reply, 4)
	if err != nil || v[0] > 2 || v[1] > 2 || v[0] < 0 || v[1] < 0 {
		return hoststate.Effect{}, &scriptError{Op: "record", Msg: "unexpected reply"}
	}
	eff := hoststate.Effect{Halted: v[2] == 1, From: breaker.State(v[0]), To: breaker.State(v[1])}
	s.saw(host, eff.To)
	if eff.Halted {
		s.remember(host, micros(v[3]))
	}
	return eff, nil
}

// Resume lifts a halt on host (a key, or a host, host:port or URL keyed by
// host), in Redis and locally. It needs Redis under both policies: its
// errors are one wrapping hoststate.ErrNotHalted when the host was halted
// nowhere, hostkey's errors, ErrInvalidHost, ErrCorrupt, ErrScript,
// ctx.Err() and ErrUnavailable.
func (s *Store) Resume(ctx context.Context, host string) error {
	if err := checkHost(host); err != nil {
		return err
	}
	host, err := hostkey.Parse(host, hostkey.ByHost)
	if err != nil {
		return err
	}
	k, err := s.keysOf(host)
	if err != nil {
		return err
	}
	if err := s.sendHost(ctx, host); ctx.Err() != nil {
		return err
	}
	var reply any
	err = s.gate(ctx)
	if err == nil {
		reply, err = s.call(ctx, "resume", s.sc.resume, k, s.set.args(host, s.nowArg()))
	}
	if err != nil {
		var re redisErr
		if errors.As(err, &re) {
			return &unavailableError{Op: "resume", Cause: re.error}
		}
		return err
	}
	s.forget(host)
	s.unqueue(ctx, host)
	s.mu.Lock()
	_, pending := s.pending[host]
	delete(s.pending, host)
	local := s.local
	s.mu.Unlock()
	halted := reply == int64(1) || pending
	if local != nil {
		if err := local.Resume(ctx, host); err == nil {
			halted = true
		}
	}
	if !halted {
		return fmt.Errorf("%w: %s", hoststate.ErrNotHalted, host)
	}
	return nil
}

// SetCeiling caps host's rate at perMinute requests per minute; see
// hoststate.Store. Its errors are one wrapping ratelimit.ErrInvalidRate
// for NaN, ErrInvalidHost, ErrCorrupt, ErrScript, ctx.Err(), and under
// FailClosed ErrUnavailable.
func (s *Store) SetCeiling(ctx context.Context, host string, perMinute float64) error {
	if math.IsNaN(perMinute) {
		return fmt.Errorf("redisstore: ceiling is NaN: %w", ratelimit.ErrInvalidRate)
	}
	k, err := s.keysOf(host)
	if err != nil {
		return err
	}
	s.dropLease(host)
	c := "0"
	if positive(perMinute) {
		c = ftoa(max(perMinute, minPerMinute))
	}
	recs := s.take(host)
	_, local, err := s.exec(ctx, "ceiling", s.sc.ceiling, k, s.deferredArgs(s.set.args(host, s.nowArg(), c), recs))
	if local != nil {
		return local.SetCeiling(ctx, host, perMinute)
	}
	if err != nil && ctx.Err() != nil {
		s.putBack(host, recs)
	}
	return err
}

// Store returns a snapshot of host; see hoststate.Store. Its errors are
// ErrInvalidHost, ErrCorrupt, ErrScript, ctx.Err(), and under FailClosed
// ErrUnavailable. On local state (FailOpen, Redis unreachable) it
// reports the local snapshot, halted when a halt of the host is known.
func (s *Store) Status(ctx context.Context, host string) (hoststate.Status, error) {
	k, err := s.keysOf(host)
	if err != nil {
		return hoststate.Status{}, err
	}
	recs := s.take(host)
	reply, local, err := s.exec(ctx, "state", s.sc.state, k, s.deferredArgs(s.set.args(host, s.nowArg()), recs))
	if local != nil {
		return s.localState(ctx, local, host)
	}
	if err != nil {
		if ctx.Err() != nil {
			s.putBack(host, recs)
		}
		return hoststate.Status{}, err
	}
	st, err := decodeState(host, reply)
	if err != nil {
		return hoststate.Status{}, &scriptError{Op: "state", Msg: err.Error()}
	}
	return st, nil
}

// redisErr marks an error of the client (Redis unreachable or slow).
type redisErr struct{ error }

// call runs sc for k on Redis, bounded by Timeout. Its errors are ctx.Err()
// when ctx ended, ErrCorrupt, ErrScript, or redisErr.
func (s *Store) call(ctx context.Context, op string, sc *redis.Script, k keys, args []any) (any, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
	ks := []string{k.state, k.halt}
	if op == "resume" {
		// Only resume writes the resume key, and deletes the hash an older
		// version kept the state in.
		ks = append(ks, k.resumed, k.state[:len(k.state)-len(stateSuffix)]+legacySuffix)
	}
	reply, err := sc.Run(rctx, s.client, ks, args...).Result()
	cancel()
	if err == nil {
		return reply, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if e := redisError(op, k, err); e != nil {
		return nil, e
	}
	err = s.cause(err, start)
	s.noteRefused(err)
	return nil, redisErr{err}
}

// exec runs sc for k, or tells the caller to use local state: when local
// is not nil the caller must run the operation on it instead.
func (s *Store) exec(ctx context.Context, op string, sc *redis.Script, k keys, args []any) (reply any, local hoststate.Memory, err error) {
	local, try, node := s.route(ctx, k)
	if local != nil && !try {
		return nil, local, nil
	}
	if err := s.gate(ctx); err != nil {
		var re redisErr
		errors.As(err, &re)
		if s.set.cfg.OnRedisError == FailClosed {
			return nil, nil, &unavailableError{Op: op, Cause: re.error}
		}
		return nil, s.degrade(ctx, op, re.error, k), nil
	}
	if !try && s.checkDue() {
		s.check(ctx, op)
	}
	if !try && s.haltsHeld.Load() {
		// Halts Redis could not take go first: Redis holds them, for every
		// worker, as soon as this Store reaches it again.
		halts, err := s.pushPending(ctx, node)
		var re redisErr
		switch {
		case errors.As(err, &re) && s.set.cfg.OnRedisError == FailClosed:
			return nil, nil, &unavailableError{Op: op, Cause: re.error}
		case errors.As(err, &re):
			return nil, s.degrade(ctx, op, re.error, k), nil
		case err != nil:
			return nil, nil, err // ctx ended
		}
		s.haltsWritten(op, halts)
	}
	halts := 0
	if try {
		if halts, err = s.pushPending(ctx, node); err != nil {
			var re redisErr
			if errors.As(err, &re) {
				return nil, s.degrade(ctx, op, re.error, k), nil
			}
			return nil, nil, err // ctx ended
		}
	}
	reply, err = s.call(ctx, op, sc, k, args)
	var re redisErr
	switch {
	case err == nil:
		if try {
			s.recovered(op, halts, node)
		}
		return reply, nil, nil
	case !errors.As(err, &re):
		if try && ctx.Err() == nil {
			s.recovered(op, halts, node) // Redis answered, with an error of its own
		}
		return nil, nil, err
	case s.set.cfg.OnRedisError == FailClosed:
		return nil, nil, &unavailableError{Op: op, Cause: re.error}
	}
	return nil, s.degrade(ctx, op, re.error, k), nil
}

// ints reads a script reply of at least n integers.
func ints(reply any, n int) ([]int64, error) {
	a, ok := reply.([]any)
	if !ok || len(a) < n {
		return nil, errors.New("unexpected reply")
	}
	v := make([]int64, len(a))
	for i, x := range a {
		if v[i], ok = x.(int64); !ok {
			return nil, errors.New("unexpected reply")
		}
	}
	return v, nil
}

// decodeState reads the reply of the state script.
func decodeState(host string, reply any) (hoststate.Status, error) {
	a, ok := reply.([]any)
	if !ok || len(a) != 15 {
		return hoststate.Status{}, errors.New("unexpected reply")
	}
	var n [15]int64
	var f [2]float64
	for i, x := range a {
		switch i {
		case 4, 5:
			str, ok := x.(string)
			if !ok {
				return hoststate.Status{}, errors.New("unexpected reply")
			}
			v, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return hoststate.Status{}, errors.New("unexpected reply")
			}
			f[i-4] = v
		default:
			if n[i], ok = x.(int64); !ok {
				return hoststate.Status{}, errors.New("unexpected reply")
			}
		}
	}
	if n[1] < 0 || n[1] > 2 {
		return hoststate.Status{}, errors.New("unexpected reply")
	}
	return hoststate.Status{
		Host:                host,
		Breaker:             breaker.State(n[1]),
		Halted:              n[0] > 0,
		HaltedAt:            micros(n[0]),
		ConsecutiveFailures: int(n[2]),
		OpenUntil:           micros(n[3]),
		PerMinute:           f[0],
		Ceiling:             f[1],
		PausedUntil:         micros(n[6]),
		Recent: ratelimit.Outcomes{
			OK: int(n[7]), Transient: int(n[8]), Throttled: int(n[9]),
			Refused: int(n[10]), Permanent: int(n[11]), Canceled: int(n[12]),
		},
		RecentSince: micros(n[13]),
		Epoch:       uint64(n[14]),
	}, nil
}
