package blocks_test

import (
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/blocks"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func res(status int) classify.Result {
	switch {
	case status >= 200 && status < 400:
		return classify.Result{Outcome: classify.OK, Status: status}
	case status == 429:
		return classify.Result{Outcome: classify.Throttled, Status: status}
	case status >= 500:
		return classify.Result{Outcome: classify.Transient, Status: status}
	}
	return classify.Result{Outcome: classify.Permanent, Status: status}
}

func page(i int) *url.URL { return &url.URL{Path: fmt.Sprintf("/item/%d", i)} }

// step is one answer in a scenario; flag says whether Observe must flag it.
type step struct {
	status int
	url    int
	flag   string // "", "run" or "shift"
}

func TestRules(t *testing.T) {
	repeat := func(n int, f func(i int) step) []step {
		var out []step
		for i := range n {
			out = append(out, f(i))
		}
		return out
	}
	tenDistinct := repeat(10, func(i int) step { return step{status: 403, url: i} })
	tenDistinct[9].flag = "run"
	mixed := repeat(10, func(i int) step {
		if i%2 == 0 {
			return step{status: 401, url: i}
		}
		return step{status: 403, url: i}
	})
	mixed[9].flag = "run"
	// Four refusals, one success, four times: no run of ten, but 16 of
	// the last 20 answers refused.
	sprinkled := repeat(20, func(i int) step {
		if i%5 == 4 {
			return step{status: 200, url: 1000 + i}
		}
		return step{status: 403, url: i}
	})
	sprinkled[19].status, sprinkled[19].url = 403, 19 // last of the window
	sprinkled[18].status, sprinkled[18].url = 200, 1018
	sprinkled[19].flag = "shift"
	private := repeat(53, func(i int) step {
		if i == 5 || i == 20 || i == 41 {
			return step{status: 403, url: 10000 + i}
		}
		return step{status: 200, url: i}
	})
	samePage := repeat(30, func(int) step { return step{status: 403, url: 7} })
	withNotFound := repeat(14, func(i int) step {
		if i%3 == 2 {
			return step{status: 404, url: 500 + i}
		}
		return step{status: 403, url: i}
	})
	withNotFound[13].flag = "run" // the tenth 403, after four 404s
	throttled := repeat(30, func(i int) step { return step{status: 429, url: i} })
	transient := repeat(30, func(i int) step { return step{status: 503, url: i} })
	broken := repeat(9, func(i int) step { return step{status: 403, url: i} })
	broken = append(broken, step{status: 200, url: 99})
	broken = append(broken, repeat(9, func(i int) step { return step{status: 403, url: 20 + i} })...)

	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"ten distinct 403s", tenDistinct},
		{"401 and 403 mixed", mixed},
		{"refusals sprinkled with successes", sprinkled},
		{"three private 403s among fifty OKs", private},
		{"one forbidden page asked thirty times", samePage},
		{"404s neither count nor reset", withNotFound},
		{"429s are pacing's business", throttled},
		{"503s are transient", transient},
		{"a success breaks the run", broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := blocks.New(blockwatch.Config{})
			for i, s := range tc.steps {
				ev := w.Observe("example.com", page(s.url), res(s.status), t0.Add(time.Duration(i)*time.Second))
				switch {
				case s.flag == "" && ev != nil:
					t.Fatalf("answer %d (%d %d) flagged: %s", i, s.status, s.url, ev.Reason)
				case s.flag != "" && ev == nil:
					t.Fatalf("answer %d (%d %d) not flagged, want rule %s", i, s.status, s.url, s.flag)
				case s.flag != "" && ev.Rule != s.flag:
					t.Fatalf("answer %d flagged by %s, want %s: %s", i, ev.Rule, s.flag, ev.Reason)
				}
			}
		})
	}
}

func TestEvidence(t *testing.T) {
	w := blocks.New(blockwatch.Config{})
	var ev *blockwatch.Evidence
	for i := range 10 {
		st := 403
		if i == 3 {
			st = 401
		}
		ev = w.Observe("example.com", page(i), res(st), t0.Add(time.Duration(i)*time.Second))
	}
	if ev == nil {
		t.Fatal("not flagged")
	}
	want := "10 refusal-like answers (401×1, 403×9) to 10 distinct URLs with no success in between"
	if ev.Reason != want || ev.String() != want {
		t.Errorf("Reason = %q, want %q", ev.Reason, want)
	}
	if ev.Rule != "run" || ev.Answers != 10 || ev.Refusals != 10 || ev.URLs != 10 || ev.Statuses[403] != 9 || ev.Statuses[401] != 1 || !ev.Since.Equal(t0) {
		t.Errorf("Evidence = %+v", ev)
	}
	// The record starts afresh after a flag.
	for i := range 9 {
		if ev := w.Observe("example.com", page(100+i), res(403), t0); ev != nil {
			t.Fatalf("flagged again after %d refusals", i+1)
		}
	}
}

func TestIgnored(t *testing.T) {
	w := blocks.New(blockwatch.Config{Run: 2})
	for i, r := range []classify.Result{
		{Outcome: classify.Canceled, Status: 403},
		{Outcome: classify.Refused, Status: 403, Reason: "challenge marker"},
		{Outcome: classify.Permanent, Status: 403, Egress: true},
		{Outcome: classify.Transient, Status: 0, Reason: "connection refused"},
		{Outcome: classify.Throttled, Status: 403, Reason: "rate limit"},
	} {
		if ev := w.Observe("example.com", page(i), r, t0); ev != nil {
			t.Errorf("%+v counted: %s", r, ev.Reason)
		}
	}
}

func TestConfig(t *testing.T) {
	if w := blocks.New(blockwatch.Config{Disabled: true}); w != nil {
		t.Error("Disabled returned a Watch")
	}
	var nilWatch *blocks.Watch
	if ev := nilWatch.Observe("h", page(1), res(403), t0); ev != nil || nilWatch.Len() != 0 {
		t.Error("nil Watch flagged")
	}
	nilWatch.Forget("h")

	// Custom statuses and run length.
	w := blocks.New(blockwatch.Config{Run: 3, Statuses: []int{451}})
	for i := range 3 {
		if ev := w.Observe("h", page(i), res(403), t0); ev != nil {
			t.Fatal("403 counted though only 451 is refusal-like")
		}
	}
	var ev *blockwatch.Evidence
	for i := range 3 {
		ev = w.Observe("h", page(i), res(451), t0)
	}
	if ev == nil || ev.Statuses[451] != 3 {
		t.Errorf("three 451s not flagged with Run 3: %+v", ev)
	}

	// A negative or NaN Share means the default: a quarter of refusals
	// among successes is no block.
	for _, share := range []float64{-1, math.NaN()} {
		w := blocks.New(blockwatch.Config{Share: share})
		for i := range 40 {
			st := 200
			if i%4 == 0 {
				st = 403
			}
			if ev := w.Observe("h", page(i), res(st), t0); ev != nil {
				t.Fatalf("Share %v: flagged at %d with 1 refusal in 4: %s", share, i, ev.Reason)
			}
		}
	}

	// Share above 1 switches the shift rule off.
	w = blocks.New(blockwatch.Config{Share: 2})
	for i := range 100 {
		st := 403
		if i%5 == 4 {
			st = 200
		}
		if ev := w.Observe("h", page(i), res(st), t0); ev != nil {
			t.Fatalf("flagged at %d with the shift rule off: %s", i, ev.Reason)
		}
	}
}

func TestBoundedAndForget(t *testing.T) {
	w := blocks.New(blockwatch.Config{MaxHosts: 2})
	for _, h := range []string{"a", "b", "c"} {
		w.Observe(h, page(1), res(403), t0)
	}
	if n := w.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	for i := range 9 {
		w.Observe("c", page(i), res(403), t0)
	}
	w.Forget("c")
	if ev := w.Observe("c", page(50), res(403), t0); ev != nil {
		t.Error("Forget kept the record")
	}
	if n := w.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
}

func Example() {
	w := blocks.New(blockwatch.Config{})
	for i := range 10 {
		u := &url.URL{Path: fmt.Sprintf("/product/%d", i)}
		if ev := w.Observe("shop.example", u, classify.Result{Outcome: classify.Permanent, Status: 403}, time.Now()); ev != nil {
			fmt.Println("suspected block:", ev.Reason)
		}
	}
	// Output: suspected block: 10 refusal-like answers (403×10) to 10 distinct URLs with no success in between
}

// Observe runs on every attempt: once a host's record exists, neither a
// success nor a refusal that flags nothing allocates.
func TestObserveAllocs(t *testing.T) {
	w := blocks.New(blockwatch.Config{})
	u := &url.URL{Path: "/private", RawQuery: "a=1"}
	for i := range 40 {
		w.Observe("h", page(i%3), res(403), t0) // fill the window: the shift rule counts distinct URLs
	}
	for _, st := range []int{403, 200} {
		if n := testing.AllocsPerRun(200, func() { w.Observe("h", u, res(st), t0) }); n != 0 {
			t.Errorf("Observe(%d) allocates %v times per call, want 0", st, n)
		}
	}
}
