package hoststate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/hoststate/hoststatetest"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/internal/hostmem"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/ratelimit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memoryHarness runs a scenario on a Memory inside a synctest bubble, whose
// fake clock both the breakers and the limiter read.
func memoryHarness(t *testing.T, cfg hoststate.Config, body func(*testing.T, hoststatetest.Env)) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMemory(cfg)
		body(t, hoststatetest.Env{
			Store:   m,
			Now:     time.Now,
			Advance: time.Sleep,
			Evict:   func() { hostmem.Evict(m) },
		})
	})
}

func TestScenarios(t *testing.T) {
	hoststatetest.Run(t, memoryHarness)
}

func TestStateUnknownHost(t *testing.T) {
	m := mustMemory(hoststate.Config{})
	st, err := m.Status(context.Background(), "never.example")
	want := hoststate.Status{Host: "never.example", Breaker: breaker.Closed, PerMinute: 60}
	if err != nil || st != want {
		t.Errorf("State(unknown) = %+v, %v; want %+v", st, err, want)
	}
	if n := hostmem.Len(m); n != 0 {
		t.Errorf("Len() = %d after State of an unknown host, want 0", n)
	}
}

func TestAdmitCanceled(t *testing.T) {
	m := mustMemory(hoststate.Config{Breaker: breaker.Config{FailureThreshold: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Admit(ctx, "a.example"); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit(canceled ctx) = %v, want context.Canceled", err)
	}
	if c := m.Counts(); c != (breaker.Counts{Closed: 1}) {
		t.Errorf("Counts() = %+v, want one closed host", c)
	}
}

// TestAdmitAtGiven: the in-memory store's AdmitAt (the chain's Admit at
// the time its attempt began) paces at the time it is given, not at a
// clock reading of its own, and reports it as the Admission's At: at 60 a
// minute, a second admission at the same time waits a second, and one
// three seconds later (the clock of the bubble standing still) none.
func TestAdmitAtGiven(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 60, Burst: 1}})
		at, ok := m.(interface {
			AdmitAt(ctx context.Context, host string, now time.Time) (hoststate.Admission, error)
		})
		if !ok {
			t.Fatal("the in-memory store has no AdmitAt")
		}
		ctx := context.Background()
		start := time.Now()
		for _, tt := range []struct {
			after time.Duration
			wait  time.Duration
		}{
			{0, 0},
			{0, time.Second},
			{3 * time.Second, 0},
		} {
			now := start.Add(tt.after)
			adm, err := at.AdmitAt(ctx, "a.example", now)
			if err != nil || adm.Wait != tt.wait || !adm.At.Equal(now) {
				t.Errorf("AdmitAt(start+%v) = %+v, %v; want Wait %v, At %v", tt.after, adm, err, tt.wait, now)
			}
		}
	})
}

// TestConcurrent hammers 1,000 hosts from 64 goroutines with random
// outcomes and every method; run it with -race.
func TestConcurrent(t *testing.T) {
	m := mustMemory(hoststate.Config{
		Breaker: breaker.Config{OpenTimeout: time.Millisecond, IdleTTL: 5 * time.Millisecond},
		Limit:   ratelimit.Config{PerMinute: 6e6, Burst: 10, IdleTTL: 5 * time.Millisecond},
	})
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	outcomes := []classify.Outcome{classify.OK, classify.OK, classify.OK, classify.OK, classify.Transient,
		classify.Throttled, classify.Permanent, classify.Canceled, classify.Refused}
	ctx := context.Background()
	var admitted, refused, halts atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 2000 {
				h := hosts[r.IntN(len(hosts))]
				switch i % 100 {
				case 0:
					m.Resume(ctx, h)
					continue
				case 1:
					m.SetCeiling(ctx, h, float64(r.IntN(1000)))
				case 2:
					m.Status(ctx, h)
				case 3:
					m.Counts()
				case 4:
					hostmem.Evict(m)
				}
				a, err := m.Admit(ctx, h)
				if err != nil {
					if !errors.Is(err, sentinel.ErrOpen) && !errors.Is(err, sentinel.ErrHalted) {
						t.Errorf("Admit(%q) = %v", h, err)
					}
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				eff, err := m.Record(ctx, h, a, classify.Result{Outcome: outcomes[r.IntN(len(outcomes))]})
				if err != nil {
					t.Errorf("Record(%q) = %v", h, err)
				}
				if eff.Halted {
					halts.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() == 0 || refused.Load() == 0 || halts.Load() == 0 {
		t.Errorf("admitted %d, refused %d, halted %d times; want all > 0", admitted.Load(), refused.Load(), halts.Load())
	}
	c := m.Counts()
	if total := c.Closed + c.HalfOpen + c.Open + c.Halted; total == 0 || total > len(hosts) {
		t.Errorf("Counts() = %+v, want between 1 and %d hosts", c, len(hosts))
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// maxRetainedPerHost bounds what the store keeps per evicted host. It
// measures 0.2-0.3 B/host (the maps are rebuilt small; what remains is
// the empty maps and shards), so a store that kept even one pointer-sized
// word per evicted host, or a tenfold regression, fails.
const maxRetainedPerHost = 1.0

// TestMemoryFlat: 100,000 hosts touched once each are held in under 1 KiB
// each, and after idle eviction the store retains under maxRetainedPerHost
// bytes per host.
func TestMemoryFlat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		live, retained := touchAndEvict(t, 100_000)
		t.Logf("100,000 hosts: %.0f B/host live, %.1f B/host retained after eviction", live, retained)
		if live > 1024 {
			t.Errorf("live state = %.0f B/host, want <= 1024", live)
		}
		if retained > maxRetainedPerHost {
			t.Errorf("retained after eviction = %.2f B/host, want <= %.1f", retained, maxRetainedPerHost)
		}
	})
}

func touchAndEvict(t testing.TB, n int) (live, retained float64) {
	before := heapInUse()
	m := mustMemory(hoststate.Config{})
	ctx := context.Background()
	ok := classify.Result{Outcome: classify.OK}
	for i := range n {
		h := fmt.Sprintf("host-%06d.example.com", i)
		a, err := m.Admit(ctx, h)
		if err != nil {
			t.Fatalf("Admit(%q) = %v", h, err)
		}
		m.Record(ctx, h, a, ok)
	}
	held := heapInUse()
	if got := hostmem.Len(m); got != 2*n {
		t.Fatalf("Len() = %d after touching %d hosts, want %d", got, n, 2*n)
	}
	time.Sleep(circuits.DefaultConfig().IdleTTL)
	if got := hostmem.Evict(m); got != 2*n {
		t.Fatalf("Evict() = %d, want %d", got, 2*n)
	}
	after := heapInUse()
	runtime.KeepAlive(m)
	retainedBytes := int64(after) - int64(before)
	return float64(held-before) / float64(n), max(float64(retainedBytes), 0) / float64(n)
}

// BenchmarkAdmitRecord is one attempt's cost in the store: an Admit and
// the Record of an OK, to one host again and again (a crawl of one site,
// its state in cache), and round 1000 hosts.
func BenchmarkAdmitRecord(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			m := mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e12}})
			hosts := make([]string, n)
			for i := range hosts {
				hosts[i] = fmt.Sprintf("h%d.example", i)
			}
			ctx := context.Background()
			ok := classify.Result{Outcome: classify.OK}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h := hosts[i%len(hosts)]
				i++
				a, err := m.Admit(ctx, h)
				if err != nil {
					b.Fatal(err)
				}
				m.Record(ctx, h, a, ok)
			}
		})
	}
}

// BenchmarkAdmitAtRecord is one attempt's cost in the store as the chain
// pays it, to one host: the chain reads the clock when the attempt begins
// (for its retry budget), then Admit reads it again, or AdmitAt takes the
// chain's reading; then the Record of an OK.
func BenchmarkAdmitAtRecord(b *testing.B) {
	for _, given := range []bool{false, true} {
		name := "Admit"
		if given {
			name = "AdmitAt"
		}
		b.Run(name, func(b *testing.B) {
			m := mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e12}})
			at := m.(interface {
				AdmitAt(ctx context.Context, host string, now time.Time) (hoststate.Admission, error)
			})
			ctx := context.Background()
			ok := classify.Result{Outcome: classify.OK}
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now() // the chain's, read for its retry budget
				var (
					a   hoststate.Admission
					err error
				)
				if given {
					a, err = at.AdmitAt(ctx, "h.example", start)
				} else {
					a, err = m.Admit(ctx, "h.example")
				}
				if err != nil {
					b.Fatal(err)
				}
				m.Record(ctx, "h.example", a, ok)
			}
		})
	}
}

func BenchmarkAdmitRecordParallel(b *testing.B) {
	m := mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e12}})
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	ctx := context.Background()
	ok := classify.Result{Outcome: classify.OK}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(hosts))
		for pb.Next() {
			h := hosts[i%len(hosts)]
			i++
			a, err := m.Admit(ctx, h)
			if err != nil {
				b.Error(err)
				return
			}
			m.Record(ctx, h, a, ok)
		}
	})
}

// BenchmarkMemory100kHosts reports the heap per host while 100,000 hosts
// touched once each are held (TestMemoryFlat measures what eviction leaves).
func BenchmarkMemory100kHosts(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	ok := classify.Result{Outcome: classify.OK}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("host-%06d.example.com", i)
	}
	var live float64
	for b.Loop() {
		before := heapInUse()
		m := mustMemory(hoststate.Config{})
		for _, h := range names {
			a, err := m.Admit(ctx, h)
			if err != nil {
				b.Fatal(err)
			}
			m.Record(ctx, h, a, ok)
		}
		live = float64(heapInUse()-before) / n
		runtime.KeepAlive(m)
	}
	b.ReportMetric(live, "B/host")
}

// TestAdmitAt: an admission says when the store read the clock for it.
func TestAdmitAt(t *testing.T) {
	m := mustMemory(hoststate.Config{})
	before := time.Now()
	a, err := m.Admit(t.Context(), "h.test")
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if a.At.Before(before) || a.At.After(after) {
		t.Errorf("Admit: At = %v, want between %v and %v", a.At, before, after)
	}
	if _, err := m.Record(t.Context(), "h.test", a, classify.Result{Outcome: classify.OK}); err != nil {
		t.Fatal(err)
	}
}
