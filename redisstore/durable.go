package redisstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/redis/go-redis/v9"
)

// A halt lives in one Redis key without a TTL; Redis can still lose it: a
// restart without persistence, a failover to a replica that had not
// received it, an eviction. Each Store therefore remembers the halts it
// has seen (its own and those Redis reported) and writes them back when
// Redis may have lost data:
//
//   - when a remembered halt's host is admitted by Redis, before the
//     admission is returned: the halt is written back (unless the host
//     was resumed since) and Admit reports it;
//   - when a Redis server's run_id (INFO) is not the one seen before, or
//     its evicted_keys grew: after every new connection to Redis (a
//     reconnect follows a restart or a failover), on the next operation,
//     and at least every Config.CheckInterval while the Store is used (or
//     while Watch runs).
//
// A halt is not written back over a Resume made after it began: Resume
// keeps the time of the last resume in the host's resume key.

// check looks for a server whose run_id changed (or a new server) and, if
// there is one, writes every remembered halt back. It runs at most once at
// a time; a concurrent call returns at once.
func (s *Store) check(ctx context.Context, op string) {
	if !s.checking.CompareAndSwap(false, true) {
		return
	}
	defer s.checking.Store(false)
	s.dialed.Store(false)
	s.scheduleCheck()
	ids, err := s.runIDs(ctx)
	if len(ids) == 0 && err != nil {
		var re redis.Error
		if errors.As(err, &re) && s.warnedInfo.CompareAndSwap(false, true) {
			// INFO refused (an ACL, a managed Redis): restarts can then
			// only be noticed by admissions of remembered halts.
			s.warn(Warning{Kind: Unchecked, Op: "info", Err: err, Time: s.localNow()})
		}
		return
	}
	var changed []string
	var evicting []error
	s.mu.Lock()
	if s.runs == nil {
		s.runs = make(map[string]serverInfo, len(ids))
	}
	for addr, id := range ids {
		old, ok := s.runs[addr]
		switch {
		case ok && old.runID != id.runID, // restarted, or another server
			ok && id.evicted > old.evicted, // evicted keys
			!ok && len(s.known) > 0:
			changed = append(changed, addr)
		}
		if evicts(id.policy) && !evicts(old.policy) && !s.set.cfg.AllowEviction {
			evicting = append(evicting, &evictionError{Addr: addr, Policy: id.policy})
		}
		s.runs[addr] = id
	}
	s.mu.Unlock()
	for _, err := range evicting {
		s.warn(Warning{Kind: Unchecked, Op: op, Err: err, Time: s.localNow()})
	}
	if len(changed) > 0 {
		s.restore(ctx, op, changed, nil)
	}
}

// serverInfo is what a check reads of a server (INFO).
type serverInfo struct {
	runID   string
	evicted int64  // evicted_keys
	policy  string // maxmemory_policy
}

// evicts reports a maxmemory-policy that may evict keys without a TTL.
func evicts(policy string) bool { return strings.HasPrefix(policy, "allkeys-") }

// scheduleCheck sets when the next periodic check is due.
func (s *Store) scheduleCheck() {
	if s.set.cfg.CheckInterval > 0 {
		s.nextCheck.Store(s.localNow().Add(s.set.cfg.CheckInterval).UnixNano())
	}
}

// checkDue reports whether an operation must run check first: a new
// connection was made, or CheckInterval has passed.
func (s *Store) checkDue() bool {
	if s.dialed.Load() {
		return true
	}
	return s.set.cfg.CheckInterval > 0 && s.localNow().UnixNano() >= s.nextCheck.Load()
}

// restore writes every remembered halt back to Redis and, when Redis had
// lost any (or the write-back failed), sends a Restored warning naming the
// hosts it halted again, after already: the hosts the caller wrote back
// itself.
func (s *Store) restore(ctx context.Context, op string, servers, already []string) {
	s.mu.Lock()
	todo := make([]haltAt, 0, len(s.known))
	for h, t := range s.known {
		todo = append(todo, haltAt{h, t})
	}
	s.mu.Unlock()
	hosts, err := s.writeHalts(ctx, todo, nil)
	hosts = append(already, hosts...)
	var re redisErr
	if errors.As(err, &re) {
		err = re.error
	}
	if len(hosts) > 0 || err != nil {
		s.warn(Warning{Kind: Restored, Op: op, Err: err, Halts: len(hosts), Hosts: hosts, Servers: servers, Time: s.localNow()})
	}
}

// haltAt is a halt to write: its host and when it began.
type haltAt struct {
	host  string
	since time.Time
}

// writeHalts runs the halt script for each of todo, in pipelines of
// pushBatch, and returns the hosts it halted. A host resumed since its
// halt began is forgotten; a host whose keys are corrupt is skipped (Admit
// reports it). done, if not nil, is called for each halt Redis answered
// for. The error is a redisErr, or ctx.Err().
func (s *Store) writeHalts(ctx context.Context, todo []haltAt, done func(haltAt)) ([]string, error) {
	var halted []string
	var queued []redis.Z
	// The halts written back join the queue of halted hosts (HaltLog),
	// which Redis lost with them or which an outage kept them from.
	defer func() {
		if len(queued) > 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.set.cfg.Timeout)
			s.client.ZAddNX(rctx, s.queueKey(), queued...)
			cancel()
		}
	}()
	for len(todo) > 0 {
		batch := todo[:min(len(todo), pushBatch)]
		todo = todo[len(batch):]
		rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
		cmds, _ := s.client.Pipelined(rctx, func(p redis.Pipeliner) error {
			for _, h := range batch {
				k, _ := s.keysOf(h.host) // valid: the host was used already
				p.Eval(rctx, luaHalt, []string{k.state, k.halt, k.resumed}, itoa(h.since.UnixMicro()))
			}
			return nil
		})
		cancel()
		if len(cmds) != len(batch) {
			return halted, redisErr{errors.New("redisstore: pipeline lost commands")}
		}
		for i, c := range cmds {
			var n int64
			err := c.Err()
			if rc, ok := c.(*redis.Cmd); ok && err == nil {
				n, err = rc.Int64()
			}
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return halted, cerr
				}
				if redisError("halt", keys{}, err) == nil {
					s.noteRefused(err)
					return halted, redisErr{err}
				}
			}
			if done != nil {
				done(batch[i])
			}
			switch n {
			case 1:
				halted = append(halted, batch[i].host)
				queued = append(queued, redis.Z{Score: float64(batch[i].since.UnixMicro()), Member: batch[i].host})
			case -1:
				s.forget(batch[i].host)
			}
		}
	}
	return halted, nil
}

// recheck is called when Redis admitted a host whose halt this Store
// remembers: either the host was resumed, or Redis lost the halt. It
// writes the halt back unless the host was resumed since; then the
// admission is dropped and a *breaker.HaltError returned, and every other
// remembered halt is written back too. When Redis does not answer, the
// remembered halt stands.
func (s *Store) recheck(ctx context.Context, host string, since time.Time, a hoststate.Admission) (hoststate.Admission, error) {
	halted, err := s.writeHalts(ctx, []haltAt{{host, since}}, nil)
	if err != nil {
		if ctx.Err() != nil {
			return hoststate.Admission{}, ctx.Err()
		}
		return hoststate.Admission{}, &breaker.HaltError{Host: host, HaltedAt: since}
	}
	if _, ok := s.knownHalt(host); !ok {
		return a, nil // resumed since the halt began
	}
	if len(halted) > 0 {
		s.restore(ctx, "admit", nil, halted)
	}
	return hoststate.Admission{}, &breaker.HaltError{Host: host, HaltedAt: since}
}

// Watch checks for a restart or failover of Redis every
// Config.CheckInterval (5s if it is negative) until ctx ends, and
// returns ctx.Err(). Operations check on their own too, after every new
// connection and every CheckInterval; Watch makes an idle worker write the
// halts it remembers back within one interval, and the halts Redis could
// not take when they were recorded (see Store.Record), so that workers
// that never saw them stop too. A crawler author runs it on a goroutine
// of each worker that may sit idle.
func (s *Store) Watch(ctx context.Context) error {
	every := s.set.cfg.CheckInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if s.allDown() {
			continue // the fallback re-syncs when Redis answers
		}
		rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
		s.check(rctx, "watch")
		cancel()
		if s.haltsHeld.Load() {
			// Halts Redis could not take are written within one interval
			// of its return even when no operation reaches it.
			rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
			if halts, err := s.pushPending(rctx, ""); err == nil {
				s.haltsWritten("watch", halts)
			}
			cancel()
		}
	}
}

// allDown reports an outage of the whole client (FailOpen).
func (s *Store) allDown() bool {
	if !s.down.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.outages[""]
	return ok
}

// eachServer calls fn for every master of the client, concurrently for a
// Cluster or a Ring.
func (s *Store) eachServer(ctx context.Context, fn func(ctx context.Context, c redis.Cmdable, addr string) error) error {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			s.hookNode(n)
			return fn(ctx, n, n.Options().Addr)
		})
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			s.hookNode(n)
			return fn(ctx, n, n.Options().Addr)
		})
	case *redis.Client:
		return fn(ctx, c, c.Options().Addr)
	}
	return fn(ctx, s.client, "redis")
}

// runIDs returns the run_id, evicted keys and maxmemory-policy of every
// master that answered, by address, and the first error.
func (s *Store) runIDs(ctx context.Context) (map[string]serverInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
	defer cancel()
	var mu sync.Mutex // guards ids
	ids := make(map[string]serverInfo)
	err := s.eachServer(rctx, func(ctx context.Context, c redis.Cmdable, addr string) error {
		info, err := c.Info(ctx).Result() // the default sections: server, memory, stats, ...
		if err != nil {
			return err
		}
		id := serverInfo{runID: infoField(info, "run_id"), policy: infoField(info, "maxmemory_policy")}
		if id.runID == "" {
			return errors.New("redisstore: INFO without run_id")
		}
		id.evicted, _ = strconv.ParseInt(infoField(info, "evicted_keys"), 10, 64)
		mu.Lock()
		ids[addr] = id
		mu.Unlock()
		return nil
	})
	return ids, err
}

// infoField returns a field of an INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// inspect is New's look at the servers: an evicting maxmemory-policy is
// refused (unless Config.AllowEviction), and the run_ids are noted. A
// server that does not answer, or refuses CONFIG GET, gets a Warning.
func (s *Store) inspect() error {
	timeout := max(s.set.cfg.Timeout, inspectTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var mu sync.Mutex // guards evicting
	var evicting *evictionError
	err := s.eachServer(ctx, func(ctx context.Context, c redis.Cmdable, addr string) error {
		m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return err
		}
		if p := m["maxmemory-policy"]; evicts(p) {
			mu.Lock()
			evicting = &evictionError{Addr: addr, Policy: p}
			mu.Unlock()
		}
		return nil
	})
	if evicting != nil {
		if !s.set.cfg.AllowEviction {
			return evicting
		}
		s.warn(Warning{Kind: Unchecked, Op: "config", Err: evicting, Time: s.localNow()})
	}
	if err != nil {
		s.warn(Warning{Kind: Unchecked, Op: "config", Err: err, Time: s.localNow()})
		var re redis.Error
		if !errors.As(err, &re) {
			return nil // unreachable: the first check notes the run_ids
		}
	}
	ids, _ := s.runIDs(ctx)
	s.mu.Lock()
	s.runs = ids
	s.mu.Unlock()
	s.dialed.Store(false)
	s.scheduleCheck()
	return nil
}

// inspectTimeout bounds New's look at the servers, when Config.Timeout is
// shorter: the first calls also dial (and maybe shake hands over TLS).
const inspectTimeout = 2 * time.Second

// dialFailure is the last dial of the client that failed, and when.
type dialFailure struct {
	err error
	at  time.Time
}

// cause returns the error to report for a call that began at start and
// failed with err: when the call ran out of time while the client kept
// failing to dial, the dial's error ("connection refused"), which says
// more than the deadline.
func (s *Store) cause(err error, start time.Time) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if d := s.lastDial.Load(); d != nil && !d.at.Before(start) {
		return d.err
	}
	return err
}

// dialHook notes every new connection of the client: the next operation
// checks whether Redis restarted or failed over. It also keeps the last
// failed dial, for the cause of an unavailableError or a Warning.
type dialHook struct{ s *Store }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			h.s.dialed.Store(true)
		} else {
			h.s.lastDial.Store(&dialFailure{err: err, at: time.Now()})
		}
		return c, err
	}
}

func (h dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hook installs dialHook on the client, or on each node client of a
// Cluster or a Ring (their own dial hooks do not reach the nodes).
func (s *Store) hook() {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(s.hookNode)
	case *redis.Ring:
		c.OnNewNode(s.hookNode)
	default:
		s.client.AddHook(dialHook{s})
	}
}

// hookNode installs dialHook on a node client once.
func (s *Store) hookNode(n *redis.Client) {
	if _, loaded := s.hooked.LoadOrStore(n, true); !loaded {
		n.AddHook(dialHook{s})
	}
}
