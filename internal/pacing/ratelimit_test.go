package pacing_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const host = "example.com"

// clock is a fake clock for Config.Now.
type clock struct{ t time.Time }

func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *clock) Now() time.Time          { return c.t }
func (c *clock) Advance(d time.Duration) { c.t = c.t.Add(d) }
func newSet(c *clock, cfg ratelimit.Config) *pacing.Set {
	cfg.Now = c.Now
	return mustLimit(cfg)
}

func reserve(t *testing.T, s *pacing.Set, host string) time.Duration {
	t.Helper()
	r, err := s.Reserve(context.Background(), host)
	if err != nil {
		t.Fatalf("Reserve(%q) = %v", host, err)
	}
	return r.Wait
}

func observe(s *pacing.Set, host string, o classify.Outcome, retryAfter time.Duration) {
	s.Observe(host, classify.Result{Outcome: o, RetryAfter: retryAfter})
}

func TestReserve(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ratelimit.Config
		advance []time.Duration // before each Reserve
		want    []time.Duration
	}{
		{"default 60/min", ratelimit.Config{}, []time.Duration{0, 0, 0}, []time.Duration{0, time.Second, 2 * time.Second}},
		{"40/min", ratelimit.Config{PerMinute: 40}, []time.Duration{0, 0}, []time.Duration{0, 1500 * time.Millisecond}},
		{"refills", ratelimit.Config{}, []time.Duration{0, 0, 2 * time.Second}, []time.Duration{0, time.Second, 0}},
		{"first contact: one token", ratelimit.Config{Burst: 3}, []time.Duration{0, 0, 0}, []time.Duration{0, time.Second, 2 * time.Second}},
		{"burst 3 after idle", ratelimit.Config{Burst: 3}, []time.Duration{0, 10 * time.Second, 0, 0, 0}, []time.Duration{0, 0, 0, 0, time.Second}},
		{"override", ratelimit.Config{Overrides: map[string]float64{host: 6}}, []time.Duration{0, 0}, []time.Duration{0, 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			s := newSet(c, tt.cfg)
			for i, want := range tt.want {
				c.Advance(tt.advance[i])
				if got := reserve(t, s, host); got != want {
					t.Errorf("Reserve #%d = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// TestThrottle: a 429 with Retry-After 5s on a 40 rpm
// host pauses it for at least 5s and halves its rate to 20, not resets it.
func TestThrottle(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{PerMinute: 40})
	reserve(t, s, host)
	observe(s, host, classify.Throttled, 5*time.Second)
	st := s.Status(host)
	if st.PerMinute != 20 || st.PausedUntil.Sub(c.Now()) != 5*time.Second {
		t.Errorf("after 429 Retry-After 5s: rate %v, paused for %v; want 20, 5s", st.PerMinute, st.PausedUntil.Sub(c.Now()))
	}
	if got := reserve(t, s, host); got != 5*time.Second {
		t.Errorf("Reserve while paused = %v, want 5s", got)
	}
}

func TestThrottleTable(t *testing.T) {
	tests := []struct {
		name       string
		cfg        ratelimit.Config
		retryAfter []time.Duration // one 429 each, with advance of gap between
		gap        time.Duration
		wantRate   float64
		wantPause  time.Duration
	}{
		{"no retry-after pauses one interval", ratelimit.Config{}, []time.Duration{0}, 0, 30, 2 * time.Second},
		{"negative retry-after as none", ratelimit.Config{}, []time.Duration{-time.Second}, 0, 30, 2 * time.Second},
		{"retry-after capped", ratelimit.Config{}, []time.Duration{3 * time.Hour}, 0, 30, time.Hour},
		{"custom cap", ratelimit.Config{MaxPause: time.Minute}, []time.Duration{time.Hour}, 0, 30, time.Minute},
		{"429 while paused extends, no halving", ratelimit.Config{}, []time.Duration{10 * time.Second, 20 * time.Second}, time.Second, 30, 20 * time.Second},
		{"429 while paused never shortens", ratelimit.Config{}, []time.Duration{10 * time.Second, 0}, time.Second, 30, 9 * time.Second},
		// A host that never answered OK let nothing through that its
		// rate could be settled from: its second refusal in a row
		// (its first answer after the pause, as likely a stray as a
		// limit) lengthens the pause alone; the rate falls to a quarter
		// from the third.
		{"429 after pause, no OK ever: pause ×4, the rate kept", ratelimit.Config{}, []time.Duration{time.Second, time.Second}, 2 * time.Second, 30, 4 * time.Second},
		{"third 429 after pauses, no OK ever: a quarter, pause ×4", ratelimit.Config{}, []time.Duration{time.Second, time.Second, time.Second}, 5 * time.Second, 7.5, 16 * time.Second},
		{"floor", ratelimit.Config{Floor: 20}, []time.Duration{0, 0, 0}, time.Minute, 20, 32 * time.Second},
		{"floor above configured", ratelimit.Config{PerMinute: 10, Floor: 20}, []time.Duration{0}, 0, 10, 6 * time.Second},
		{"default floor 1/min", ratelimit.Config{}, []time.Duration{0, 0, 0, 0, 0, 0, 0, 0}, 2 * time.Hour, 1, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			s := newSet(c, tt.cfg)
			for i, ra := range tt.retryAfter {
				if i > 0 {
					c.Advance(tt.gap)
				}
				observe(s, host, classify.Throttled, ra)
			}
			st := s.Status(host)
			if st.PerMinute != tt.wantRate || st.PausedUntil.Sub(c.Now()) != tt.wantPause {
				t.Errorf("rate %v, pause %v; want %v, %v", st.PerMinute, st.PausedUntil.Sub(c.Now()), tt.wantRate, tt.wantPause)
			}
		})
	}
}

// okRun observes n OK outcomes, waiting out each Reserve.
func okRun(t *testing.T, c *clock, s *pacing.Set, n int) {
	t.Helper()
	for range n {
		c.Advance(reserve(t, s, host))
		observe(s, host, classify.OK, 0)
	}
}

// near reports whether two rates agree to 1e-9 relative.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// TestThrottleDrains: at 600/min with a burst of 5, a 429 with Retry-After
// 2s drains the bucket: the attempts reserved during the pause go out from
// its end one interval apart at the halved rate (200ms), never together,
// and reservations from before the pause are of an older epoch.
func TestThrottleDrains(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{PerMinute: 600, Burst: 5})
	before, err := s.Reserve(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	observe(s, host, classify.Throttled, 2*time.Second)
	st := s.Status(host)
	if st.Epoch != before.Epoch+1 || st.PerMinute != 300 {
		t.Fatalf("after the 429: epoch %d, rate %v; want %d, 300", st.Epoch, st.PerMinute, before.Epoch+1)
	}
	for i := range 6 {
		r, err := s.Reserve(context.Background(), host)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2*time.Second + time.Duration(i)*200*time.Millisecond; r.Wait != want || r.Epoch != st.Epoch {
			t.Errorf("reservation %d during the pause: %+v, want wait %v, epoch %d", i+1, r, want, st.Epoch)
		}
	}
	// A second 429 of the same episode extends the pause without halving,
	// and drains again from the new end.
	observe(s, host, classify.Throttled, 3*time.Second)
	if st2 := s.Status(host); st2.Epoch != st.Epoch+1 || st2.PerMinute != 300 {
		t.Errorf("after a second 429 of the episode: epoch %d, rate %v; want %d, 300", st2.Epoch, st2.PerMinute, st.Epoch+1)
	}
	if got := reserve(t, s, host); got != 3*time.Second {
		t.Errorf("reservation after the extension: wait %v, want 3s", got)
	}
}

// TestObserveFloored: a throttle reports floored only once the rate was
// already at the floor.
func TestObserveFloored(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{Floor: 15})
	for i, want := range []bool{false, false, false, true} {
		if got := s.Observe(host, classify.Result{Outcome: classify.Throttled}); got != want {
			t.Errorf("throttle %d at rate %v: floored %v, want %v", i+1, s.Status(host).PerMinute, got, want)
		}
		c.Advance(time.Minute) // past the pause: a new episode
	}
	if got := s.Observe(host, classify.Result{Outcome: classify.OK}); got {
		t.Error("an OK reported floored")
	}
}

func TestSetCeiling(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{})
	if err := s.SetCeiling(host, 30); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(host); st.PerMinute != 30 || st.Ceiling != 30 || st.Configured != 60 {
		t.Errorf("after SetCeiling(30): %+v, want rate 30, ceiling 30, configured 60", st)
	}
	reserve(t, s, host)
	if got := reserve(t, s, host); got != 2*time.Second {
		t.Errorf("Reserve under a 30/min ceiling = %v, want 2s", got)
	}
	if err := s.SetCeiling(host, 120); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(host); st.PerMinute != 30 || st.Ceiling != 120 {
		t.Errorf("after SetCeiling(120): %+v, want rate still 30", st)
	}
	if err := s.SetCeiling(host, 0); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(host); st.PerMinute != 30 || st.Ceiling != 0 {
		t.Errorf("after SetCeiling(0): %+v, want rate 30, no ceiling", st)
	}
	for _, bad := range []float64{-1, math.Inf(1), math.Inf(-1)} {
		if err := s.SetCeiling(host, bad); err != nil || s.Status(host).Ceiling != 0 {
			t.Errorf("SetCeiling(%v) = %v, ceiling %v; want no error, no ceiling", bad, err, s.Status(host).Ceiling)
		}
	}
	if err := s.SetCeiling(host, math.NaN()); !errors.Is(err, ratelimit.ErrInvalidRate) {
		t.Errorf("SetCeiling(NaN) = %v, want ErrInvalidRate", err)
	}

	// A ceiling below the floor wins over the floor.
	if err := s.SetCeiling("slow.example", 0.5); err != nil {
		t.Fatal(err)
	}
	observe(s, "slow.example", classify.Throttled, 0)
	if got := s.Status("slow.example").PerMinute; got != 0.5 {
		t.Errorf("429 under a 0.5/min ceiling: rate %v, want 0.5", got)
	}

	// Absurd Crawl-delays are bounded: one request a day at the slowest.
	if err := s.SetCeiling("glacial.example", 1e-12); err != nil {
		t.Fatal(err)
	}
	reserve(t, s, "glacial.example")
	if got := reserve(t, s, "glacial.example"); got < 24*time.Hour-time.Millisecond || got > 24*time.Hour {
		t.Errorf("Reserve under a 1e-12/min ceiling = %v, want 24h", got)
	}
}

func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustLimit(ratelimit.Config{})
		reserve(t, s, host)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := s.Reserve(ctx, host)
		var de *ratelimit.DeadlineError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &de) || de.Host != host || de.Wait != time.Second {
			t.Fatalf("Reserve past deadline = %v, want *DeadlineError{%q, 1s}", err, host)
		}
		if got, want := err.Error(), "ratelimit: wait of 1s for example.com exceeds the context deadline"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
		exact, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		if got, err := s.Reserve(exact, host); err != nil || got.Wait != time.Second {
			t.Errorf("Reserve with a deadline exactly at the slot = %v, %v; want 1s, nil (no token taken before)", got, err)
		}

		done, cancel3 := context.WithCancel(context.Background())
		cancel3()
		if _, err := s.Reserve(done, host); !errors.Is(err, context.Canceled) {
			t.Errorf("Reserve with a canceled context = %v, want context.Canceled", err)
		}
		if got := reserve(t, s, host); got != 2*time.Second {
			t.Errorf("Reserve after two refusals = %v, want 2s (they took no token)", got)
		}

		// While paused, the deadline is checked against the pause.
		observe(s, "paused.example", classify.Throttled, time.Minute)
		ctx4, cancel4 := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel4()
		if _, err := s.Reserve(ctx4, "paused.example"); !errors.As(err, &de) || de.Wait != time.Minute {
			t.Errorf("Reserve during a 1m pause with a 30s deadline = %v, want *DeadlineError with Wait 1m", err)
		}
	})
}

// TestThrottleStorm: a host answering 429 (no Retry-After) to everything is
// sent 4 requests in 60s, at 0, 2, 10 and 42s, as its pause grows
// fourfold from the rate's interval: its rate halves from 60/min, stays
// at the second refusal and falls to a quarter from the third, at the
// floor from the fifth.
func TestThrottleStorm(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{})
	start := c.Now()
	var sent []time.Duration
	for {
		c.Advance(reserve(t, s, host))
		if c.Now().Sub(start) >= time.Minute {
			break
		}
		sent = append(sent, c.Now().Sub(start))
		observe(s, host, classify.Throttled, 0)
	}
	want := []time.Duration{0, 2 * time.Second, 10 * time.Second, 42 * time.Second}
	if len(sent) != len(want) {
		t.Fatalf("requests sent at %v, want %v", sent, want)
	}
	for i := range want {
		if sent[i] != want[i] {
			t.Errorf("request %d sent at %v, want %v", i+1, sent[i], want[i])
		}
	}
	if got := s.Status(host).PerMinute; got != 1.875 {
		t.Errorf("rate after the storm = %v, want 60/2/4/4 = 1.875", got)
	}
}

// TestShutAfterOKs: a host that let a run of OKs through and refuses the
// first attempt after its pause again (a window that counts refusals,
// still shut) settles at a quarter of the rate at once, and waits four
// times as long.
func TestShutAfterOKs(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{PerMinute: 600})
	okRun(t, c, s, 20)
	observe(s, host, classify.Throttled, time.Second)
	r := s.Status(host).PerMinute
	c.Advance(time.Second)
	observe(s, host, classify.Throttled, time.Second)
	st := s.Status(host)
	if st.PerMinute != r/4 || st.PausedUntil.Sub(c.Now()) != 4*time.Second {
		t.Errorf("second 429 with no OK since the pause: rate %v, pause %v; want %v, 4s", st.PerMinute, st.PausedUntil.Sub(c.Now()), r/4)
	}
}

func TestRecent(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{Window: time.Minute})
	start := c.Now()
	for _, o := range []classify.Outcome{classify.OK, classify.OK, classify.Transient, classify.Throttled,
		classify.Refused, classify.Permanent, classify.Canceled, classify.Outcome(42)} {
		observe(s, host, o, 0)
	}
	st := s.Status(host)
	want := ratelimit.Outcomes{OK: 2, Transient: 1, Throttled: 1, Refused: 1, Permanent: 1, Canceled: 1}
	if st.Recent != want || !st.RecentSince.Equal(start) {
		t.Errorf("Recent = %v since %v, want %v since %v", st.Recent, st.RecentSince, want, start)
	}
	if got, want := st.Recent.String(), "ok=2 transient=1 throttled=1 refused=1 permanent=1 canceled=1"; got != want {
		t.Errorf("Outcomes.String() = %q, want %q", got, want)
	}
	c.Advance(time.Minute)
	if st := s.Status(host); st.Recent != (ratelimit.Outcomes{}) || !st.RecentSince.IsZero() {
		t.Errorf("Recent after the window = %v since %v, want none", st.Recent, st.RecentSince)
	}
	observe(s, host, classify.OK, 0)
	if st := s.Status(host); st.Recent != (ratelimit.Outcomes{OK: 1}) || !st.RecentSince.Equal(c.Now()) {
		t.Errorf("Recent in a new window = %v since %v, want ok=1 since now", st.Recent, st.RecentSince)
	}
}

func TestEvict(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{IdleTTL: time.Minute})
	reserve(t, s, "idle.example")
	observe(s, "paused.example", classify.Throttled, 10*time.Minute)
	c.Advance(2 * time.Minute)
	if n := s.Evict(); n != 1 || s.Len() != 1 {
		t.Errorf("Evict() after 2m = %d, Len %d; want 1, 1 (the paused host kept)", n, s.Len())
	}
	if got := reserve(t, s, "paused.example"); got != 8*time.Minute {
		t.Errorf("Reserve(paused host) after Evict = %v, want the remaining 8m", got)
	}
	c.Advance(20 * time.Minute)
	if n := s.Evict(); n != 1 || s.Len() != 0 {
		t.Errorf("Evict() after the pause = %d, Len %d; want 1, 0", n, s.Len())
	}
	if st := s.Status("paused.example"); st.PerMinute != 60 {
		t.Errorf("Status of an evicted host = %+v, want configured rate", st)
	}
}

func TestEvictLazy(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{IdleTTL: time.Minute})
	names := func(prefix string) []string {
		n := make([]string, 1000)
		for i := range n {
			n[i] = prefix + string(rune('a'+i%26)) + time.Duration(i).String()
		}
		return n
	}
	for _, h := range names("old-") {
		reserve(t, s, h)
	}
	c.Advance(2 * time.Minute)
	for _, h := range names("new-") {
		reserve(t, s, h)
	}
	if n := s.Len(); n != 1000 {
		t.Errorf("Len() = %d, want 1000 (old hosts evicted lazily)", n)
	}
}

func TestDefaultConfig(t *testing.T) {
	got := ratelimit.DefaultConfig()
	if got.PerMinute != 60 || got.Burst != 1 || got.Floor != 1 || got.RecoverAfter != 10 ||
		got.MaxPause != time.Hour || got.Window != 5*time.Minute || got.IdleTTL != 10*time.Minute || got.Now == nil {
		t.Errorf("DefaultConfig() = %+v", got)
	}
}

func BenchmarkReserveObserve(b *testing.B) {
	s := mustLimit(ratelimit.Config{PerMinute: 1e12})
	ctx := context.Background()
	ok := classify.Result{Outcome: classify.OK}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Reserve(ctx, host); err != nil {
			b.Fatal(err)
		}
		s.Observe(host, ok)
	}
}

// TestStrayDuringProbe: a host whose first answer was a 429 halved its
// rate from 600 to 300 (nothing was known of it). The crawl's demand there
// is an attempt a second; once the probe's 2-minute backoff has passed,
// the rate climbs above 300 toward 600. A 429 then, at a demand a tenth
// of the rate, is a stray: the probe goes on (the rate does not fall back
// to 300 for a doubled backoff), and the host is back at 600 once the
// probe has climbed.
func TestStrayDuringProbe(t *testing.T) {
	c := newClock()
	s := newSet(c, ratelimit.Config{PerMinute: 600})
	reserve(t, s, host)
	observe(s, host, classify.Throttled, time.Second)
	c.Advance(time.Second)
	slow := func(n int) {
		for range n {
			c.Advance(reserve(t, s, host) + time.Second)
			s.Observe(host, classify.Result{Outcome: classify.OK, Latency: 10 * time.Millisecond})
		}
	}
	slow(130)
	before := s.Status(host).PerMinute
	if before <= 300 {
		t.Fatalf("130 OKs a second apart after the cut to 300: rate %v, want the probe above 300", before)
	}
	s.Observe(host, classify.Result{Outcome: classify.Throttled, RetryAfter: time.Second})
	if got := s.Status(host).PerMinute; got != before {
		t.Errorf("429 during the probe at a tenth of the rate: rate %v, want %v (a stray)", got, before)
	}
	c.Advance(time.Second)
	slow(200)
	if got := s.Status(host).PerMinute; got != 600 {
		t.Errorf("200 OKs later: rate %v, want 600", got)
	}
}
