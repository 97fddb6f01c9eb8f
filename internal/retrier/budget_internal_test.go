package retrier

import (
	"fmt"
	"testing"
	"time"
)

// TestBudgetCountsAcrossHosts: the counts of hosts taking turns stay apart
// (the entry found last serves only its own host), and a host swept after
// two idle windows starts again from nothing, even when it was the host
// counted last before the sweep.
func TestBudgetCountsAcrossHosts(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := newBudget(0.2, func() time.Time { return now })
	for range 3 {
		b.request("a.test")
		b.request("b.test")
		b.request("a.test")
	}
	if got, want := b.hosts["a.test"].requests, 6.0; got != want {
		t.Errorf("a.test requests = %v, want %v", got, want)
	}
	if got, want := b.hosts["b.test"].requests, 3.0; got != want {
		t.Errorf("b.test requests = %v, want %v", got, want)
	}
	// The budget's minimum: 10 retries, then none.
	for i, want := range []bool{true, true, true, true, true, true, true, true, true, true, false} {
		if got := b.take("a.test"); got != want {
			t.Errorf("take #%d = %v, want %v", i+1, got, want)
		}
	}

	// a.test, counted last, is swept by its own next request: that
	// request is counted in a new entry of hosts.
	now = now.Add(2 * budgetWindow)
	b.request("a.test")
	if _, ok := b.hosts["b.test"]; ok {
		t.Errorf("b.test kept after two idle windows")
	}
	if c := b.hosts["a.test"]; c == nil || c.requests != 1 || c.retries != 0 {
		t.Errorf("a.test after the sweep = %+v, want a new entry with 1 request", c)
	}
	for i := range 3 {
		if !b.take("a.test") {
			t.Errorf("take #%d after the sweep = false, want true", i+1)
		}
	}
}

// BenchmarkBudgetRequest counts requests to one host, and to 16 hosts in
// turn, on a clock that does not move (the clock read is not measured).
func BenchmarkBudgetRequest(b *testing.B) {
	now := time.Unix(1_000_000, 0)
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			bg := newBudget(0.2, func() time.Time { return now })
			hosts := make([]string, n)
			for i := range hosts {
				hosts[i] = fmt.Sprintf("host-%d.example.test", i)
			}
			i := 0
			for b.Loop() {
				bg.request(hosts[i])
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}

// TestBudgetRetriesStrays: a host that received 20 requests in the window
// and answered 8 of them with a stray refusal has all 8 retried (the
// floor, 10 a window, is above 20 % of 20); the 11th retry is not made.
func TestBudgetRetriesStrays(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := newBudget(0.2, func() time.Time { return now })
	for range 20 {
		b.request("h.test")
	}
	for i := range 8 {
		if !b.take("h.test") {
			t.Fatalf("retry #%d of a host with 20 requests: refused, want made", i+1)
		}
	}
	b.take("h.test")
	b.take("h.test")
	if b.take("h.test") {
		t.Errorf("retry #11 of a host with 20 requests in the window: made, want refused")
	}
}
