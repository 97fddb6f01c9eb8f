package pacing_test

import (
	"context"
	"fmt"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
)

func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := pacing.New(ratelimit.Config{
		PerMinute: 40,
		Now:       func() time.Time { return now }, // a fake clock
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	for range 2 {
		r, _ := s.Reserve(ctx, "example.com")
		fmt.Println("wait", r.Wait)
	}

	// The second attempt is answered 429 with Retry-After: 5.
	s.Observe("example.com", classify.Result{Outcome: classify.Throttled, Status: 429, RetryAfter: 5 * time.Second})
	st := s.Status("example.com")
	fmt.Println("rate", st.PerMinute, "paused for", st.PausedUntil.Sub(now))

	// The throttle drained the bucket: the attempts waiting for the pause
	// go out from its end, one interval apart at the halved rate.
	for range 2 {
		r, _ := s.Reserve(ctx, "example.com")
		fmt.Println("wait", r.Wait)
	}
	// Output:
	// wait 0s
	// wait 1.5s
	// rate 20 paused for 5s
	// wait 5s
	// wait 8s
}

func ExampleSet_SetCeiling() {
	s, err := pacing.New(ratelimit.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// robots.txt says Crawl-delay: 10, i.e. 6 requests a minute.
	_ = s.SetCeiling("example.com", 60.0/10)
	st := s.Status("example.com")
	fmt.Println(st.PerMinute, st.Ceiling, st.Configured)
	// Output: 6 6 60
}
