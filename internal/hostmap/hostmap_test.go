package hostmap

import (
	"fmt"
	"testing"
	"time"
)

// item is a test entry: last used at used, kept while idle if keep.
type item struct {
	used time.Time
	keep bool
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestMap(ttl time.Duration) *Map[item, int] {
	return New[item, int](Config[item]{
		IdleTTL: ttl,
		Used:    func(e *item) time.Time { return e.used },
		Keep:    func(e *item, now time.Time) bool { return e.keep },
	})
}

// put adds host to m, last used at used.
func put(m *Map[item, int], host string, used time.Time, keep bool) {
	sh := m.Shard(host)
	sh.Lock()
	sh.Put(host, &item{used: used, keep: keep})
	sh.Unlock()
}

func has(m *Map[item, int], host string) bool {
	sh := m.Shard(host)
	sh.Lock()
	defer sh.Unlock()
	return sh.Get(host) != nil
}

func TestEvict(t *testing.T) {
	const ttl = 10 * time.Minute
	tests := []struct {
		name      string
		ttl       time.Duration
		idle      time.Duration // since last use, at Evict
		keep      bool
		wantGone  bool
		wantCount int
	}{
		{"fresh", ttl, 0, false, false, 0},
		{"just short of idle", ttl, ttl - time.Nanosecond, false, false, 0},
		{"idle", ttl, ttl, false, true, 1},
		{"long idle", ttl, 5 * ttl, false, true, 1},
		{"idle but kept", ttl, 5 * ttl, true, false, 0},
		{"never evict (negative TTL)", -1, 5 * ttl, false, false, 0},
		{"never evict (zero TTL)", 0, 5 * ttl, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMap(tt.ttl)
			put(m, "a.example", t0, tt.keep)
			if got := m.Evict(t0.Add(tt.idle)); got != tt.wantCount {
				t.Errorf("Evict(+%v) = %d, want %d", tt.idle, got, tt.wantCount)
			}
			if got := has(m, "a.example"); got == tt.wantGone {
				t.Errorf("after Evict(+%v): held = %v, want %v", tt.idle, got, !tt.wantGone)
			}
		})
	}
}

func TestMaybeSweep(t *testing.T) {
	const ttl = 10 * time.Minute
	tests := []struct {
		name      string
		lastSweep time.Duration // after t0
		at        time.Duration // after t0
		wantGone  bool
	}{
		{"idle, swept half a TTL ago", 0, ttl, true},
		{"idle, swept just now", ttl - time.Minute, ttl, false},
		{"idle, swept just under half a TTL ago", ttl/2 + time.Nanosecond, ttl, false},
		{"not idle", -ttl, ttl / 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMap(ttl)
			put(m, "a.example", t0, false)
			sh := m.Shard("a.example")
			sh.Lock()
			m.sweep(sh, t0.Add(tt.lastSweep))
			m.MaybeSweep(sh, t0.Add(tt.at))
			sh.Unlock()
			if got := has(m, "a.example"); got == tt.wantGone {
				t.Errorf("held = %v, want %v", got, !tt.wantGone)
			}
		})
	}
}

func TestLen(t *testing.T) {
	tests := []struct {
		name   string
		hosts  int
		evict  time.Duration
		wantN  int
		kept   int // of the hosts, how many are kept while idle
		wantEv int
	}{
		{"empty", 0, 0, 0, 0, 0},
		{"some", 100, 0, 100, 0, 0},
		{"all evicted", 100, time.Hour, 0, 0, 100},
		{"some kept", 100, time.Hour, 10, 10, 90},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMap(time.Minute)
			for i := range tt.hosts {
				put(m, fmt.Sprintf("h%d.example", i), t0, i < tt.kept)
			}
			if tt.evict > 0 {
				if got := m.Evict(t0.Add(tt.evict)); got != tt.wantEv {
					t.Errorf("Evict() = %d, want %d", got, tt.wantEv)
				}
			}
			if got := m.Len(); got != tt.wantN {
				t.Errorf("Len() = %d, want %d", got, tt.wantN)
			}
		})
	}
}

// TestRebuild: a swept map that has shrunk to a quarter of its peak is
// replaced by a new one sized to what is left; a smaller shrink keeps it.
func TestRebuild(t *testing.T) {
	tests := []struct {
		name        string
		peak, keep  int
		wantRebuilt bool
	}{
		{"shrunk to a quarter", 400, 100, true},
		{"shrunk to nothing", 400, 0, true},
		{"shrunk to just over a quarter", 400, 101, false},
		{"small peak", minRebuild - 1, 0, false},
		{"smallest peak rebuilt", minRebuild, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMap(time.Minute)
			sh := &m.shards[0]
			sh.Lock()
			defer sh.Unlock()
			for i := range tt.peak {
				sh.Put(fmt.Sprintf("h%d", i), &item{used: t0, keep: i < tt.keep})
			}
			if sh.peak != tt.peak {
				t.Fatalf("peak = %d after %d Puts, want %d", sh.peak, tt.peak, tt.peak)
			}
			if got, want := m.sweep(sh, t0.Add(time.Hour)), tt.peak-tt.keep; got != want {
				t.Errorf("sweep() = %d, want %d", got, want)
			}
			rebuilt := sh.peak != tt.peak
			if rebuilt != tt.wantRebuilt {
				t.Errorf("rebuilt = %v (peak %d), want %v", rebuilt, sh.peak, tt.wantRebuilt)
			}
			if rebuilt && sh.peak != tt.keep {
				t.Errorf("peak after rebuild = %d, want %d", sh.peak, tt.keep)
			}
			if n := len(sh.m); n != tt.keep {
				t.Errorf("len = %d after sweep, want %d", n, tt.keep)
			}
			for i := range tt.keep {
				if sh.Get(fmt.Sprintf("h%d", i)) == nil {
					t.Errorf("Get(h%d) = nil after sweep, want the kept entry", i)
				}
			}
		})
	}
}

func TestLocalAndAll(t *testing.T) {
	m := newTestMap(time.Minute)
	want := map[string]bool{}
	for i := range 200 {
		h := fmt.Sprintf("h%d.example", i)
		want[h] = true
		sh := m.Shard(h)
		sh.Lock()
		sh.Put(h, &item{used: t0})
		sh.Local++
		sh.Unlock()
	}
	got, local := 0, 0
	for sh := range m.Shards() {
		sh.Lock()
		for h, e := range sh.All() {
			if !want[h] || e == nil {
				t.Errorf("All() yielded %q, %v; want a host that was Put", h, e)
			}
			got++
		}
		local += sh.Local
		sh.Unlock()
	}
	if got != len(want) || local != len(want) {
		t.Errorf("All() yielded %d hosts, Local sums to %d; want %d each", got, local, len(want))
	}
}

// BenchmarkGet is a locked lookup of a host's entry: the same host again
// and again (one site crawled), and hosts in turn round a shard.
func BenchmarkGet(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			m := New[int, struct{}](Config[int]{})
			hosts := make([]string, n)
			for i := range hosts {
				hosts[i] = fmt.Sprintf("h%d.example", i)
				sh := m.Shard(hosts[i])
				sh.Lock()
				sh.Put(hosts[i], new(int))
				sh.Unlock()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h := hosts[i%n]
				i++
				sh := m.Shard(h)
				sh.Lock()
				if sh.Get(h) == nil {
					b.Fatal("no entry")
				}
				sh.Unlock()
			}
		})
	}
}
