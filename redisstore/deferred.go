package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/redis/go-redis/v9"
)

// An OK outcome of an ordinary (not probe) attempt changes nothing another
// worker must see at once: it resets the breaker's failure count, counts
// toward pacing's recovery and the OK spacing, and never changes a
// breaker state. Record therefore holds it back, up to
// Config.RecordDelay, and the host's next script (admit or record) applies
// it first, at the time it was made, in the same round trip. What is
// still held when the delay ends is sent by a timer, in one pipeline, and
// Flush sends everything at once.

// deferredOK is one OK outcome held back.
type deferredOK struct {
	at    time.Time     // when Record was called, by the Store's clock (ages)
	due   time.Time     // when it must be sent at the latest, by time.Now
	gen   uint64        // the admission's generation
	quota string        // the quota the answer stated, formatted ("0": none)
	lat   time.Duration // the answer's time to headers
}

// maxDeferred bounds the outcomes held back per host: the one after them
// sends them all.
const maxDeferred = 32

// deferrals are the OK outcomes a Store holds back.
type deferrals struct {
	n     atomic.Int64 // mirrors len(hosts), for a lock-free fast path
	send  sync.Mutex   // held while the timer or Flush sends
	mu    sync.Mutex   // guards the fields below; never held across a call
	hosts map[string][]deferredOK
	// queue holds the hosts in the order their first outcome was held
	// back, with that outcome's due time; an entry whose host was sent
	// meanwhile is skipped.
	queue []queued
	timer *time.Timer // armed for queue[0].due, or nil
	stop  bool        // Flush is running: arm no timer
	// notClosed are the hosts whose breaker this Store last saw open or
	// half-open (at most maxKnown): their OKs are recorded at once, so
	// that Record reports the state they met.
	notClosed map[string]struct{}
	nNot      atomic.Int64 // mirrors len(notClosed)
}

type queued struct {
	host string
	due  time.Time
}

// holds reports whether r, the outcome of admission a, may be held back.
// Admissions from local state (a.At set) are recorded as they are, and so
// is an OK that states a quota: it sets the host's rate for the fleet, and
// a quota read late is a rate of another moment of the host's window.
func (s *Store) holds(host string, a hoststate.Admission, r classify.Result) bool {
	if s.set.delay <= 0 || r.Outcome != classify.OK || positive(r.Quota) || a.Probe || !a.At.IsZero() {
		return false
	}
	d := &s.def
	if d.nNot.Load() == 0 {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, not := d.notClosed[host]
	return !not && len(d.notClosed) < maxKnown
}

// saw notes the breaker state of host that a script reported.
func (s *Store) saw(host string, st breaker.State) {
	d := &s.def
	if st == breaker.Closed && d.nNot.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case st == breaker.Closed:
		delete(d.notClosed, host)
	case len(d.notClosed) < maxKnown:
		if d.notClosed == nil {
			d.notClosed = make(map[string]struct{})
		}
		d.notClosed[host] = struct{}{}
	}
	d.nNot.Store(int64(len(d.notClosed)))
}

// hold keeps r back and reports whether host now holds maxDeferred
// outcomes (the caller sends them).
func (s *Store) hold(host string, a hoststate.Admission, r classify.Result) (full bool) {
	quota := "0"
	if positive(r.Quota) {
		quota = ftoa(r.Quota)
	}
	d := &s.def
	due := time.Now().Add(s.set.delay)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hosts == nil {
		d.hosts = make(map[string][]deferredOK)
	}
	recs := d.hosts[host]
	if len(recs) == 0 {
		d.queue = append(d.queue, queued{host: host, due: due})
		if d.timer == nil && !d.stop {
			d.timer = time.AfterFunc(s.set.delay, s.sendDue)
		}
	}
	d.hosts[host] = append(recs, deferredOK{at: s.localNow(), due: due, gen: a.Generation, quota: quota, lat: r.Latency})
	d.n.Store(int64(len(d.hosts)))
	return len(recs)+1 >= maxDeferred
}

// take removes and returns the outcomes held back for host.
func (s *Store) take(host string) []deferredOK {
	d := &s.def
	if d.n.Load() == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	recs, ok := d.hosts[host]
	if ok {
		delete(d.hosts, host)
		d.n.Store(int64(len(d.hosts)))
	}
	return recs
}

// putBack returns outcomes that were not sent (the caller's context ended
// first) to the front of host's.
func (s *Store) putBack(host string, recs []deferredOK) {
	if len(recs) == 0 {
		return
	}
	d := &s.def
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hosts == nil {
		d.hosts = make(map[string][]deferredOK)
	}
	old := d.hosts[host]
	if len(old) == 0 {
		d.queue = append(d.queue, queued{host: host, due: recs[0].due})
		if d.timer == nil && !d.stop {
			d.timer = time.AfterFunc(max(time.Until(recs[0].due), 0), s.sendDue)
		}
	}
	d.hosts[host] = append(recs, old...)
	d.n.Store(int64(len(d.hosts)))
}

// deferredArgs appends the count and the outcomes of recs to args, in the
// layout of deferred.lua.
func (s *Store) deferredArgs(args []any, recs []deferredOK) []any {
	args = append(args, strconv.Itoa(len(recs)))
	if len(recs) == 0 {
		return args
	}
	now := s.localNow()
	for _, r := range recs {
		args = append(args, usec(max(now.Sub(r.at), 0)), strconv.FormatUint(r.gen, 10), r.quota, usec(max(r.lat, 0)))
	}
	return args
}

// sendHost sends the outcomes held back for host, if any, with the flush
// script. Outcomes that Redis did not take are lost, except when ctx ended
// first: they were made while Redis answered, and local state (FailOpen)
// starts from what happens during the outage, as a Record made then would
// have been lost with the Redis that took it.
func (s *Store) sendHost(ctx context.Context, host string) error {
	recs := s.take(host)
	if len(recs) == 0 {
		return nil
	}
	k, err := s.keysOf(host)
	if err != nil {
		return err // not reached: Record checked host
	}
	args := s.deferredArgs(s.set.args(host, s.nowArg()), recs)
	_, _, err = s.exec(ctx, "flush", s.sc.flush, k, args)
	if err != nil && ctx.Err() != nil {
		s.putBack(host, recs)
	}
	return err
}

// sendDue is the timer's: it sends the outcomes of every host whose first
// one is due, and arms the timer for the next.
func (s *Store) sendDue() {
	d := &s.def
	d.send.Lock()
	defer d.send.Unlock()
	d.mu.Lock()
	d.timer = nil
	// What falls due within a quarter of the delay goes too, so that the
	// pipeline carries many hosts rather than a timer fire each.
	now := time.Now().Add(s.set.delay / 4)
	var hosts []string
	for len(d.queue) > 0 && !d.queue[0].due.After(now) {
		q := d.queue[0]
		d.queue = d.queue[1:]
		if recs := d.hosts[q.host]; len(recs) > 0 && recs[0].due.Equal(q.due) {
			hosts = append(hosts, q.host)
		}
	}
	d.mu.Unlock()
	s.sendMany(hosts)
	d.mu.Lock()
	if len(d.queue) > 0 && d.timer == nil && !d.stop {
		d.timer = time.AfterFunc(max(time.Until(d.queue[0].due), 0), s.sendDue)
	}
	d.mu.Unlock()
}

// maxBatch bounds the scripts of one pipeline of sendMany.
const maxBatch = 256

// sendMany sends the outcomes held back for hosts, the scripts of up to
// maxBatch hosts in one pipeline (go-redis splits it by master on a
// Cluster), so that what the timer sends costs a round trip per master,
// not per host. While some master is down it sends host by host, through
// the fallback's bookkeeping. Outcomes Redis does not take are lost, as
// in sendHost.
func (s *Store) sendMany(hosts []string) {
	if s.down.Load() || len(hosts) == 1 {
		for _, h := range hosts {
			_ = s.sendHost(context.Background(), h)
		}
		return
	}
	type script struct {
		keys []string
		args []any
	}
	for len(hosts) > 0 {
		batch := hosts[:min(len(hosts), maxBatch)]
		hosts = hosts[len(batch):]
		var todo []script
		for _, h := range batch {
			recs := s.take(h)
			k, err := s.keysOf(h)
			if len(recs) == 0 || err != nil {
				continue
			}
			todo = append(todo, script{[]string{k.state, k.halt}, s.deferredArgs(s.set.args(h, s.nowArg()), recs)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.set.cfg.Timeout*time.Duration(1+len(todo)/64))
		cmds, _ := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, sc := range todo {
				s.sc.flush.EvalSha(ctx, p, sc.keys, sc.args...)
			}
			return nil
		})
		var again []script
		for i, c := range cmds {
			if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				again = append(again, todo[i])
			}
		}
		if len(again) > 0 { // a restart or SCRIPT FLUSH: send the source
			s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, sc := range again {
					s.sc.flush.Eval(ctx, p, sc.keys, sc.args...)
				}
				return nil
			})
		}
		cancel()
	}
}

// Flush sends at once every OK outcome the Store holds back (see
// Config.RecordDelay) and waits for a send in progress. Call it before the
// process exits, or outcomes of up to RecordDelay are not counted. The
// Store stays usable. Its errors are those of Record, joined.
func (s *Store) Flush(ctx context.Context) error {
	d := &s.def
	d.mu.Lock()
	d.stop = true
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.mu.Unlock()
	d.send.Lock() // a running sendDue finishes first
	defer func() {
		d.send.Unlock()
		d.mu.Lock()
		d.stop = false
		if len(d.hosts) > 0 && d.timer == nil {
			d.timer = time.AfterFunc(s.set.delay, s.sendDue)
		}
		d.mu.Unlock()
	}()
	d.mu.Lock()
	hosts := make([]string, 0, len(d.hosts))
	for h := range d.hosts {
		hosts = append(hosts, h)
	}
	d.queue = nil
	d.mu.Unlock()
	var errs []error
	for _, h := range hosts {
		if err := s.sendHost(ctx, h); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// heldEffect is the Effect of an OK outcome held back: an admission that
// was not a probe was granted while the breaker was closed, and an OK
// never changes the state.
var heldEffect = hoststate.Effect{From: breaker.Closed, To: breaker.Closed}
