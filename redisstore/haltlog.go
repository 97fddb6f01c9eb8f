package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/haltrec"
	"github.com/redis/go-redis/v9"
)

// The halt records (hoststate.HaltLog) live in three places: each host's
// halt records and notes in two lists, PREFIX:{HOST}:halts and
// PREFIX:{HOST}:notes, newest first (haltrec.MaxHistory entries each, one
// JSON object an entry; kept while the host is halted, for 30 days after
// its last resume), and the halted hosts in a sorted set
// PREFIX:halted scored by the halt's time in microseconds (at most
// 65,536 members, the newest). The halt itself stays where Admit reads
// it: the queue is an index for people, checked against it.

// logTTL is how long a host's records stay after it was resumed.
const logTTL = 30 * 24 * time.Hour

// maxEntry bounds an entry of a host's list read back: a record this
// store writes is a few KiB at most, so a larger one was written by
// something else and is not decoded.
const maxEntry = 64 << 10

// readTimeout bounds the reads of an operator's tools, when Config.Timeout
// is shorter: they read a whole queue.
const readTimeout = 2 * time.Second

// entry is one JSON record of a host's list.
type entry struct {
	Kind string          `json:"kind"` // "halt" or "note"
	Halt *hoststate.Halt `json:"halt,omitempty"`
	Note *hoststate.Note `json:"note,omitempty"`
}

func (s *Store) logKey(host string) string   { return s.prefix + ":{" + host + "}:halts" }
func (s *Store) noteKey(host string) string  { return s.prefix + ":{" + host + "}:notes" }
func (s *Store) queueKey() string            { return s.prefix + ":halted" }
func unavailable(op string, err error) error { return &unavailableError{Op: op, Cause: err} }

// recordKey checks and keys host for the halt records.
func (s *Store) recordKey(host string) (string, error) {
	if err := checkHost(host); err != nil {
		return "", err
	}
	key, err := hostkey.Parse(host, hostkey.ByHost)
	if err != nil {
		return "", err
	}
	return key, checkHost(key)
}

// push adds e to the list lk and trims it; queue, if not nil, adds the
// changes to the expiries and the halted set to the same pipeline.
func (s *Store) push(ctx context.Context, op, lk string, e entry, queue func(redis.Pipeliner)) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
	defer cancel()
	_, err = s.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		p.LPush(rctx, lk, b)
		p.LTrim(rctx, lk, 0, haltrec.MaxHistory-1)
		if queue != nil {
			queue(p)
		}
		return nil
	})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return unavailable(op, s.cause(err, start))
	}
	return nil
}

// PutHalt records the evidence of a halt of h.Host; see hoststate.HaltLog.
// Its errors are hostkey's, ErrInvalidHost, ctx.Err() and ErrUnavailable
// (under both policies: records are not kept locally).
func (s *Store) PutHalt(ctx context.Context, h hoststate.Halt) error {
	key, err := s.recordKey(h.Host)
	if err != nil {
		return err
	}
	h.Host = key
	if h.Time.IsZero() {
		h.Time = s.localNow()
	}
	cleanHalt(&h)
	return s.push(ctx, "halt", s.logKey(key), entry{Kind: "halt", Halt: &h}, func(p redis.Pipeliner) {
		p.Persist(ctx, s.logKey(key))
		p.Persist(ctx, s.noteKey(key))
		p.ZAdd(ctx, s.queueKey(), redis.Z{Score: float64(h.Time.UnixMicro()), Member: key})
		p.ZRemRangeByRank(ctx, s.queueKey(), 0, -maxKnown-1)
	})
}

// AddNote records an operator's note on n.Host's halt; see
// hoststate.HaltLog. A note that resumed the host takes it off the queue
// and lets its records expire 30 days later. Its errors are those of
// PutHalt.
func (s *Store) AddNote(ctx context.Context, n hoststate.Note) error {
	key, err := s.recordKey(n.Host)
	if err != nil {
		return err
	}
	n.Host = key
	if n.Time.IsZero() {
		n.Time = s.localNow()
	}
	cleanNote(&n)
	return s.push(ctx, "note", s.noteKey(key), entry{Kind: "note", Note: &n}, func(p redis.Pipeliner) {
		if n.Resumed {
			p.ZRem(ctx, s.queueKey(), key)
			p.Expire(ctx, s.logKey(key), logTTL)
			p.Expire(ctx, s.noteKey(key), logTTL)
		}
	})
}

// cleanHalt bounds and cleans a halt record's fields (see haltrec), when
// it is written and again when it is read back: whatever wrote it to
// Redis, a record read is data, never a terminal's control sequence.
func cleanHalt(h *hoststate.Halt) {
	h.Worker = haltrec.Clip(h.Worker, haltrec.MaxBy)
	h.Reason = haltrec.Clip(h.Reason, haltrec.MaxText)
	h.Evidence = haltrec.Clip(h.Evidence, haltrec.MaxText)
	h.URL = haltrec.Clip(h.URL, haltrec.MaxURL)
	h.BodyHead = haltrec.Clip(h.BodyHead, haltrec.MaxBodyHead)
	h.Markers = haltrec.Markers(h.Markers)
}

// cleanNote is cleanHalt for a note.
func cleanNote(n *hoststate.Note) {
	n.By = haltrec.Clip(n.By, haltrec.MaxBy)
	n.Text = haltrec.Clip(n.Text, haltrec.MaxText)
}

// headScript returns the first ARGV[1] entries of the list KEYS[1], each
// entry longer than ARGV[2] bytes replaced by its length, so that a huge
// entry (written by something else) does not cross the network; and when
// the list takes more than ARGV[3] bytes (MEMORY USAGE, which samples),
// only that size, so that nothing is copied at all.
var headScript = redis.NewScript(`local ok, mem = pcall(redis.call, 'MEMORY', 'USAGE', KEYS[1])
if ok and type(mem) == 'number' and mem > tonumber(ARGV[3]) then return mem end
local out = {}
local max = tonumber(ARGV[2])
for i, v in ipairs(redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  if #v > max then out[i] = #v else out[i] = v end
end
return out`)

// maxList bounds a host's list read back: MaxHistory entries of at most
// maxEntry bytes, with room to spare.
const maxList = 2 * haltrec.MaxHistory * maxEntry

// head queues the read of list key's first n entries on p.
func head(ctx context.Context, p redis.Pipeliner, key string, n int) *redis.Cmd {
	return headScript.Eval(ctx, p, []string{key}, n, maxEntry, maxList)
}

// items returns what head read: each an entry's JSON, or the length of
// an entry too large to read; for a list too large to read, its size.
func items(c *redis.Cmd) []any {
	switch v := c.Val().(type) {
	case []any:
		return v
	case int64:
		return []any{v}
	}
	return nil
}

// decode reads one entry of a host's list, as head returned it: false
// for one that is not an entry. One larger than any this store writes
// (its length, from head) reads as a halt and a note whose text says so,
// so that it is not lost from sight.
func decode(item any) (entry, bool) {
	var e entry
	raw, ok := item.(string)
	if !ok {
		n, ok := item.(int64)
		if !ok {
			return e, false
		}
		what := strconv.FormatInt(n, 10) + " bytes of records, more than this store writes: not shown"
		return entry{Kind: "halt", Halt: &hoststate.Halt{Reason: what}, Note: &hoststate.Note{Text: what}}, true
	}
	if len(raw) > maxEntry {
		return decode(int64(len(raw)))
	}
	if json.Unmarshal([]byte(raw), &e) != nil {
		return e, false
	}
	if e.Halt != nil {
		cleanHalt(e.Halt)
	}
	if e.Note != nil {
		cleanNote(e.Note)
	}
	return e, true
}

// unqueue takes a resumed host off the queue, if Redis answers.
func (s *Store) unqueue(ctx context.Context, host string) {
	rctx, cancel := context.WithTimeout(ctx, s.set.cfg.Timeout)
	defer cancel()
	s.client.ZRem(rctx, s.queueKey(), host)
}

// Halts returns the latest halt record of every host halted now, newest
// first; see hoststate.HaltLog. It lists the hosts halted since records
// were kept; a host in the queue whose halt is gone (resumed some other
// way, or lost with Redis's data) is dropped from it. Records are
// bounded and cleaned when read as when written, whatever wrote them to
// Redis. Its errors are ctx.Err(), ErrCorrupt and ErrUnavailable.
func (s *Store) Halts(ctx context.Context, limit int) ([]hoststate.Halt, error) {
	if limit <= 0 {
		limit = 1000
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, max(s.set.cfg.Timeout, readTimeout))
	defer cancel()
	fail := func(err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return unavailable("halts", s.cause(err, start))
	}
	zs, err := s.client.ZRevRangeWithScores(rctx, s.queueKey(), 0, int64(limit)-1).Result()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			return nil, &corruptError{Key: s.queueKey(), Reason: "wrongtype"}
		}
		return nil, fail(err)
	}
	type pending struct {
		host string
		halt *redis.StringCmd
		log  *redis.Cmd
	}
	ps := make([]pending, 0, len(zs))
	_, err = s.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		for _, z := range zs {
			host, _ := z.Member.(string)
			k, err := s.keysOf(host)
			if err != nil {
				continue
			}
			if key, err := hostkey.Parse(host, hostkey.ByHost); err != nil || key != host {
				continue // not a key the chain makes: written by something else
			}
			ps = append(ps, pending{host: host, halt: p.Get(rctx, k.halt), log: head(rctx, p, s.logKey(host), 1)})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		var re redis.Error
		if !errors.As(err, &re) {
			return nil, fail(err)
		}
	}
	out := make([]hoststate.Halt, 0, len(ps))
	var stale []any
	for _, p := range ps {
		if p.halt.Err() != nil {
			if errors.Is(p.halt.Err(), redis.Nil) {
				stale = append(stale, p.host)
			}
			continue
		}
		h := hoststate.Halt{Host: p.host}
		if us, err := p.halt.Int64(); err == nil {
			h.Time = micros(us)
		}
		for _, raw := range items(p.log) {
			if e, ok := decode(raw); ok && e.Kind == "halt" && e.Halt != nil {
				t := h.Time
				h = *e.Halt
				if h.Time.IsZero() {
					h.Time = t
				}
				h.Host = p.host
				break
			}
		}
		out = append(out, h)
	}
	if len(stale) > 0 {
		s.client.ZRem(rctx, s.queueKey(), stale...)
	}
	return out, nil
}

// History returns host's records, newest first; see hoststate.HaltLog.
// Records are bounded and cleaned when read as when written.
// Its errors are hostkey's, ErrInvalidHost, ctx.Err() and ErrUnavailable.
func (s *Store) History(ctx context.Context, host string) ([]hoststate.Halt, []hoststate.Note, error) {
	key, err := s.recordKey(host)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, max(s.set.cfg.Timeout, readTimeout))
	defer cancel()
	var hc, nc *redis.Cmd
	_, err = s.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		hc = head(rctx, p, s.logKey(key), haltrec.MaxHistory)
		nc = head(rctx, p, s.noteKey(key), haltrec.MaxHistory)
		return nil
	})
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			return nil, nil, &corruptError{Key: s.logKey(key), Reason: "wrongtype"}
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, nil, cerr
		}
		return nil, nil, unavailable("history", s.cause(err, start))
	}
	var halts []hoststate.Halt
	var notes []hoststate.Note
	for _, r := range items(hc) {
		if e, ok := decode(r); ok && e.Halt != nil {
			e.Halt.Host = key
			halts = append(halts, *e.Halt)
		}
	}
	for _, r := range items(nc) {
		if e, ok := decode(r); ok && e.Note != nil {
			e.Note.Host = key
			notes = append(notes, *e.Note)
		}
	}
	return halts, notes, nil
}
