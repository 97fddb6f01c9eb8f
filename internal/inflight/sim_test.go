package inflight_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/inflight"
)

var (
	simTrace = flag.Bool("sim.trace", false, "log the simulated crawls")
	simEvery = flag.Duration("sim.every", 50*time.Millisecond, "how often -sim.trace logs")
)

// simServer is a server that serves workers requests at once, each in
// service, and queues the rest, first come first served; workers 0 serves
// every request at once (a far host: its latency is service, whatever the
// load).
type simServer struct {
	workers int
	service time.Duration
}

// simCase is a crawl of a simServer by a fleet of clients, each with its
// own Limits and goroutines attempts that want to be in flight, all paced
// together at perSec (the pacing rate the fleet shares).
type simCase struct {
	name       string
	server     simServer
	clients    int
	goroutines int
	max        int
	perSec     float64
	pages      int
	// late: client i starts i × late after the first; shared: each
	// admission tells the client the fleet's base latency (the lowest
	// latency any client saw, as a shared store learns it).
	late   time.Duration
	shared bool
	// bars: the most in flight at the server, its p95 latency over its
	// service time, the throughput over the server's capacity (or over the
	// pace, for a server without a worker limit).
	maxAt    int
	p95Over  float64
	minShare float64
}

// simResult is what the server saw.
type simResult struct {
	maxAt      int
	p95        time.Duration
	throughput float64 // answers a second, from the first arrival to the last answer
	peakLimit  int
}

type simReq struct {
	client  int
	arrived time.Time
	done    time.Time
	rel     func()
}

// simulate runs c on a fake clock in steps of a millisecond.
func simulate(t *testing.T, c simCase) simResult {
	t.Helper()
	const step = time.Millisecond
	clk := newClock()
	start := clk.Now()
	limits := make([]*inflight.Limits, c.clients)
	for i := range limits {
		limits[i] = inflight.New(inflight.Config{Max: c.max, Now: clk.Now})
		limits[i].SetRate("h", c.perSec*60, 0)
	}
	outstanding := make([]int, c.clients)
	left := make([]int, c.clients)
	for i := range c.pages {
		left[i%c.clients]++
	}
	var (
		queue, busy []*simReq
		lat         []time.Duration
		fleetBase   time.Duration
		paceNext    = start
		spacing     = time.Duration(float64(time.Second) / c.perSec)
		res         simResult
		answered    int
		last        time.Time
		turn        int
	)
	for answered < c.pages {
		now := clk.Now()
		if now.Sub(start) > time.Hour {
			t.Fatalf("%s: %d of %d answered after an hour", c.name, answered, c.pages)
		}
		// Answers due.
		busy = slices.DeleteFunc(busy, func(r *simReq) bool {
			if r.done.After(now) {
				return false
			}
			limits[r.client].Observe("h", now.Sub(r.arrived))
			if d := now.Sub(r.arrived); fleetBase == 0 || d < fleetBase {
				fleetBase = d
			}
			r.rel()
			outstanding[r.client]--
			lat = append(lat, now.Sub(r.arrived))
			answered++
			last = now
			return true
		})
		for len(queue) > 0 && (c.server.workers == 0 || len(busy) < c.server.workers) {
			queue[0].done = now.Add(c.server.service)
			busy = append(busy, queue[0])
			queue = queue[1:]
		}
		// Sends: one client after another, at most one a pacing interval.
		for k := range c.clients {
			i := (turn + k) % c.clients
			l := limits[i]
			if now.Sub(start) < time.Duration(i)*c.late {
				continue
			}
			for outstanding[i] < c.goroutines && left[i] > 0 && !paceNext.After(now) {
				if c.shared {
					l.SetRate("h", c.perSec*60, fleetBase)
				}
				if st := l.Of("h"); st.InFlight >= st.Limit || st.Waiting > 0 {
					break
				}
				rel, waited, err := l.Acquire(t.Context(), "h")
				if err != nil || waited {
					t.Fatalf("Acquire under the limit: waited %v, err %v", waited, err)
				}
				paceNext = paceNext.Add(spacing)
				if paceNext.Before(now) {
					paceNext = now
				}
				outstanding[i]++
				left[i]--
				r := &simReq{client: i, arrived: now, rel: rel}
				if c.server.workers == 0 || len(busy) < c.server.workers {
					r.done = now.Add(c.server.service)
					busy = append(busy, r)
				} else {
					queue = append(queue, r)
				}
				res.maxAt = max(res.maxAt, len(busy)+len(queue))
			}
		}
		turn++
		if *simTrace && now.Sub(start)%(*simEvery) == 0 {
			var b strings.Builder
			for _, l := range limits {
				st := l.Of("h")
				fmt.Fprintf(&b, " [n%d lim%d win%.1f base%v lat%v served%.1f]", st.InFlight, st.Limit, st.Window, st.Base.Round(time.Millisecond), st.Latency.Round(time.Millisecond), st.Served)
			}
			t.Logf("%v at server %d:%s", now.Sub(start), len(busy)+len(queue), b.String())
		}
		clk.Add(step)
	}
	for _, l := range limits {
		res.peakLimit = max(res.peakLimit, l.Of("h").Peak)
	}
	slices.Sort(lat)
	res.p95 = lat[min(len(lat)*95/100, len(lat)-1)]
	res.throughput = float64(c.pages) / last.Sub(start).Seconds()
	return res
}

// TestSimulatedSlowServer crawls simulated servers on a fake clock: a
// server that queues what its workers cannot serve yet must see at most
// about Headroom times its workers in flight, from its first contact, at
// nearly its full throughput, whether one client or a fleet of them (each
// with its own Limits) crawls it; a far host that serves any load at a
// steady latency must be crawled at its full pace.
func TestSimulatedSlowServer(t *testing.T) {
	for _, c := range []simCase{
		{name: "fleet of 3, 4 workers × 100ms", server: simServer{4, 100 * time.Millisecond}, clients: 3, goroutines: 16, max: 16, perSec: 100, pages: 900,
			maxAt: 8, p95Over: 3, minShare: 0.9},
		// Clients joining a server the first already queues: each takes
		// the queue it meets for the host's base latency, unless the
		// store tells it the fleet's.
		{name: "fleet of 3 joining 2s apart, 4 workers × 100ms, shared base", server: simServer{4, 100 * time.Millisecond}, clients: 3, goroutines: 16, max: 16, perSec: 100, pages: 1500,
			late: 2 * time.Second, shared: true, maxAt: 8, p95Over: 3, minShare: 0.9},
		{name: "one client, 2 workers × 100ms", server: simServer{2, 100 * time.Millisecond}, clients: 1, goroutines: 16, max: 16, perSec: 100, pages: 600,
			maxAt: 6, p95Over: 3, minShare: 0.9},
		{name: "one client, 4 workers × 100ms, 48 goroutines", server: simServer{4, 100 * time.Millisecond}, clients: 1, goroutines: 48, max: 48, perSec: 100, pages: 900,
			maxAt: 8, p95Over: 3, minShare: 0.9},
		// 30s: the slow start at first contact costs about two of its
		// round trips of a second.
		{name: "one client, 8 workers × 1s, paced 10/s", server: simServer{8, time.Second}, clients: 1, goroutines: 32, max: 16, perSec: 10, pages: 240,
			maxAt: 16, p95Over: 3, minShare: 0.9},
		{name: "far host, 1s, paced 10/s", server: simServer{0, time.Second}, clients: 1, goroutines: 32, max: 16, perSec: 10, pages: 300,
			maxAt: 15, p95Over: 1, minShare: 0.9},
		{name: "fleet of 3, far host, 1s, paced 10/s", server: simServer{0, time.Second}, clients: 3, goroutines: 16, max: 16, perSec: 10, pages: 300,
			maxAt: 16, p95Over: 1, minShare: 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := simulate(t, c)
			capacity := c.perSec
			if c.server.workers > 0 {
				capacity = min(capacity, float64(c.server.workers)/c.server.service.Seconds())
			}
			share := r.throughput / capacity
			t.Logf("server: max in flight %d, p95 %v; throughput %.2f/s (%.2f× capacity); peak limit %d", r.maxAt, r.p95, r.throughput, share, r.peakLimit)
			if r.maxAt > c.maxAt {
				t.Errorf("the server saw up to %d in flight, want at most %d", r.maxAt, c.maxAt)
			}
			if bound := time.Duration(c.p95Over * float64(c.server.service)); r.p95 > bound {
				t.Errorf("p95 %v, want at most %v", r.p95, bound)
			}
			if share < c.minShare {
				t.Errorf("throughput %.2f× capacity, want at least %.2f×", share, c.minShare)
			}
		})
	}
}
