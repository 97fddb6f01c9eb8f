package pacing_test

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
)

// A limiter model answers one request that arrives at t: ok for 200
// (after wait), not ok for 429 (at once). The models imitate the real
// limiters that the root package's TestConvergesOn* tests run (nginx's
// limit_req, HAProxy's stick table); these simulations only explore the
// algorithm on a fake clock, quickly.
type limiter interface {
	allow(t time.Duration) (wait time.Duration, ok bool)
}

// leaky is nginx's limit_req (ngx_http_limit_req_module's arithmetic):
// an excess, drained at rate a second and raised by one by every request
// (the first one from a new client leaves it at zero); a request that
// would raise it above burst is refused and changes nothing. With nodelay
// a request allowed is answered at once; without (delay), it is held
// until the excess drains, excess/rate seconds.
type leaky struct {
	rate, burst float64
	delay       bool
	excess      float64
	last        time.Duration
	seen        bool
}

func (l *leaky) allow(t time.Duration) (time.Duration, bool) {
	e := 0.0
	if l.seen {
		e = max(l.excess-l.rate*(t-l.last).Seconds()+1, 0)
	}
	if e > l.burst+1e-9 {
		return 0, false
	}
	l.excess, l.last, l.seen = e, t, true
	if !l.delay {
		return 0, true
	}
	return time.Duration(e / l.rate * float64(time.Second)), true
}

// window is HAProxy's http_req_rate over a period: the current period's
// count plus the previous one's weighted by what is left of the period,
// every request counted, refused ones too.
type window struct {
	period time.Duration
	limit  int
	start  time.Duration // of the current period
	curr   float64
	prev   float64
}

func (w *window) allow(t time.Duration) (time.Duration, bool) {
	for t >= w.start+w.period {
		if t >= w.start+2*w.period {
			w.prev, w.curr = 0, 0
			w.start = t - (t-w.start)%w.period
			break
		}
		w.prev, w.curr = w.curr, 0
		w.start += w.period
	}
	w.curr++
	rate := w.curr + w.prev*float64(w.period-(t-w.start))/float64(w.period)
	return 0, rate <= float64(w.limit)
}

var simTrace = false

type simEvent struct {
	at     time.Duration
	worker int
	kind   simKind
	res    pacing.Reservation // send
	ok     bool               // answer
	lat    time.Duration      // answer: its time to headers
}

type simKind int

const (
	simReserve simKind = iota
	simSend
	simAnswer
)

type simQueue []simEvent

func (q simQueue) Len() int           { return len(q) }
func (q simQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q simQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simResult struct {
	urls, attempts, refused int
	elapsed                 time.Duration
}

func (r simResult) ratio(perSecond float64) float64 {
	return float64(r.urls) / r.elapsed.Seconds() / perSecond
}
func (r simResult) share() float64 { return float64(r.refused) / float64(r.attempts) }

// simulate crawls urls pages of one host with workers workers through s
// (on clock c) against lim, answering after latency (and the limiter's
// wait), every 429 with retryAfter. A worker whose reservation's epoch is
// stale when its slot comes reserves again, as the chain does.
func simulate(s *pacing.Set, c *clock, lim limiter, urls, workers int, latency, retryAfter time.Duration, rng *rand.Rand) simResult {
	start := c.Now()
	q := &simQueue{}
	next := 0
	for w := range workers {
		heap.Push(q, simEvent{worker: w})
	}
	var r simResult
	pending := make([]bool, workers) // the worker holds a URL to retry
	for q.Len() > 0 {
		ev := heap.Pop(q).(simEvent)
		now := start.Add(ev.at)
		if now.After(c.Now()) {
			c.t = now
		}
		switch ev.kind {
		case simReserve:
			if !pending[ev.worker] {
				if next == urls {
					continue
				}
				next++
				pending[ev.worker] = true
			}
			res, err := s.Reserve(context.Background(), host)
			if err != nil {
				panic(err)
			}
			// A timer fires late by up to half a millisecond, a loaded
			// machine's goroutine runs up to 20ms late now and then.
			late := time.Duration(rng.Int64N(int64(500 * time.Microsecond)))
			if rng.IntN(20) == 0 {
				late += time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
			}
			heap.Push(q, simEvent{at: ev.at + res.Wait + late, worker: ev.worker, kind: simSend, res: res})
		case simSend:
			if s.Status(host).Epoch != ev.res.Epoch {
				s.Observe(host, classify.Result{Outcome: classify.Canceled})
				heap.Push(q, simEvent{at: ev.at, worker: ev.worker})
				continue
			}
			r.attempts++
			wait, ok := lim.allow(ev.at)
			heap.Push(q, simEvent{at: ev.at + wait + latency, worker: ev.worker, kind: simAnswer, ok: ok, lat: wait + latency})
		case simAnswer:
			if ev.ok {
				s.Observe(host, classify.Result{Outcome: classify.OK, Latency: ev.lat})
				pending[ev.worker] = false
				r.urls++
				r.elapsed = ev.at
			} else {
				r.refused++
				if simTrace {
					fmt.Printf("429 at %v rate %.1f\n", ev.at, s.Status(host).PerMinute)
				}
				s.Observe(host, classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: retryAfter})
			}
			heap.Push(q, simEvent{at: ev.at, worker: ev.worker})
		}
	}
	return r
}

// TestConvergesSimulated runs the crawl — 8 workers starting too
// fast (600/min, bursts of 5), two minutes' worth of URLs at the allowed
// rate — against models of the common limiters, on a fake clock: every
// cell must stay at or below 2 % refused and reach 0.9× the allowed rate.
func TestConvergesSimulated(t *testing.T) {
	type cell struct {
		name       string
		lim        func() limiter
		perSecond  float64
		retryAfter time.Duration
		// maxShare and minRatio are the bar: the 2 % and 0.9×,
		// except where noted.
		maxShare, minRatio float64
	}
	var cells []cell
	for _, ps := range []float64{2, 10} {
		cells = append(cells,
			cell{fmt.Sprintf("nginx-nodelay-%v", ps), func() limiter { return &leaky{rate: ps, burst: 1} }, ps, 2 * time.Second, 0.02, 0.9},
			cell{fmt.Sprintf("nginx-delay-%v", ps), func() limiter { return &leaky{rate: ps, burst: 1, delay: true} }, ps, 2 * time.Second, 0.02, 0.9},
			cell{fmt.Sprintf("haproxy-window-%v", ps), func() limiter { return &window{period: 10 * time.Second, limit: int(10 * ps)} }, ps, 2 * time.Second, 0.02, 0.9},
		)
	}
	for _, cl := range cells {
		t.Run(cl.name, func(t *testing.T) {
			c := newClock()
			s := newSet(c, ratelimit.Config{PerMinute: 600, Burst: 5})
			urls := int(120 * cl.perSecond)
			r := simulate(s, c, cl.lim(), urls, 8, time.Millisecond, cl.retryAfter, rand.New(rand.NewPCG(1, 2)))
			t.Logf("%d URLs in %v, %d attempts, %d refused (%.1f%%), %.2f× the allowed rate; final %+v",
				r.urls, r.elapsed.Round(time.Millisecond), r.attempts, r.refused, 100*r.share(), r.ratio(cl.perSecond), s.Status(host))
			if r.share() > cl.maxShare || r.ratio(cl.perSecond) < cl.minRatio {
				t.Errorf("%.1f%% refused, %.2f× the allowed rate; want at most %.0f%%, at least %.2f×", 100*r.share(), r.ratio(cl.perSecond), 100*cl.maxShare, cl.minRatio)
			}
		})
	}
}
