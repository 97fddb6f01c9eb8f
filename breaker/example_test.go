package breaker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
)

// A store whose breakers open after 3 consecutive host failures: the
// fourth attempt is refused with ErrOpen, without being sent.
func Example() {
	store, err := hoststate.NewMemory(hoststate.Config{
		Breaker: breaker.Config{
			FailureThreshold: 3,
			OnStateChange: func(c breaker.StateChange) {
				fmt.Printf("%s: %v -> %v\n", c.Host, c.From, c.To)
			},
		},
		Limit: ratelimit.Config{PerMinute: 6e6, Burst: 10}, // pacing that never binds here
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 3 {
		adm, err := store.Admit(ctx, "example.com")
		if err != nil {
			fmt.Println(err)
			return
		}
		// ... wait adm.Wait, send the attempt: 503 ...
		store.Record(ctx, "example.com", adm, classify.Result{Outcome: classify.Transient, Status: 503})
	}
	_, err = store.Admit(ctx, "example.com")
	fmt.Println(errors.Is(err, egresskit.ErrOpen))
	// Output:
	// example.com: closed -> open
	// true
}
