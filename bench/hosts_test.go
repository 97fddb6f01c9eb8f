package bench

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/hostmem"
	"github.com/egresskit/egresskit/retry"
)

// numHosts is the number of distinct hosts BenchmarkHosts touches.
const numHosts = 100_000

// BenchmarkHosts sends one request to each of 100,000 distinct hosts
// through the chain (in-memory state and base transport, robots.txt off)
// and reports the heap the chain retains per host: while every host is
// tracked (live-B/host), and after the hosts have been idle for the state's
// IdleTTL and evicted (evicted-B/host); first-ns/host is the wall time of
// a host's first request. The breakers read the real clock, so the
// benchmark waits out the IdleTTL: an iteration takes a few seconds; run
// it with -benchtime=1x.
func BenchmarkHosts(b *testing.B) {
	var live, evicted, first float64
	b.ReportAllocs()
	for b.Loop() {
		// Every host must still be tracked when the touching ends, so the
		// IdleTTL is twice what touching is projected to take here, and
		// longer again if the machine slowed down while touching.
		_, scratch := newHostsChain(time.Hour)
		ttl := max(2*time.Second, 2*numHosts/calibrationHosts*touchHosts(scratch, calibrationHosts, 0))
		var (
			mem            hoststate.Memory
			client         *http.Client
			before, inUse  uint64
			start, touched time.Time
		)
		for try := 1; ; try++ {
			mem, client = newHostsChain(ttl)
			before = heapAfterGC()
			start = time.Now()
			touchHosts(client, numHosts, calibrationHosts)
			touched = time.Now()
			if n := hostmem.Len(mem); n == 2*numHosts {
				break
			} else if try == maxHostsTries {
				b.Fatalf("state holds %d host entries after touching %d hosts, want %d: touching took %v, longer than IdleTTL %v",
					n, numHosts, 2*numHosts, touched.Sub(start), ttl)
			}
			ttl = 3 * touched.Sub(start)
		}
		inUse = heapAfterGC()

		time.Sleep(time.Until(touched.Add(ttl + 10*time.Millisecond)))
		if n := hostmem.Evict(mem); n != 2*numHosts {
			b.Fatalf("Evict dropped %d host entries, want %d", n, 2*numHosts)
		}
		left := heapAfterGC()
		runtime.KeepAlive(client)

		live = (float64(inUse) - float64(before)) / numHosts
		evicted = (float64(left) - float64(before)) / numHosts
		first = float64(touched.Sub(start).Nanoseconds()) / numHosts
	}
	b.ReportMetric(live, "live-B/host")
	b.ReportMetric(evicted, "evicted-B/host")
	b.ReportMetric(first, "first-ns/host")
}

// maxHostsTries bounds the attempts BenchmarkHosts makes to touch every
// host within the IdleTTL.
const maxHostsTries = 3

// calibrationHosts is the number of hosts touched to project how long
// touching numHosts takes.
const calibrationHosts = 5_000

// newHostsChain returns the chain of BenchmarkHosts and its state, whose
// hosts are forgotten after idling for ttl.
func newHostsChain(ttl time.Duration) (hoststate.Memory, *http.Client) {
	cfg := neverBinds()
	cfg.Breaker = breaker.Config{IdleTTL: ttl}
	cfg.Limit.IdleTTL = ttl
	mem := mustMemory(cfg)
	return mem, &http.Client{Transport: mustChain(egresskit.Config{
		Base:         memTransport{},
		UserAgent:    userAgent,
		IgnoreRobots: true,
		Retry:        retry.Policy{MaxRetries: maxRetries, BaseDelay: baseDelay, MaxDelay: maxDelay},
		Store:        mem,
	})}
}

// touchHosts sends one request to each of n distinct hosts, numbered from
// offset, from GOMAXPROCS goroutines, and returns how long that took. It
// panics on a failed request: the in-memory base never fails.
func touchHosts(c *http.Client, n, offset int) time.Duration {
	start := time.Now()
	procs := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodGet, "http://bench.test/page", nil)
			if err != nil {
				panic(err)
			}
			req.Header.Set("User-Agent", userAgent)
			for i := p; i < n; i += procs {
				// A new string per host, as a crawler's URLs are: the
				// state keeps its own copy of the key.
				req.URL.Host = "h" + strconv.Itoa(offset+i) + ".bench.test"
				if err := fetch(c, req); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// heapAfterGC returns the bytes of live heap objects after a full
// collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
